"""One process at a time in a folder: an exclusive ``fcntl.flock`` on a lock file in it.

Training holds one on its work dir, ``tools/predict.py`` on its ``--out``: a second run started there stops
in one line instead of mixing its files with the first's. The lock goes with the process (the kernel drops
it when the descriptor closes), so a killed run never leaves a stale one; the file holds the holder's pid,
for the message.
"""
from __future__ import annotations

import fcntl
import os
from os import PathLike
from pathlib import Path


class FolderInUse(Exception):
    """Another process holds the folder's lock; ``holder`` is its pid as it wrote it ("" if unknown)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def lock_folder(folder: str | PathLike, name: str) -> int:
    """The descriptor of ``folder/name`` with an exclusive lock on it (close it to release the lock).

    Raises :class:`FolderInUse` where another process holds it and OSError where the file cannot be made
    (never through a symbolic link planted at its name)."""
    fd = os.open(Path(folder) / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip()
        os.close(fd)
        raise FolderInUse(holder) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd
