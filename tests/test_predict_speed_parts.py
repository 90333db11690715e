"""The fast parts of whole-scan prediction against the slow ones they replaced: rasterized picture, PLY from
structured arrays, mesh edges from a sparse adjacency, views in one batch, the graph cut on the unsettled
vertices; the step timer and the compile notice."""
from __future__ import annotations

import io
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import class_colors, fdi_to_class, load_scan, read_ply, synthetic_jaw, write_ply
from pointmamba.inference.graph_cut import graph_cut, mesh_edges, settled_vertices
from pointmamba.inference.render import rasterize
from pointmamba.utils.timing import StepTimer, step


# ------------------------------------------------------------------------------------------ rasterizer
def test_rasterize_covers_pixel_centres_and_keeps_the_nearest_triangle() -> None:
    # a right triangle over pixels 0..9 (its hypotenuse x + y = 10) and, nearer the viewer, a small one
    xy = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [2.0, 2.0], [6.0, 2.0], [2.0, 6.0]])
    depth = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    faces = np.array([[0, 1, 2], [5, 4, 3]])  # the second wound the other way: both windings count
    hit = rasterize(xy, depth, faces, 12, 12)
    cx, cy = np.meshgrid(np.arange(12) + 0.5, np.arange(12) + 0.5)
    small = (cx >= 2) & (cy >= 2) & (cx + cy <= 8)
    big = (cx + cy <= 10) & ~small
    assert (hit[small] == 1).all() and (hit[big] == 0).all() and (hit[~small & ~big] == -1).all()
    hit_behind = rasterize(xy, -depth, faces, 12, 12)  # small triangle now behind: the big one wins
    assert (hit_behind[small | big] == 0).all()


def _nearest_face_per_pixel(xy: np.ndarray, depth: np.ndarray, faces: np.ndarray, width: int, height: int) -> np.ndarray:
    """The z-buffer's reference: every pixel centre against every face, barycentric coordinates in float64."""
    out = np.full((height, width), -1, dtype=np.int64)
    best = np.full((height, width), -np.inf)
    for f, (i, j, k) in enumerate(faces):
        (ax, ay), (bx, by), (cx, cy) = xy[i], xy[j], xy[k]
        area = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        if area == 0:
            continue
        for py in range(height):
            for px in range(width):
                qx, qy = px + 0.5, py + 0.5
                wa = ((cx - bx) * (qy - by) - (cy - by) * (qx - bx)) / area
                wb = ((ax - cx) * (qy - cy) - (ay - cy) * (qx - cx)) / area
                wc = 1.0 - wa - wb
                if min(wa, wb, wc) >= -1e-12:
                    d = wa * depth[i] + wb * depth[j] + wc * depth[k]
                    if d >= best[py, px] - 1e-12:
                        best[py, px], out[py, px] = d, f
    return out


def test_rasterize_skips_degenerate_and_offscreen_triangles() -> None:
    xy = np.array([[0.0, 0.0], [5.0, 5.0], [10.0, 10.0], [-50.0, -50.0], [-40.0, -50.0], [-50.0, -40.0]])
    faces = np.array([[0, 1, 2], [3, 4, 5]])
    assert (rasterize(xy, np.zeros(6), faces, 8, 8) == -1).all()


def test_rasterize_matches_a_per_pixel_loop_on_random_triangles() -> None:
    # random triangles of both windings, partly off the picture, distinct depths per vertex: each pixel centre
    # shows the nearest triangle covering it, exactly as a test of every pixel against every face says
    rng = np.random.default_rng(0)
    for _ in range(5):
        pts = rng.random((60, 2)) * 30 - 5
        z = rng.permutation(60).astype(np.float64)
        tris = rng.integers(0, 60, (40, 3))
        hit = rasterize(pts, z, tris, 24, 18)
        ref = _nearest_face_per_pixel(pts, z, tris, 24, 18)
        assert (hit != ref).sum() <= 2  # a pixel centre on an edge, to rounding, may go to either face (0 seen)
        assert (hit >= 0).sum() > 300  # most of the picture is covered


def test_render_shows_each_class_colour(tmp_path: Path) -> None:
    from PIL import Image

    from pointmamba.inference.render import render_segmentation

    scan = synthetic_jaw(0, "lower", 6000, pose="canonical")
    classes = fdi_to_class(np.asarray(scan.labels), "lower", 17)
    colors = class_colors(17)
    path = render_segmentation(tmp_path / "p.png", scan.vertices, scan.faces, scan.labels, colors, classes, "t")
    pixels = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3).astype(int)
    for c in np.unique(classes):  # each class's colour appears, shaded (a scaled copy of it)
        rgb = colors[c].astype(float)
        scale = (pixels @ rgb) / max(rgb @ rgb, 1.0)
        close = np.abs(pixels - scale[:, None] * rgb).max(1) <= 3
        assert (close & (scale > 0.3)).sum() > 20, f"class {c} not in the picture"


