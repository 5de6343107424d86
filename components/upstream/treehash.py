"""Git's object id of a directory tree, computed from the files on disk.

A pinned upstream directory is named by the id git gives its tree at the pinned tag
(``git rev-parse <tag>:<path>``), so a copy from any source (a clone, a mirror folder, an
archive) can be checked without git: same id, same bytes, same file modes and links.
Git's format: a blob is ``blob <size>\\0<bytes>``; a tree lists ``<mode> <name>\\0<20-byte
id>`` per entry, sorted by name with directories compared as ``name/``; directories with
no files are not recorded.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

_FILE, _EXECUTABLE, _LINK, _DIR = b"100644", b"100755", b"120000", b"40000"


def _object_id(kind: bytes, body: bytes) -> bytes:
    return hashlib.sha1(kind + b" " + str(len(body)).encode() + b"\0" + body).digest()


def _tree(path: Path) -> bytes | None:
    entries: list[tuple[bytes, bytes, bytes]] = []
    for entry in os.scandir(path):
        name = os.fsencode(entry.name)
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            entries.append((name, _LINK, _object_id(b"blob", os.fsencode(os.readlink(entry.path)))))
        elif stat.S_ISDIR(info.st_mode):
            subtree = _tree(Path(entry.path))
            if subtree is not None:
                entries.append((name + b"/", _DIR, subtree))
        else:
            mode = _EXECUTABLE if info.st_mode & stat.S_IXUSR else _FILE
            entries.append((name, mode, _object_id(b"blob", Path(entry.path).read_bytes())))
    if not entries:
        return None
    entries.sort(key=lambda e: e[0])
    body = b"".join(mode + b" " + name.removesuffix(b"/") + b"\0" + oid for name, mode, oid in entries)
    return _object_id(b"tree", body)


def blob_id(data: bytes) -> str:
    """The id git gives a file holding ``data`` (hex): what ``git rev-parse <tag>:<file>`` names."""
    return _object_id(b"blob", data).hex()


def tree_id(path: Path) -> str:
    """The id git gives the tree of the files under ``path`` (hex).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` holds no file.
    """
    found = _tree(path)
    if found is None:
        raise ValueError(f"{path} holds no file")
    return found.hex()
