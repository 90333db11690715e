"""Written files get the mode the user's umask gives (mkstemp's 0600 kept results from colleagues)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.utils.atomic_file import atomic_write, current_umask
from pointmamba.data import save_labels, write_obj, write_ply
from pointmamba.checkpoints.checkpoint import save_checkpoint
from pointmamba.utils.atomic_file import save_figure


@pytest.fixture
def restore_umask():
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path: Path, mask: int, restore_umask) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.umask(mask)
    assert current_umask() == mask
    v = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    f = np.array([[0, 1, 2]])
    written = [
        save_labels(tmp_path / "a.json", np.zeros(3, dtype=np.int64), "upper", "P"),
        write_ply(tmp_path / "a.ply", v, f),
        write_obj(tmp_path / "a.obj", v, f),
        atomic_write(tmp_path / "cache.npz", b"x"),
    ]
    save_checkpoint({"model": {"w": torch.ones(1)}}, tmp_path / "a.pth")
    fig = plt.figure()
    save_figure(fig, tmp_path / "a.png")
    plt.close(fig)
    written += [tmp_path / "a.pth", tmp_path / "a.png"]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name
    assert not list(tmp_path.glob(".*.tmp"))
