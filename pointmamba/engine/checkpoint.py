"""Checkpoints: written atomically (temp file + rename) and read back with clear errors."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch


class CheckpointError(ValueError):
    """A checkpoint file that is missing, truncated or not one of ours."""


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically: a crash mid-write never leaves a half file under ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint``; raises CheckpointError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # torch raises several types for truncated/garbage files
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt or truncated?): {exc}") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not a pointmamba checkpoint (no 'model' entry)")
    return state
