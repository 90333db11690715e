"""The training work dir: one run at a time, never replace a previous run by accident, never write through
a planted link, and clean up after crashed writes.

A work dir holds a previous run when it has ``last.pth`` or ``best.pth``. Training there again needs
``--resume`` (continue it) or ``--overwrite`` (replace it); plain training refuses, so forgetting
``--resume`` cannot replace ``best.pth`` or mix two runs in ``metrics.jsonl``. Metric lines without any
checkpoint (a run killed in its first epoch) hold nothing to resume: a new run starts fresh over them.

A running training holds an exclusive lock (``fcntl.flock`` on :data:`LOCK_FILE`, see
:mod:`pointmamba.utils.folder_lock`): a second one started in the same work dir stops in one line instead of
mixing its metrics, log and checkpoints with the first.
The lock goes with the process, so a killed run never leaves a stale one.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Callable

from ..utils.folder_lock import FolderInUse, lock_folder

CHECKPOINTS = ("last.pth", "best.pth")
LOGS = ("metrics.jsonl", "diagnostics.jsonl")
RUN_FILES = CHECKPOINTS + LOGS
"""What ``--overwrite`` removes, with the TensorBoard event files in ``tb/``."""
LOCK_FILE = ".train.lock"
VAL_PICTURES = "val_pictures"
"""A picture of one validation prediction per validation (``epoch_NNN.png``), also in TensorBoard."""
WRITTEN = RUN_FILES + ("config.yaml", "train.log", "tb", VAL_PICTURES, LOCK_FILE)
"""Every name a run writes in its work dir (a link planted under one of them is refused)."""
OWN = WRITTEN + ("ablate.log",)
"""Names that belong to a run (``pointmamba-ablate`` logs a run beside it); anything else is the user's."""
MARKERS = tuple(name for name in OWN if name != "config.yaml")
"""Names that show a directory is a work dir (a ``config.yaml`` alone could be the user's own)."""
TB_EVENTS = "events.out.tfevents.*"


class WorkDirError(ValueError):
    """Training would replace or mix with a previous run, write through a link, or there is nothing to
    resume."""


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def previous_run(work_dir: str | Path) -> list[str]:
    """The files of a previous run that can be resumed or must be replaced: its checkpoints (none: no such
    run), and its metrics.jsonl when that has lines."""
    work_dir = Path(work_dir)
    found = [name for name in CHECKPOINTS if os.path.lexists(work_dir / name)]
    metrics = work_dir / "metrics.jsonl"
    if found and metrics.is_file() and metrics.read_bytes().strip():
        found.append("metrics.jsonl")
    return found


def resume_checkpoint(work_dir: str | Path) -> Path | None:
    """The checkpoint ``--resume`` continues from: ``last.pth``, else ``best.pth`` (a run killed between its
    two saves of epoch 1 has only that one; it holds the same full state), else None."""
    for name in CHECKPOINTS:
        if (Path(work_dir) / name).is_file():
            return Path(work_dir) / name
    return None


def check_work_dir_path(work_dir: str | Path, resume: bool, overwrite: bool) -> None:
    """Raise :class:`WorkDirError` (one line) for flags that exclude each other, a work dir that is a file
    or a symbolic link, a link planted under a name a run writes, or (new runs) a non-empty directory with
    nothing of a run in it. Reads only."""
    work_dir = Path(work_dir)
    if resume and overwrite:
        raise WorkDirError("--resume and --overwrite exclude each other: continue the run in "
                           f"{work_dir} or replace it, not both")
    if work_dir.is_symlink():  # e.g. a link to /: --overwrite would clear whatever it points to
        raise WorkDirError(f"work dir {work_dir} is a symbolic link (to {os.readlink(work_dir)}): give the "
                           "directory itself")
    if work_dir.exists() and not work_dir.is_dir():
        raise WorkDirError(f"work dir {work_dir} is a file, not a directory")
    if not work_dir.is_dir():
        return
    try:
        entries = sorted(p.name for p in work_dir.iterdir())
    except OSError as exc:
        raise WorkDirError(f"work dir {work_dir}: cannot list it: {exc.strerror or exc}") from None
    links = [name for name in WRITTEN if (work_dir / name).is_symlink()]
    if links:
        raise WorkDirError(f"work dir {work_dir}: {links[0]} is a symbolic link (to {os.readlink(work_dir / links[0])}); "
                           "a run writes its files itself, never through a link: remove it")
    foreign = [name for name in entries if name not in OWN and not _is_temp(name)]
    if not resume and foreign and not any(name in MARKERS for name in entries):
        raise WorkDirError(f"work dir {work_dir} is not empty and holds no training run ({', '.join(entries[:3])}"
                           f"{', ...' if len(entries) > 3 else ''}): choose an empty or new --out")


