"""Dense scans reach the network at the training density (``infer.max_input_points``,
``grid_sampling.thin_points``), and the subdivision that stands in for a full-resolution scan."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.data.dataset import make_item, preprocess_scan
from pointmamba.data.grid_sampling import grid_sample, thin_points
from pointmamba.data.mesh import face_normals, subdivide, vertex_areas, vertex_normals

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "MSN021" / "MSN021_lower.obj"


def _surface_points(rng: np.random.Generator, n: int) -> np.ndarray:
    """Points on a curved sheet (a jaw-sized arc), so cells of a grid are partly empty as on a scan."""
    t, h = rng.uniform(-1.2, 1.2, n), rng.uniform(0, 30, n)
    return np.stack([30 * np.sin(t), 30 * np.cos(t), h + 2 * np.cos(3 * t)], 1)


def test_thin_points_keeps_at_most_n_evenly_and_maps_every_point_to_its_nearest_kept_one() -> None:
    rng = np.random.default_rng(0)
    coord = _surface_points(rng, 60000)
    index, inverse = grid_sample(coord, 0.6)
    assert len(index) > 5000
    new_index, new_inverse = thin_points(coord, index, inverse, 3000)
    # the smallest grid that leaves <= 3000: a grid 0.01 mm finer leaves more (so not far below 3000)
    assert 2500 < len(new_index) <= 3000
    assert np.all(np.diff(new_index) > 0) and np.isin(new_index, index).all()
    # nearest kept point, against a brute-force float64 reference on a sample of the points
    sample = rng.choice(len(coord), 400, replace=False)
    d = ((coord[sample, None, :] - coord[new_index][None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(d[np.arange(len(sample)), new_inverse[sample]], d.min(1), rtol=0, atol=1e-9)
    assert (new_inverse[new_index] == np.arange(len(new_index))).all()  # a kept point stands for itself
    # evenly: no point is farther from a kept point than a cell's diagonal at the grid found (about 1.2 mm
    # here; a random choice of 3000 rows leaves holes of several mm)
    far = np.sqrt(((coord - coord[new_index][new_inverse]) ** 2).sum(1)).max()
    assert far < 3.0
    # deterministic
    again = thin_points(coord, index, inverse, 3000)
    assert np.array_equal(again[0], new_index) and np.array_equal(again[1], new_inverse)


def test_thin_points_leaves_a_sample_within_the_limit_alone() -> None:
    coord = _surface_points(np.random.default_rng(1), 5000)
    index, inverse = grid_sample(coord, 0.6)
    for limit in (None, len(index), len(index) + 1):
        out = thin_points(coord, index, inverse, limit)
        assert out[0] is index and out[1] is inverse
    with pytest.raises(ValueError, match="max_points must be positive"):
        thin_points(coord, index, inverse, 0)


def test_subdivide_keeps_the_surface_and_the_old_vertices() -> None:
    scan = load_scan(SAMPLE)
    v, f, parents = subdivide(scan.vertices, scan.faces)
    assert np.array_equal(v[:scan.num_vertices], scan.vertices)
    assert len(v) == scan.num_vertices + len(parents) and len(f) == 4 * scan.num_faces
    np.testing.assert_allclose(v[scan.num_vertices:], scan.vertices[parents].mean(1))
    np.testing.assert_allclose(vertex_areas(v, f).sum(), vertex_areas(scan.vertices, scan.faces).sum(), rtol=1e-9)
    # each new triangle faces the way its parent did (the 4 children of face k are k, F + k, 2F + k, 3F + k)
    parent_n = face_normals(scan.vertices, scan.faces)
    child_n = face_normals(v, f).reshape(4, scan.num_faces, 3)
    ok = np.linalg.norm(parent_n, axis=1) > 1e-9
    unit = parent_n[ok] / np.linalg.norm(parent_n[ok], axis=1, keepdims=True)
    child_unit = child_n[:, ok] / np.linalg.norm(child_n[:, ok], axis=-1, keepdims=True)
    assert ((child_unit * unit).sum(-1) > 0.999).all()
    # every vertex of the finer mesh is on a triangle, each edge's midpoint once
    assert np.array_equal(np.unique(f), np.arange(len(v)))


def test_a_dense_scan_reaches_the_network_thinned_and_a_coarse_one_unchanged() -> None:
    """The input path of inference (make_item in test mode): the sample at 16x its vertices is thinned to
    the limit; the sample as it is (4.4k grid points) is bit for bit what it was without the option."""
    scan = load_scan(SAMPLE)
    arrays = preprocess_scan(scan)
    kw = dict(name="s", num_classes=17, grid_size=0.6, mode="test", rng=np.random.default_rng(0))
    plain = make_item(arrays, **kw)
    limited = make_item(arrays, max_input_points=8000, **kw)
    for key in ("coord", "feat", "index", "vertex_row"):
        assert np.array_equal(plain[key], limited[key])
    v, f = scan.vertices, scan.faces
    for _ in range(2):
        v, f, _ = subdivide(v, f)
    dense = preprocess_scan(type(scan)(v, f, None, scan.jaw, scan.id_patient))
    full = make_item(dense, **kw)
    thinned = make_item(dense, max_input_points=6000, **kw)
    assert len(full["coord"]) > 12000  # every 0.6 mm cell occupied: about 3x the sample's points
    assert 5000 < len(thinned["coord"]) <= 6000
    assert len(thinned["vertex_row"]) == len(v) and thinned["vertex_row"].max() == len(thinned["coord"]) - 1


def _edge_mean(vertices: np.ndarray, faces: np.ndarray) -> float:
    from pointmamba.evaluation.graph_cut import mesh_edges

    e = mesh_edges(faces, len(vertices))
    return float(np.linalg.norm(vertices[e[:, 0]] - vertices[e[:, 1]], axis=1).mean())


def test_density_factor_is_one_on_training_density_and_grows_as_the_square_on_finer_meshes() -> None:
    from pointmamba.evaluation.graph_cut import REFERENCE_EDGE_MM, density_factor, mesh_edges

    scan = load_scan(SAMPLE)
    v, f = scan.vertices.astype(np.float64), scan.faces
    assert _edge_mean(v, f) > REFERENCE_EDGE_MM  # a decimated scan as the training scans are
    assert density_factor(v, mesh_edges(f, len(v)), 2.0) == 1.0
    for _ in range(2):
        v, f, _ = subdivide(v, f)
    fine = _edge_mean(v, f)  # about a quarter of the sample's
    assert density_factor(v, mesh_edges(f, len(v)), 2.0) == pytest.approx((REFERENCE_EDGE_MM / fine) ** 2, rel=1e-12)
    assert density_factor(v, mesh_edges(f, len(v)), 0.0) == 1.0


def test_the_density_power_leaves_a_decimated_scan_bit_for_bit_and_checks_its_value() -> None:
    from pointmamba.evaluation import graph_cut as gc

    scan = load_scan(SAMPLE)
    classes = fdi_to_class(scan.labels, scan.jaw, 17)
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(17) * 0.3, size=len(classes)) * 0.6
    probs[np.arange(len(classes)), classes] += 0.4
    normals = preprocess_scan(scan)["normals"].astype(np.float64)
    old = gc.graph_cut(probs, scan.vertices, scan.faces, normals, smoothing=3.0)
    assert np.array_equal(gc.graph_cut(probs, scan.vertices, scan.faces, normals, smoothing=3.0, density_power=2.0), old)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="density_power"):
            gc.graph_cut(probs, scan.vertices, scan.faces, normals, smoothing=3.0, density_power=bad)


def test_a_scan_at_4x_and_16x_its_vertices_is_cut_as_it_is_at_1x_by_default() -> None:
    """The shipped model's probabilities of the sample, carried to the mesh subdivided once and twice (each
    new vertex the mean of its two ends), refined with the default inference (the cut alone, no
    numbering): the finer meshes' cuts keep more of the original vertices' labels from the cut at 1x with
    the defaults (smoothing scaled by density) than with the same smoothing at every density."""
    import torch

    from pointmamba.evaluation.inference import infer_options, load_trained, refine, scan_probabilities
    from pointmamba.pretrained import resolve_checkpoint

    model, cfg = load_trained(resolve_checkpoint(None), torch.device("cpu"))
    scan = load_scan(SAMPLE)
    _, probs, aligned, normals = scan_probabilities(model, scan, cfg, torch.device("cpu"))
    options = {**infer_options(cfg), "instance_numbering": False, "tooth_relabel": False}
    assert options["graph_cut_density_power"] == 2.0 and options["graph_cut_coarse_first"] is True
    old = {"graph_cut_density_power": 0.0}
    at_1x = refine(probs, aligned, scan.faces, normals, scan.jaw, 17, options)
    v, f, p = aligned, scan.faces, probs
    measured = {4: (0.988, 0.980), 16: (0.978, 0.969)}
    for times in (4, 16):
        v, f, parents = subdivide(v, f)
        p = np.concatenate([p, p[parents].mean(1)])
        n = vertex_normals(v, f)
        agree = [float((refine(p, v, f, n, scan.jaw, 17, {**options, **switch})[:scan.num_vertices] == at_1x).mean())
                 for switch in ({}, old)]
        assert agree[0] > agree[1] + 0.004, (times, agree, "measured", measured[times])


def test_density_angles_scale_each_crease_angle_and_leave_a_decimated_scan_alone() -> None:
    from pointmamba.evaluation import graph_cut as gc

    scan = load_scan(SAMPLE)
    v = scan.vertices.astype(np.float64)
    normals = preprocess_scan(scan)["normals"].astype(np.float64)
    edges = gc.mesh_edges(scan.faces, len(v))
    assert np.array_equal(gc.edge_weights(v, normals, edges, 1.0), gc.edge_weights(v, normals, edges))
    # float64 reference of the weights with every angle doubled (capped at pi)
    ni, nj = normals[edges[:, 0]], normals[edges[:, 1]]
    cos = np.clip((ni * nj).sum(1), -1, 1)
    angle = np.minimum(2.0 * np.arccos(cos), np.pi)
    base = -np.log(np.clip(angle / np.pi, 1e-4, 1.0)) + 1e-3
    convex = ((nj - ni) * (v[edges[:, 1]] - v[edges[:, 0]])).sum(1) > 0
    ref = np.where(convex, base * (1 + np.abs(cos)), base)
    np.testing.assert_allclose(gc.edge_weights(v, normals, edges, 2.0), ref / ref.mean(), rtol=1e-12)
    classes = fdi_to_class(scan.labels, scan.jaw, 17)
    probs = np.random.default_rng(5).dirichlet(np.ones(17) * 0.3, size=len(classes)) * 0.6
    probs[np.arange(len(classes)), classes] += 0.4
    old = gc.graph_cut(probs, v, scan.faces, normals, smoothing=3.0)
    assert np.array_equal(gc.graph_cut(probs, v, scan.faces, normals, smoothing=3.0, density_power=2.0,
                                       density_angles=True), old)
