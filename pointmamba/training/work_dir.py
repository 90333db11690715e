"""The training work dir: never replace a previous run by accident, and clean up after crashed writes.

A work dir holds a previous run when it has ``last.pth``, ``best.pth`` or metric lines. Training there
again needs ``--resume`` (continue it) or ``--overwrite`` (replace it); plain training refuses, so
forgetting ``--resume`` cannot replace ``best.pth`` or mix two runs in ``metrics.jsonl``.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

CHECKPOINTS = ("last.pth", "best.pth")
RUN_FILES = CHECKPOINTS + ("metrics.jsonl",)


class WorkDirError(ValueError):
    """Training would replace or mix with a previous run, or there is nothing to resume."""


def previous_run(work_dir: str | Path) -> list[str]:
    """The files in ``work_dir`` that show a previous run (checkpoints, a non-empty metrics.jsonl)."""
    work_dir = Path(work_dir)
    found = [name for name in CHECKPOINTS if (work_dir / name).exists()]
    metrics = work_dir / "metrics.jsonl"
    if metrics.is_file() and metrics.read_text().strip():
        found.append("metrics.jsonl")
    return found


def check_work_dir(work_dir: str | Path, resume: bool, overwrite: bool) -> None:
    """Raise :class:`WorkDirError` (one line) unless training may start in ``work_dir``; reads only."""
    work_dir = Path(work_dir)
    if resume and overwrite:
        raise WorkDirError("--resume and --overwrite exclude each other: continue the run in "
                           f"{work_dir} or replace it, not both")
    if work_dir.exists() and not work_dir.is_dir():
        raise WorkDirError(f"work dir {work_dir} is a file, not a directory")
    if resume:
        if not (work_dir / "last.pth").is_file():
            raise WorkDirError(f"nothing to resume: {work_dir / 'last.pth'} not found (train without --resume "
                               "to start a new run)")
        return
    found = previous_run(work_dir)
    if found and not overwrite:
        raise WorkDirError(f"{work_dir} holds a previous run ({', '.join(found)}): pass --resume to continue it "
                           "or --overwrite to replace it (or choose another --work-dir)")


def clear_previous_run(work_dir: str | Path, log: Callable[[str], None] = print) -> None:
    """``--overwrite``: delete the previous run's checkpoints, metrics and TensorBoard events."""
    work_dir = Path(work_dir)
    removed = [name for name in RUN_FILES if (work_dir / name).exists()]
    for name in removed:
        (work_dir / name).unlink()
    if (work_dir / "tb").is_dir():
        shutil.rmtree(work_dir / "tb")
        removed.append("tb/")
    if removed:
        log(f"--overwrite: removed the previous run's {', '.join(removed)} from {work_dir}")


def remove_stale_temp_files(work_dir: str | Path) -> list[Path]:
    """Delete ``.<name>.pth.*.tmp`` files that a killed run left behind mid-write (an atomic save
    never renamed them into place, so they hold nothing a checkpoint does not)."""
    stale = sorted(Path(work_dir).glob(".*.pth.*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
