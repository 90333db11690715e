"""Atomic file writes (temporary file beside the target + rename) that respect the user's umask.

A crash mid-write never leaves a half file under the target name, and writing through a planted
symlink is impossible: the rename replaces the link itself, never the file it points to. ``mkstemp``
creates files 0600; the finished file gets the mode ``open()`` would have given it (0666 minus the
umask), so results can be shared as the user's umask allows.
"""
from __future__ import annotations

import errno
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np


def current_umask() -> int:
    """The process umask, read without changing it where Linux exposes it (``/proc/self/status``).

    Elsewhere it falls back to setting and restoring it, which briefly changes it for other threads.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


TEMP_NAME_BYTES = 100
"""Bytes of the target's name that its temp file's name keeps (the rest of the 255 are the random part)."""


class DiskFullError(OSError):
    """A write that found the disk (or the user's quota) full; the message names the file and the free space."""

    def __str__(self) -> str:
        return str(self.strerror)


def utf8_prefix(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes in UTF-8, never inside a character."""
    return name.encode("utf-8", "surrogateescape")[:limit].decode("utf-8", "ignore")


def _free(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "unknown space"
    if free < 1024:
        return f"{free} bytes"
    power = min(int(math.log(free, 1024)), 4)
    return f"{free / 1024 ** power:.1f} {' KMGT'[power]}B"


@contextmanager
def atomic_writer(path: str | PathLike, fsync: bool = False) -> Iterator[BinaryIO]:
    """``with atomic_writer(path) as fh: fh.write(...)``: the file appears under ``path`` only when the
    block finishes without an exception; ``fsync`` also forces it to disk before the rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the temp name holds at most TEMP_NAME_BYTES of the target's: a name near the file system's 255-byte
    # limit would otherwise give "File name too long" on the temp file alone
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{utf8_prefix(path.name, TEMP_NAME_BYTES)}.",
                                   suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # no room, or no inode left
            raise DiskFullError(exc.errno, f"{path}: cannot write it, the disk is full "
                                           f"({_free(path.parent)} free in {path.parent})") from None
        raise


def atomic_write(path: str | PathLike, payload: bytes, fsync: bool = False) -> Path:
    """Write ``payload`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path, fsync=fsync) as fh:
        fh.write(payload)
    return Path(path)


def save_figure(fig: Any, path: str | PathLike, **kwargs: Any) -> Path:
    """``fig.savefig`` atomically (a symlink at ``path`` is replaced, not written through)."""
    path = Path(path)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path


# A spreadsheet reads a cell that starts with one of these as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell that no spreadsheet runs: text starting with ``= + - @``, a tab or a carriage
    return gets a leading ``'`` (OWASP's advice); numbers stay numbers (``-0.5`` is not text), None is
    an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (bool, int, float, np.number)):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_csv(path: str | PathLike, rows: list[dict[str, Any]], fieldnames: list[str] | None = None) -> Path:
    """Rows of dicts as a CSV file, atomically; columns ``fieldnames`` (default: the first row's). Every
    cell goes through :func:`csv_cell` (formulas neutralized, None empty); a newline in a cell is quoted,
    so ``csv.reader`` reads the rows back as written."""
    import csv
    import io

    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=[csv_cell(k) for k in fieldnames or (list(rows[0]) if rows else [])])
    writer.writeheader()
    for row in rows:
        writer.writerow({csv_cell(k): csv_cell(v) for k, v in row.items()})
    return atomic_write(path, buf.getvalue().encode("utf-8"))


def append_text(path: str | PathLike, text: str) -> None:
    """Append ``text`` to a log file (created with the umask's mode), never through a symbolic link at
    ``path`` (``O_NOFOLLOW``: a planted link is an error, not a write into the file it points to)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "a") as fh:
        fh.write(text)