def check_previous_run(work_dir: str | Path, resume: bool, overwrite: bool) -> None:
    """Raise :class:`WorkDirError` (one line) when there is nothing to resume, or a new run would replace a
    previous one without ``--overwrite``. Reads only."""
    work_dir = Path(work_dir)
    if resume:
        if resume_checkpoint(work_dir) is None:
            raise WorkDirError(f"nothing to resume: no last.pth or best.pth in {work_dir} (train without --resume "
                               "to start a new run)")
        return
    found = previous_run(work_dir)
    if found and not overwrite:
        raise WorkDirError(f"{work_dir} holds a previous run ({', '.join(found)}): pass --resume to continue it "
                           "or --overwrite to replace it (or choose another --out)")


class WorkDirLock:
    """An exclusive ``flock`` on ``<work_dir>/.train.lock``, held until :meth:`release` or the process ends."""

    def __init__(self, work_dir: str | Path) -> None:
        work_dir = Path(work_dir)
        path = work_dir / LOCK_FILE
        try:
            work_dir.mkdir(parents=True, exist_ok=True)
            fd = lock_folder(work_dir, LOCK_FILE)
        except FolderInUse as busy:
            raise WorkDirError(f"work dir {work_dir} is in use by another training"
                               f"{f' (pid {busy.holder})' if busy.holder else ''}: "
                               "wait for it to end or choose another --out") from None
        except OSError as exc:
            raise WorkDirError(f"work dir {work_dir}: cannot create {path.name if work_dir.is_dir() else 'it'}: "
                               f"{exc.strerror or exc}") from None
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


def clear_previous_run(work_dir: str | Path, log: Callable[[str], None] = print,
                       why: str = "--overwrite: removed the previous run's") -> list[str]:
    """Delete what a previous run wrote and a new one would mix with: checkpoints, metrics, diagnostics,
    the TensorBoard event files in ``tb/`` and the validation pictures. Anything else (the user's notes, test results, other files in
    ``tb/``) stays. Returns the names removed (logged after ``why``)."""
    work_dir = Path(work_dir)
    removed = [name for name in RUN_FILES if os.path.lexists(work_dir / name)]
    for name in removed:
        (work_dir / name).unlink()
    tb = work_dir / "tb"
    events = sorted(p for p in tb.glob(TB_EVENTS) if p.is_file() or p.is_symlink()) if tb.is_dir() else []
    for path in events:
        path.unlink()
    if events:
        removed.append(f"{len(events)} TensorBoard event file(s) in tb/")
    pictures = work_dir / VAL_PICTURES
    shown = sorted(pictures.glob("epoch_*.png")) if pictures.is_dir() and not pictures.is_symlink() else []
    for path in shown:
        path.unlink()
    if shown:
        removed.append(f"{len(shown)} validation picture(s) in {VAL_PICTURES}/")
    if removed:
        log(f"{why} {', '.join(removed)} from {work_dir}")
    return removed


def remove_stale_temp_files(work_dir: str | Path) -> list[Path]:
    """Delete ``.<name>.pth.*.tmp`` files that a killed run left behind mid-write (an atomic save
    never renamed them into place, so they hold nothing a checkpoint does not)."""
    stale = sorted(Path(work_dir).glob(".*.pth.*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


# ------------------------------------------------------------------------------ the run's JSON-lines files
def _numbered_records(path: Path, warn: Callable[[str], None] | None) -> list[tuple[int, dict[str, Any]]]:
    out = []
    lines = path.read_bytes().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            if n == len(lines):
                message = f"{path}: line {n} is cut short (a crash or a full disk while writing it): dropped"
                (warn or (lambda m: warnings.warn(m, stacklevel=4)))(message)
                continue
            raise ValueError(f"{path}: line {n} is not JSON") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {n} is not a JSON object")
        out.append((n, _nan_for_null(record)))
    return out


def json_line(record: dict[str, Any]) -> str:
    """One line of a run's JSON-lines file: strict JSON, a number that is not finite (a NaN loss or
    gradient norm) written as ``null`` (:mod:`pointmamba.utils.finite_json`); :func:`read_jsonl` reads it back
    as NaN."""
    from ..utils.finite_json import dumps

    return dumps(record) + "\n"


def _nan_for_null(value: Any) -> Any:
    """The run's records hold numbers only: ``null`` stands for one that was not finite."""
    if isinstance(value, dict):
        return {k: _nan_for_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_for_null(v) for v in value]
    return math.nan if value is None else value


def read_jsonl(path: str | Path, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Records of a JSON-lines file in file order; [] if absent. A cut-short last line (a crash or a full
    disk while writing) is dropped with a warning (``warn``, default :func:`warnings.warn`); any other bad
    line is a ValueError naming the file and line."""
    path = Path(path)
    return [rec for _, rec in _numbered_records(path, warn)] if path.is_file() else []


def read_metrics(path: str | Path, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The epoch records of a run's ``metrics.jsonl`` in file order (see :func:`read_jsonl`); a record
    without a whole-number ``epoch`` >= 1 is a ValueError naming the file and line."""
    path = Path(path)
    numbered = _numbered_records(path, warn) if path.is_file() else []
    for n, rec in numbered:
        epoch = rec.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            text = repr(epoch)
            raise ValueError(f"{path}: line {n} has no epoch number (got {text[:40]}); is it a pointmamba "
                             "metrics file?")
    return [rec for _, rec in numbered]
