"""Linux inotify (``inotify(7)``) through ctypes, for tests that must see who opens a file.

Run as a script it is the attacker of a checkpoint shard who replaces it between the
trainer's check of the file and its parse: once FILE has been opened, REPLACEMENT is
renamed over it. It prints ``watching`` once the watch is set and ``swapped`` after the
rename.

    python tests/swap_watcher.py FILE REPLACEMENT
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

IN_OPEN = 0x20
"""The file was opened."""
IN_CLOSE_NOWRITE = 0x10
"""A file opened for reading only was closed."""
IN_NONBLOCK = os.O_NONBLOCK
EVENT = struct.Struct("iIII")
"""``struct inotify_event`` without its name: wd, mask, cookie, len."""


def watch(path: str, mask: int, flags: int = 0) -> int:
    """An inotify descriptor watching ``path`` (a file, or a directory's entries) for ``mask``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(flags)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), mask) < 0:
        raise OSError(ctypes.get_errno(), f"inotify on {path}")
    return fd


def read_events(fd: int) -> list[tuple[int, str]]:
    """The events queued on ``fd`` (mask, name within a watched directory); [] when none
    are queued on a non-blocking descriptor."""
    try:
        events = os.read(fd, 65536)
    except BlockingIOError:
        return []
    found, offset = [], 0
    while offset < len(events):
        _, mask, _, length = EVENT.unpack_from(events, offset)
        name = events[offset + EVENT.size : offset + EVENT.size + length].rstrip(b"\0").decode()
        found.append((mask, name))
        offset += EVENT.size + length
    return found


def main(target: str, replacement: str) -> None:
    fd = watch(target, IN_OPEN)
    print("watching", flush=True)
    while not any(mask & IN_OPEN for mask, _ in read_events(fd)):
        pass
    # The opener's file descriptor keeps the old file; whoever opens the path next gets this one.
    os.replace(replacement, target)
    print("swapped", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
