"""Curve distances (per scan, per order, per pooled stage) and pointmamba-plot-distances on synthetic jaws."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.evaluation.curve_distances import consecutive_distances, stage_distances, summarize
from pointmamba.point.serialization import encode
from pointmamba.point.batch import PointBatch

from support.tiny import write_synthetic

ROOT = Path(__file__).resolve().parents[1]


def _two_scans() -> PointBatch:
    g = torch.Generator().manual_seed(0)
    a = torch.rand(400, 3, generator=g) * 10
    b = torch.rand(250, 3, generator=g) * 10 + 1000.0  # far away: a pair across scans would be ~1700 mm
    return PointBatch.from_list([a, b], grid_size=0.5)


def test_distances_match_brute_force_and_never_cross_scans():
    pb = _two_scans()
    dist = consecutive_distances(pb, ["z", "hilbert-trans"])
    assert list(dist) == ["z", "hilbert-trans"]
    for order, d in dist.items():
        assert d.shape == (len(pb) - 2,)  # the first point of each scan has no predecessor
        assert float(d.max()) < 20.0
        expected = []
        for s in range(2):  # per scan: sort by curve code (ties by coordinate), consecutive distances
            rows = (pb.batch == s).nonzero().squeeze(1)
            code = encode(pb.grid_coord[rows], order=order)
            c = pb.coord[rows].double().numpy()
            key = np.lexsort((c[:, 2], c[:, 1], c[:, 0], code.numpy()))
            expected.append(np.linalg.norm(np.diff(c[key], axis=0), axis=1))
        np.testing.assert_allclose(np.sort(d.numpy()), np.sort(np.concatenate(expected)), rtol=1e-5)


def test_pooled_stages_are_voxel_means():
    pb = _two_scans()
    stages = stage_distances(pb, ["z"], stages=3)
    assert len(stages) == 3
    # stage 1 points: one per (scan, grid_coord >> 1) cell, at the mean coordinate of its points
    key = torch.cat([pb.batch[:, None], pb.grid_coord >> 1], 1)
    cells, inv = torch.unique(key, dim=0, return_inverse=True)
    assert len(stages[1]["z"]) == len(cells) - 2
    means = torch.zeros(len(cells), 3, dtype=torch.float64).index_add_(0, inv, pb.coord.double())
    means /= torch.bincount(inv).double()[:, None]
    coarse = PointBatch(means.float(), batch=cells[:, 0], grid_coord=cells[:, 1:])
    ref = consecutive_distances(coarse, ["z"])["z"]
    np.testing.assert_allclose(np.sort(stages[1]["z"].numpy()), np.sort(ref.numpy()), atol=1e-3)  # float32 at 1000 mm
    assert len(stages[2]["z"]) < len(stages[1]["z"])
    # coarser stages: larger typical steps
    assert float(stages[2]["z"].median()) > float(stages[0]["z"].median())


def test_summarize():
    s = summarize(np.arange(1, 101, dtype=float), quantile=0.9, max_rel_dist=50.0)
    assert s["count"] == 100 and s["p50"] == pytest.approx(50.5) and s["p99"] == pytest.approx(99.01)
    assert s["quantile_value"] == pytest.approx(s["p90"]) and s["frac_above_max_rel_dist"] == pytest.approx(0.5)
    assert summarize(np.zeros(0)) == {"count": 0}


def test_tool_on_synthetic_jaws(tmp_path_factory):
    root = write_synthetic(tmp_path_factory.mktemp("synth"), count=2, vertices=2500)
    out = tmp_path_factory.mktemp("plots")
    cmd = [sys.executable, "-m", "pointmamba.cli.plot_distances", "--config", str(ROOT / "configs" / "base.yaml"),
           "--out", str(out), "--split", "all", "--stages", "2", "--no-progress", "--set", f"data.root={root}",
           f"data.cache_dir={root / '.cache'}", "data.grid_size=0.5", "model.orders=[z,hilbert]",
           "model.relpos.max_rel_dist=3.0", "model.relpos.quantile=0.9"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "p95" in res.stdout and "hilbert" in res.stdout
    assert {p.name for p in out.glob("*.png")} == {"distances_stage0.png", "distances_stage1.png"}
    assert all(p.stat().st_size > 10_000 for p in out.glob("*.png"))
    data = json.loads((out / "distances.json").read_text())
    assert data["scans"] == 4 and data["max_rel_dist"] == 3.0 and data["quantile"] == 0.9
    assert set(data["stages"]) == {"0", "1"}
    for stage in data["stages"].values():
        assert set(stage) == {"z", "hilbert", "all"}
        for s in stage.values():
            pct = [s["p50"], s["p90"], s["p95"], s["p99"]]
            assert s["count"] > 100 and 0 < pct[0] and pct == sorted(pct)
            assert pct[0] < s["quantile_value"] <= pct[2]  # q = 0.9 lies between p50 and p95
    assert data["stages"]["1"]["all"]["p50"] > data["stages"]["0"]["all"]["p50"]


def test_tool_rejects_bad_stages(tmp_path):
    cmd = [sys.executable, "-m", "pointmamba.cli.plot_distances", "--config", str(ROOT / "configs" / "base.yaml"),
           "--out", str(tmp_path), "--stages", "0"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and "--stages" in res.stderr
