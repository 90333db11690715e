"""Per-tooth meshes (pointmamba/data/tooth_meshes.py, predict --export-teeth): every face of the scan in
exactly one piece, original coordinates and units, and no holes in a tooth."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import read_mesh, read_stl, write_obj
from pointmamba.data.tooth_meshes import face_labels, split_by_label

from support.tiny import untrained_checkpoint
from support.tools import run_tool


def grid(n: int = 21) -> tuple[np.ndarray, np.ndarray]:
    """A flat n x n vertex grid, two triangles per cell (an open disc: one border loop)."""
    x, y = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float))
    v = np.stack([x.ravel(), y.ravel(), np.zeros(n * n)], 1)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    return v, np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)])


def euler_and_parts(faces: np.ndarray) -> tuple[int, int]:
    """(V - E + F, connected parts) of a triangle set: a disc is (1, 1); each hole lowers V - E + F by one."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    used = np.unique(faces)
    edges = {tuple(sorted(e)) for f in faces.tolist() for e in ((f[0], f[1]), (f[1], f[2]), (f[2], f[0]))}
    e = np.array(sorted(edges))
    n = int(used.max()) + 1
    parts = connected_components(coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)), directed=False)[1]
    return len(used) - len(edges) + len(faces), len(np.unique(parts[used]))


def triangles(vertices: np.ndarray, faces: np.ndarray) -> Counter:
    """The faces as a multiset of corner coordinates (float32, as STL stores them), winding kept."""
    tri = np.asarray(vertices, dtype=np.float32)[faces]
    return Counter(map(bytes, tri.reshape(len(tri), -1)))


def test_majority_rule_and_three_way_corners() -> None:
    faces = np.array([[0, 1, 2], [0, 1, 3], [1, 3, 4], [2, 3, 4]])
    labels = np.array([11, 11, 12, 0, 12])
    # [11 11 12] -> 11; [11 11 0] -> 11; [11 0 12] -> all differ, a gingiva corner -> 0; [12 0 12] -> 12
    assert face_labels(faces, labels).tolist() == [11, 11, 0, 12]
    assert face_labels(np.array([[0, 1, 2]]), np.array([13, 12, 14])).tolist() == [12]  # no gingiva: lowest


def test_islands_inside_a_tooth_leave_no_hole_and_every_face_stays_in_one_piece() -> None:
    v, f = grid()
    d = np.linalg.norm(v[:, :2] - 10, axis=1)
    labels = np.where(d < 6, 21, 0)
    labels[(np.abs(v[:, 0] - 10) <= 1) & (np.abs(v[:, 1] - 9) <= 1)] = 0  # a 3x3 gingiva island in the tooth
    labels[10 * 21 + 13] = 22  # a lone vertex of another tooth
    labels[(v[:, 0] == 10) & (v[:, 1] == 2)] = 23  # a stray vertex of a third tooth outside, on the gingiva
    # the vertex-majority alone would leave the island as a hole
    own = face_labels(f, labels)
    assert euler_and_parts(f[own == 21]) == (1, 1)  # a disc: one border, no hole
    pieces = split_by_label(v, f, labels)
    assert set(pieces) == {0, 21}  # the lone 22 and 23 vertices own no face
    assert sum(len(pf) for _, pf in pieces.values()) == len(f)
    assert triangles(v, f) == sum((triangles(pv, pf) for pv, pf in pieces.values()), Counter())
    gum_v, gum_f = pieces[0]
    assert euler_and_parts(gum_f) == (0, 1)  # an annulus around the tooth


def test_a_tooth_on_the_scans_border_is_no_hole_of_its_neighbour() -> None:
    v, f = grid()
    labels = np.where(v[:, 0] < 5, 31, 0)  # a tooth along the open border
    labels[v[:, 0] > 15] = 32
    own = face_labels(f, labels)
    # gingiva between the teeth reaches the border: it stays gingiva although it is smaller than the teeth
    assert (own == 0).sum() > 0 and euler_and_parts(f[own == 31]) == (1, 1)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth")


@pytest.mark.usefixtures("one_thread")
def test_export_teeth_gives_back_the_scans_faces_in_its_own_units(ckpt: Path, scans_dir: Path, tmp_path: Path) -> None:
    v, f = read_mesh(scans_dir / "MSN002" / "MSN002_upper.obj")
    write_obj(tmp_path / "in" / "P7_upper.obj", v / 1000.0, f, precision=9)  # in metres
    out = tmp_path / "out"
    code, stdout, err = run_tool("predict", tmp_path / "in" / "P7_upper.obj", "--checkpoint", ckpt, "--out", out,
                                 "--export-teeth", "--set", "infer.graph_cut=false")
    assert code == 0, err
    labels = np.array(json.loads((out / "P7_upper.json").read_text())["labels"])
    # one STL per tooth that owns faces (an untrained network's scattered vertices of a number may own none)
    teeth = sorted(int(t) for t in set(face_labels(f, labels).tolist()) if t)
    written = sorted(p.name for p in out.glob("P7_upper_*.stl"))
    assert written == sorted([f"P7_upper_{t}.stl" for t in teeth] + ["P7_upper_gingiva.stl"]), (written, teeth)
    original, _ = read_mesh(tmp_path / "in" / "P7_upper.obj")
    pieces = [read_stl(out / name) for name in written]
    assert sum(len(pf) for _, pf in pieces) == len(f)
    assert triangles(original, f) == sum((triangles(pv, pf) for pv, pf in pieces), Counter())  # metres, winding

    # a rerun with --overwrite removes an earlier run's tooth that this run does not find
    (out / "P7_upper_18.stl").write_bytes((out / "P7_upper_gingiva.stl").read_bytes())
    code, _, err = run_tool("predict", tmp_path / "in" / "P7_upper.obj", "--checkpoint", ckpt, "--out", out,
                            "--export-teeth", "--set", "infer.graph_cut=false")
    assert code == 2 and "P7_upper" in err and "--overwrite" in err
    code, _, err = run_tool("predict", tmp_path / "in" / "P7_upper.obj", "--checkpoint", ckpt, "--out", out,
                            "--export-teeth", "--set", "infer.graph_cut=false", "--overwrite")
    assert code == 0, err
    assert sorted(p.name for p in out.glob("P7_upper_*.stl")) == written
