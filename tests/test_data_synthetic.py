"""Procedural jaws: deterministic, the requested size, valid labels and a real mesh; the CLI writes a data set."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import (LOWER_FDI, UPPER_FDI, Teeth3DSDataset, fdi_to_class, load_scan, synthetic_jaw,
                             vertex_normals)
from pointmamba.data.mesh import check_mesh
from pointmamba.data.synthetic import main

ROOT = Path(__file__).resolve().parents[1]


def test_same_seed_same_arrays() -> None:
    a = synthetic_jaw(11, "upper", 8000, missing=(12,))
    b = synthetic_jaw(11, "upper", 8000, missing=(12,))
    c = synthetic_jaw(12, "upper", 8000, missing=(12,))
    for name in ("vertices", "faces", "labels", "instances"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.meta["pose"], b.meta["pose"])
    assert a.vertices.shape != c.vertices.shape or not np.array_equal(a.vertices, c.vertices)


@pytest.mark.parametrize("n", [5000, 20000, 60000])
def test_vertex_count_within_ten_percent(n: int) -> None:
    scan = synthetic_jaw(n, "lower", n)
    assert abs(scan.num_vertices - n) <= 0.1 * n


@pytest.mark.parametrize("jaw", ["upper", "lower"])
def test_labels_valid_and_missing_teeth_absent(jaw: str) -> None:
    fdis = UPPER_FDI if jaw == "upper" else LOWER_FDI
    missing = (fdis[1], fdis[6], fdis[12])
    scan = synthetic_jaw(3, jaw, 10000, missing=missing)
    present = set(np.unique(scan.labels).tolist())
    assert present == {0} | set(fdis) - set(missing)
    fdi_to_class(scan.labels, jaw, 17)  # valid for the jaw
    assert scan.jaw == jaw
    full = synthetic_jaw(3, jaw, 10000)
    assert set(np.unique(full.labels).tolist()) == {0} | set(fdis)
    with pytest.raises(ValueError, match="not teeth of the"):
        synthetic_jaw(3, jaw, 10000, missing=(LOWER_FDI[0] if jaw == "upper" else UPPER_FDI[0],))


def test_a_real_connected_mesh_with_outward_normals() -> None:
    scan = synthetic_jaw(4, "upper", 5000, pose="canonical")
    check_mesh(scan.vertices, scan.faces, None)
    assert np.array_equal(np.unique(scan.faces), np.arange(scan.num_vertices))  # every vertex in a face
    assert len(np.unique(np.sort(scan.faces, 1), axis=0)) == scan.num_faces  # no duplicate faces
    n = vertex_normals(scan.vertices, scan.faces)
    assert n[:, 2].mean() > 0.3  # wound so that normals leave the scanned (occlusal) side
    teeth = scan.labels > 0
    assert scan.vertices[teeth, 2].mean() > scan.vertices[~teeth, 2].mean() + 2.0  # crowns stand out
    # each tooth is one compact blob of roughly tooth size
    for fdi in (11, 13, 16):
        pts = scan.vertices[scan.labels == fdi]
        assert 4.0 < np.ptp(pts[:, :2], 0).max() < 15.0


def test_extremes_5k_and_250k() -> None:
    small = synthetic_jaw(0, "lower", 5000)
    big = synthetic_jaw(0, "upper", 250000)
    assert abs(small.num_vertices - 5000) <= 500 and abs(big.num_vertices - 250000) <= 25000
    assert np.isfinite(big.vertices).all() and big.faces.max() < big.num_vertices


def test_cli_writes_teeth3ds_layout_and_splits(tmp_path: Path) -> None:
    out = tmp_path / "syn"
    assert main([str(out), "--count", "5", "--vertices", "3000", "--seed", "1", "--quiet"]) == 0
    ids = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(ids) == 5
    for pid in ids:
        for jaw in ("upper", "lower"):
            scan = load_scan(out / pid / f"{pid}_{jaw}.obj")  # through the same reader as real data
            assert scan.jaw == jaw and scan.id_patient == pid and scan.labels is not None
    splits = {s: (out / f"{s}.txt").read_text().split() for s in ("train", "val", "test")}
    assert sorted(sum(splits.values(), [])) == ids and len(splits["train"]) >= 3
    ds = Teeth3DSDataset(out, split="train", cache_dir=False)
    assert len(ds) == 2 * len(splits["train"])
    # same seed, same files
    again = tmp_path / "again"
    main([str(again), "--count", "5", "--vertices", "3000", "--seed", "1", "--quiet"])
    assert (again / ids[0] / f"{ids[0]}_upper.obj").read_bytes() == (out / ids[0] / f"{ids[0]}_upper.obj").read_bytes()


def test_cli_as_a_module(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "pointmamba.data.synthetic", str(tmp_path / "m"), "--count", "1",
                          "--vertices", "2000", "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "m" / "SYN00000" / "SYN00000_lower.json").is_file()
    assert (tmp_path / "m" / "train.txt").read_text() == "SYN00000\n"
    bad = subprocess.run([sys.executable, "-m", "pointmamba.data.synthetic", str(tmp_path / "b"), "--count", "0"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "count" in bad.stderr