def test_render_survives_a_mesh_without_extent(tmp_path: Path) -> None:
    from pointmamba.inference.render import render_segmentation

    vertices, faces = np.zeros((3, 3)), np.array([[0, 1, 2]])
    labels = np.zeros(3, dtype=np.int64)
    assert render_segmentation(tmp_path / "flat.png", vertices, faces, labels, class_colors(17), labels, "t").is_file()


def test_render_marks_the_wrong_vertices_black_in_the_prediction_row_only(tmp_path: Path) -> None:
    from PIL import Image

    from pointmamba.inference.render import render_segmentation

    scan = synthetic_jaw(0, "lower", 6000, pose="canonical")
    classes = fdi_to_class(np.asarray(scan.labels), "lower", 17)
    colors = class_colors(17)
    wrong_fdi = np.where(np.asarray(scan.labels) == 36, 37, scan.labels)  # one tooth numbered as its neighbour
    right = render_segmentation(tmp_path / "r.png", scan.vertices, scan.faces, scan.labels, colors, classes, "t",
                                scan.labels, classes)
    marked = render_segmentation(tmp_path / "w.png", scan.vertices, scan.faces, wrong_fdi, colors, classes, "t",
                                 scan.labels, classes)
    a, b = (np.asarray(Image.open(p).convert("RGB")).astype(int) for p in (right, marked))
    half = a.shape[0] // 2
    assert np.array_equal(a[:half], b[:half])  # the reference rows: no marks
    newly_black = (b[half:].sum(2) == 0) & (a[half:].sum(2) != 0)
    assert newly_black.sum() > 50  # the wrong tooth's vertices, marked


def test_face_normals_are_np_cross_bit_for_bit() -> None:
    from pointmamba.data.mesh import face_normals

    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        v = rng.normal(size=(500, 3)).astype(dtype)
        f = rng.integers(0, 500, (2000, 3))
        out = face_normals(v, f)
        assert out.dtype == dtype
        assert np.array_equal(out, np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]))
    assert face_normals(np.zeros((3, 3)), np.zeros((0, 3), dtype=np.int64)).shape == (0, 3)


# ------------------------------------------------------------------------------------------ PLY, edges
def test_write_ply_is_byte_identical_to_plyfile(tmp_path: Path) -> None:
    from plyfile import PlyData, PlyElement

    scan = synthetic_jaw(2, "upper", 1500, pose="canonical")
    colors = class_colors(17)[np.arange(scan.num_vertices) % 17]
    labels = np.asarray(scan.labels, dtype=np.int64)
    ours = write_ply(tmp_path / "ours.ply", scan.vertices, scan.faces, colors=colors, labels=labels)
    vert = np.empty(scan.num_vertices, dtype=[("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1"), ("green", "u1"),
                                              ("blue", "u1"), ("label", "i4")])
    v32 = scan.vertices.astype(np.float32)
    vert["x"], vert["y"], vert["z"] = v32.T
    vert["red"], vert["green"], vert["blue"] = colors.T
    vert["label"] = labels
    face = np.empty(scan.num_faces, dtype=[("vertex_indices", "i4", (3,))])
    face["vertex_indices"] = scan.faces
    PlyData([PlyElement.describe(vert, "vertex"), PlyElement.describe(face, "face")], text=False).write(
        str(tmp_path / "plyfile.ply"))
    assert ours.read_bytes() == (tmp_path / "plyfile.ply").read_bytes()
    plain = write_ply(tmp_path / "plain.ply", scan.vertices)  # no faces, colours or labels
    vertices, faces = read_ply(plain)
    assert np.array_equal(vertices, v32.astype(np.float64)) and len(faces) == 0


def test_mesh_edges_match_a_sort_of_every_half_edge() -> None:
    rng = np.random.default_rng(3)
    faces = rng.integers(0, 50, (400, 3))
    faces[:10, 1] = faces[:10, 0]  # degenerate faces: no self-edges
    faces = np.concatenate([faces, faces[:20, ::-1]])  # repeated faces, other winding
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), 1)
    expected = np.unique(e[e[:, 0] != e[:, 1]], axis=0)
    assert np.array_equal(mesh_edges(faces), expected)
    assert np.array_equal(mesh_edges(faces, 60), expected)  # isolated vertices after the last face
    assert mesh_edges(np.zeros((0, 3), dtype=np.int64)).shape == (0, 2)


