"""python -m pointmamba.research.probe_distance: the synthetic task, seeded runs, the table."""
from __future__ import annotations

import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
from pointmamba.research import probe_distance  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):  # noqa: ANN001
    yield


def test_batches_mark_two_points_and_target_their_distance() -> None:
    batches = probe_distance.make_batches(2, 3, 20, seed=0)
    for b in batches:
        point, marks = b["point"], b["marks"]
        assert point.orders == probe_distance.ORDERS and point.lengths.tolist() == [20, 20, 20]
        assert torch.equal(point.feat[:, 0].nonzero().flatten(), marks.flatten().sort().values)
        assert torch.equal(point.batch[marks[:, 0]], torch.arange(3)) and torch.equal(point.batch[marks[:, 1]], torch.arange(3))
        dist = (point.coord[marks[:, 0]] - point.coord[marks[:, 1]]).norm(dim=1)
        torch.testing.assert_close(b["target"], dist.double().float(), rtol=1e-5, atol=1e-5)
        grid = point.grid_coord  # one point per voxel, as the 1 mm grid promises
        assert len(torch.unique(grid + 1000 * point.batch[:, None], dim=0)) == len(grid)
    again = probe_distance.make_batches(2, 3, 20, seed=0)
    assert all(torch.equal(a["point"].coord, b["point"].coord) and torch.equal(a["marks"], b["marks"]) for a, b in zip(batches, again))
    assert not torch.equal(probe_distance.make_batches(1, 3, 20, seed=1)[0]["point"].coord, batches[0]["point"].coord)
    with pytest.raises(ValueError, match="--points"):
        probe_distance.make_batches(1, 1, 1, seed=0)


@pytest.mark.parametrize("position", ["none", "sin+logical"])
def test_seeded_runs_reproduce_bit_for_bit(position: str) -> None:
    train = probe_distance.make_batches(2, 4, 16, seed=3)
    test = probe_distance.make_batches(1, 8, 16, seed=4)
    args = Namespace(channels=8, depth=1, window=8, lr=3e-3, steps=3)
    a = probe_distance.run_one(position, 0, train, test, args)
    b = probe_distance.run_one(position, 0, train, test, args)
    assert a["test_mse_mm2"] == b["test_mse_mm2"] and a["r2"] == b["r2"] and a["parameters"] == b["parameters"]
    assert a["r2"] < 1.0 and a["test_mse_mm2"] > 0
    c = probe_distance.run_one(position, 1, train, test, args)
    assert c["test_mse_mm2"] != a["test_mse_mm2"]


def test_table_per_run_and_mean_std_over_seeds(tmp_path: Path) -> None:
    rows = [{"position": pos, "seed": seed, "test_mse_mm2": mse, "r2": r2, "train_loss_last10pct": 0.5, "train_s": 1.0,
             "parameters": 1234} for pos, seed, mse, r2 in [("none", 0, 6.0, 0.5), ("none", 1, 8.0, 0.3), ("gru", 0, 2.0, 0.9),
                                                            ("gru", 1, 2.0, 0.9)]]
    md = probe_distance.write_tables(rows, tmp_path, "python -m pointmamba.research.probe_distance --seeds 0 1", "setup line")
    assert "| `none` | 1 | 8.000 | 0.300 | 0.500 | 1.0 | 1,234 |" in md
    assert "| `none` | 7.000 ± 1.414 | 0.400 ± 0.141 |" in md and "| `gru` | 2.000 ± 0.000 | 0.900 ± 0.000 |" in md
    assert (tmp_path / "results.md").read_text() == md and len((tmp_path / "results.csv").read_text().splitlines()) == 5


@pytest.mark.slow
def test_cli_writes_table(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pointmamba.research.probe_distance", "--positions", "none", "logical", "--seeds", "0", "1",
           "--steps", "2", "--points", "12", "--batch-size", "4", "--train-batches", "1", "--test-batches", "1",
           "--channels", "8", "--depth", "1", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    md = (tmp_path / "results.md").read_text()
    assert "| `none` | 0 |" in md and "| `logical` | 1 |" in md and "Mean ± std over seeds [0, 1]" in md
    assert "Command: `python -m pointmamba.research.probe_distance --positions none logical" in md
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 5
    bad = subprocess.run(cmd[:3] + ["--steps", "0"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "--steps must be >= 1" in bad.stderr
