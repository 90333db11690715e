"""Checkpoints run no code: ours load with weights_only=True, a malicious pickle is refused before it runs."""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.config import load_config
from pointmamba.training.checkpoint import CheckpointError, UnsafeCheckpointError, load_checkpoint, save_checkpoint
from pointmamba.evaluation.inference import load_trained
from pointmamba.training.seed import rng_state, set_rng_state, set_seed
from pointmamba.training.trainer import Trainer

from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


class _Shell:
    """Unpickling this calls os.system: what an attacker's .pth does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def malicious_checkpoint(path: Path, marker: Path) -> Path:
    torch.save({"model": _Shell(f"touch {marker}"), "config": {}}, path)
    return path


def test_rng_state_is_plain_data_and_round_trips(tmp_path: Path) -> None:
    set_seed(5)
    np.random.randn(7)  # leaves a cached Gaussian in NumPy's state
    torch.save({"rng": rng_state()}, tmp_path / "rng.pth")
    expected = (random.random(), np.random.randn(3).tolist(), torch.rand(2).tolist())
    state = torch.load(tmp_path / "rng.pth", weights_only=True)  # no allowlist: tensors and plain data only
    set_rng_state(state["rng"])
    assert (random.random(), np.random.randn(3).tolist(), torch.rand(2).tolist()) == expected


def test_old_checkpoint_with_numpy_rng_state_still_loads(tmp_path: Path) -> None:
    """Checkpoints written before the change pickled np.random.get_state(): NumPy arrays are allowed."""
    old = {"model": {}, "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}
    torch.save(old, tmp_path / "old.pth")
    state = load_checkpoint(tmp_path / "old.pth")
    set_rng_state(state["rng"])
    assert np.array_equal(state["rng"]["numpy"][1], old["rng"]["numpy"][1])


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = malicious_checkpoint(tmp_path / "evil.pth", marker)
    with pytest.raises(UnsafeCheckpointError, match=r"evil.pth: refused to load: its pickle calls posix.system"):
        load_checkpoint(evil)
    with pytest.raises(UnsafeCheckpointError):
        load_trained(evil, torch.device("cpu"))
    assert not marker.exists()

    # train --resume: the work dir's last.pth is the attacker's file
    work = tmp_path / "work"
    work.mkdir()
    malicious_checkpoint(work / "last.pth", marker)
    cfg = load_config(None, [f"work_dir={work}", f"data.root={tmp_path / 'nowhere'}"])
    with pytest.raises(UnsafeCheckpointError):
        Trainer(cfg, resume=True)
    assert not marker.exists()

    # predict: one clear line, exit 2, nothing run
    scan = tmp_path / "x_upper.obj"
    scan.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    code, _, err = run_tool("predict", scan, "--checkpoint", evil, "--out", tmp_path / "o")
    assert code == 2 and "refused to load" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
    assert not marker.exists()


def test_corrupt_and_foreign_files_still_get_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "zeros.pth").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match=r"zeros.pth: not a readable checkpoint"):
        load_checkpoint(tmp_path / "zeros.pth")
    save_checkpoint({"model": {"w": torch.ones(2)}}, tmp_path / "ok.pth")
    data = (tmp_path / "ok.pth").read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.pth: not a readable checkpoint"):
        load_checkpoint(tmp_path / "cut.pth")