# ------------------------------------------------------------------------------------------ graph cut
@pytest.mark.parametrize("name", ["MSN021_lower", "MSN022_upper"])
def test_graph_cut_on_unsettled_vertices_equals_the_full_cut(scans_dir: Path, name: str) -> None:
    from pointmamba.data.dataset import preprocess_scan
    from pointmamba.data.mesh import apply_transform

    scan = load_scan(scans_dir / name.split("_")[0] / f"{name}.obj")
    arrays = preprocess_scan(scan)
    aligned = apply_transform(scan.vertices, arrays["transform"])
    normals = apply_transform(arrays["normals"].astype(np.float64), arrays["transform"], direction=True)
    classes = fdi_to_class(scan.labels, scan.jaw, 17)
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(17) * 0.5, size=len(classes)) * 0.4
    probs[np.arange(len(classes)), classes] += 0.6
    flip = rng.random(len(classes)) < 0.1
    probs[flip] = rng.dirichlet(np.ones(17) * 0.2, size=int(flip.sum()))
    sure = (classes == 0) & (rng.random(len(classes)) < 0.97)  # mostly confident gingiva: something to settle
    probs[sure] = 0.001
    probs[sure, 0] = 0.984
    probs /= probs.sum(1, keepdims=True)
    edges = mesh_edges(scan.faces, scan.num_vertices)
    settled = settled_vertices(-np.log(np.clip(probs, 1e-6, 1)), edges)
    assert 0.02 < settled.mean() < 0.9
    full = graph_cut(probs, aligned, scan.faces, normals, smoothing=3.0, settle=False)
    fast = graph_cut(probs, aligned, scan.faces, normals, smoothing=3.0)
    assert np.array_equal(fast, full)
    assert (fast[settled] == probs[settled].argmax(1)).all()


def test_settled_vertices_need_agreeing_confident_rings() -> None:
    # a path 0-1-2-3-4-5-6: vertex 3 is unsure, so everything within 2 rings of it is unsettled
    edges = np.array([[i, i + 1] for i in range(6)])
    unary = np.tile([0.0, 5.0], (7, 1))
    unary[3] = [0.0, 1.0]
    assert settled_vertices(unary, edges, margin=3.0, rings=2).tolist() == [True, False, False, False, False, False,
                                                                            True]
    unary[6] = [5.0, 0.0]  # 5 and 6 disagree on the best label: both unsure, and their rings
    assert settled_vertices(unary, edges, margin=3.0, rings=1).tolist() == [True, True, False, False, False, False,
                                                                            False]


# ------------------------------------------------------------------------------------------ views, timer
def test_views_in_one_batch_give_each_views_own_probabilities() -> None:
    import torch

    from pointmamba import build_model
    from pointmamba.data.dataset import preprocess_scan
    from pointmamba.inference.pipeline import TestView, summed_view_probabilities

    torch.manual_seed(0)
    cfg = {"model": {"in_channels": 6, "enc_channels": [16, 32], "enc_depths": [1, 1], "dec_channels": [16],
                     "dec_depths": [1], "d_state": 4, "num_classes": 17},
           "data": {"num_classes": 17, "grid_size": 0.6, "align": True, "jaw_feature": False},
           "train": {"amp": False}}
    model = build_model(cfg).eval()
    scan = synthetic_jaw(4, "lower", 3000)
    arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
    views = [TestView(False), TestView(True), TestView(False, 15.0)]
    together, transform = summed_view_probabilities(model, arrays, "s", cfg, torch.device("cpu"), views)
    alone = None
    for view in views:
        alone, t = summed_view_probabilities(model, arrays, "s", cfg, torch.device("cpu"), [view], start=alone)
        assert np.array_equal(t, transform)
    np.testing.assert_allclose(together, alone, rtol=1e-6, atol=1e-7)


def test_step_timer_collects_steps_from_anywhere_inside_it() -> None:
    with step("outside"):  # no timer: nothing happens
        pass

    def work() -> None:
        with step("network"):
            pass

    with StepTimer() as outer:
        with StepTimer() as inner:
            with step("load"):
                pass
            work()
            work()
        with step("write"):
            pass
    assert list(inner.seconds) == ["load", "network"] and list(outer.seconds) == ["write"]
    assert outer.children == [inner] and inner.total == pytest.approx(sum(inner.seconds.values()))
    assert inner.line().startswith("load ") and inner.line().endswith(f"total {inner.total:.2f} s")


def test_compile_notice_names_our_kernels_only() -> None:
    from numba import njit

    from pointmamba.ops import compile_notice

    compile_notice.install()

    def ours(x):  # noqa: ANN001, ANN202
        return x + 1

    def theirs(x):  # noqa: ANN001, ANN202
        return x + 2

    ours.__module__ = "pointmamba.ops.fake_kernel"
    theirs.__module__ = "someone_else"
    err = io.StringIO()
    with redirect_stderr(err):
        njit(ours)(1)
        njit(theirs)(1)
    text = err.getvalue()
    assert "compiling CPU kernel fake_kernel.ours (once" in text and "compiled fake_kernel.ours in" in text
    assert "theirs" not in text


# ------------------------------------------------------------------------------------------ data loader
def test_prefetch_keeps_order_stops_early_and_raises_in_place() -> None:
    import threading

    from pointmamba.training.data_builders import prefetch

    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))
    before = threading.active_count()
    gen = prefetch(iter(range(1000)))
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()  # a training epoch that stops at max_steps_per_epoch
    assert threading.active_count() == before

    def broken():  # noqa: ANN202
        yield 1
        raise ValueError("scan 2 is bad")

    gen = prefetch(broken())
    assert next(gen) == 1
    with pytest.raises(ValueError, match="scan 2 is bad"):
        next(gen)
