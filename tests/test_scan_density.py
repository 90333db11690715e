"""The graph cut on dense scans (the smoothing scaled by density), and the subdivision that stands in for a
full-resolution scan."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import face_normals, subdivide, vertex_areas, vertex_normals

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "MSN021" / "MSN021_lower.obj"


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


def _edge_mean(vertices: np.ndarray, faces: np.ndarray) -> float:
    from pointmamba.inference.graph_cut import mesh_edges

    e = mesh_edges(faces, len(vertices))
    return float(np.linalg.norm(vertices[e[:, 0]] - vertices[e[:, 1]], axis=1).mean())


def test_density_factor_is_one_on_training_density_and_grows_as_the_square_on_finer_meshes() -> None:
    from pointmamba.inference.graph_cut import REFERENCE_EDGE_MM, density_factor, mesh_edges

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
    from pointmamba.inference import graph_cut as gc

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

    from pointmamba.inference.config import infer_options
    from pointmamba.inference.pipeline import load_trained, refine, scan_probabilities
    from pointmamba.checkpoints.shipped import resolve_checkpoint

    model, cfg = load_trained(resolve_checkpoint(None), torch.device("cpu"))
    scan = load_scan(SAMPLE)
    _, probs, aligned, normals = scan_probabilities(model, scan, cfg, torch.device("cpu"))
    options = {**infer_options(cfg), "instance_numbering": False}
    assert options["graph_cut_density_power"] == 2.0 and options["graph_cut_coarse_first"] is True
    assert options["graph_cut_fine_cycles"] == 1
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


