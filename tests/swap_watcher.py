"""The attacker of a checkpoint shard who replaces it between the trainer's check of the file
and its parse: once FILE has been opened, REPLACEMENT is renamed over it. Linux inotify,
through ctypes (``inotify(7)``); prints ``watching`` once the watch is set and ``swapped``
after the rename.

    python tests/swap_watcher.py FILE REPLACEMENT
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

IN_OPEN = 0x20
"""``inotify(7)``: the file was opened."""
EVENT = struct.Struct("iIII")
"""``struct inotify_event`` without its name: wd, mask, cookie, len."""


def main(target: str, replacement: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0 or libc.inotify_add_watch(fd, target.encode(), IN_OPEN) < 0:
        raise OSError(ctypes.get_errno(), f"inotify on {target}")
    print("watching", flush=True)
    opened = False
    while not opened:
        events = os.read(fd, 4096)
        offset = 0
        while offset < len(events):
            _, mask, _, length = EVENT.unpack_from(events, offset)
            opened |= bool(mask & IN_OPEN)
            offset += EVENT.size + length
    # The opener's file descriptor keeps the old file; whoever opens the path next gets this one.
    os.replace(replacement, target)
    print("swapped", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
