"""Augmentations (rotation, scale, jitter, mirror with label swap) and grid sampling / point cap."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import (DEFAULT_AUGMENT, Augment, apply_transform, canonical_pose, cap_points, grid_sample,
                             mirror, random_rotation, synthetic_jaw, vertex_normals)
from pointmamba.data.grid_sampling import voxel_keys


def _angle_about_z(r: np.ndarray) -> float:
    return float(np.degrees(np.arctan2(r[1, 0], r[0, 0])))


def test_random_rotations_are_rotations_within_bounds() -> None:
    rng = np.random.default_rng(0)
    for mode in ("z", "so3"):
        for _ in range(20):
            r = random_rotation(rng, mode, max_z_deg=30.0, max_tilt_deg=5.0)
            assert np.allclose(r @ r.T, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(r), 1.0)
    for _ in range(50):
        r = random_rotation(rng, "z", max_z_deg=30.0, max_tilt_deg=5.0)
        assert np.degrees(np.arccos(np.clip(r[2, 2], -1, 1))) <= 5.0 + 1e-9  # the tilt of the z axis
        r0 = random_rotation(rng, "z", max_z_deg=30.0, max_tilt_deg=0.0)
        assert np.allclose(r0[2], [0, 0, 1]) and abs(_angle_about_z(r0)) <= 30.0 + 1e-9
    zs = np.array([random_rotation(rng, "so3")[:, 2] for _ in range(2000)])
    assert np.abs(zs.mean(0)).max() < 0.05  # uniform: no preferred direction
    with pytest.raises(ValueError):
        random_rotation(rng, "x")


def test_mirror_swaps_sides_geometrically_and_in_labels() -> None:
    scan = synthetic_jaw(0, "upper", 4000, pose="canonical")
    normal = vertex_normals(scan.vertices, scan.faces)
    v, n, lab = mirror(scan.vertices, normal, scan.labels)
    assert np.array_equal(v[:, 0], -scan.vertices[:, 0]) and np.array_equal(v[:, 1:], scan.vertices[:, 1:])
    assert np.array_equal(n[:, 0], -normal[:, 0])
    # the mirrored jaw is again a valid upper jaw: quadrant 1 at -x, 2 at +x, as before
    assert v[lab // 10 == 1, 0].mean() < 0 < v[lab // 10 == 2, 0].mean()
    assert set(np.unique(lab)) == set(np.unique(scan.labels))
    v2, n2, lab2 = mirror(v, n, lab)
    assert np.array_equal(v2, scan.vertices) and np.array_equal(n2, normal) and np.array_equal(lab2, scan.labels)


def test_augment_is_deterministic_and_keeps_normals_unit() -> None:
    scan = synthetic_jaw(1, "lower", 3000, pose="canonical")
    normal = vertex_normals(scan.vertices, scan.faces)
    cfg = {**DEFAULT_AUGMENT, "anisotropic": True, "mirror": 1.0}
    aug = Augment(cfg)
    a = aug(scan.vertices, normal, scan.labels, np.random.default_rng(7))
    b = aug(scan.vertices, normal, scan.labels, np.random.default_rng(7))
    c = aug(scan.vertices, normal, scan.labels, np.random.default_rng(8))
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert np.allclose(np.linalg.norm(a[1], axis=1)[np.linalg.norm(normal, axis=1) > 0], 1.0)
    assert np.array_equal(np.sort(np.unique(a[2])), np.sort(np.unique(scan.labels)))  # mirrored, not lost
    none = Augment({})(scan.vertices, normal, scan.labels, np.random.default_rng(0))
    assert np.array_equal(none[0], scan.vertices) and np.array_equal(none[2], scan.labels)
    with pytest.raises(ValueError, match="unknown key"):
        Augment({"rotation": "z"})


def test_scale_and_jitter_bounds() -> None:
    pts = np.random.default_rng(0).normal(size=(500, 3))
    out, _, _ = Augment({"scale": (0.9, 1.1)})(pts, None, None, np.random.default_rng(1))
    ratio = out / pts
    assert np.allclose(ratio, ratio[0, 0]) and 0.9 <= ratio[0, 0] <= 1.1  # isotropic
    out, _, _ = Augment({"jitter": 1.0, "jitter_clip": 0.05})(pts, None, None, np.random.default_rng(1))
    assert np.abs(out - pts).max() <= 0.05 + 1e-12 and np.abs(out - pts).max() > 0


# ------------------------------------------------------------------------------------ grid sampling
@pytest.fixture(scope="module")
def points() -> np.ndarray:
    scan = synthetic_jaw(2, "upper", 20000)
    return apply_transform(scan.vertices, canonical_pose(scan.vertices, scan.faces))


def test_grid_sample_test_mode_maps_back_to_every_vertex(points: np.ndarray) -> None:
    index, inverse = grid_sample(points, 0.5, "test")
    keys = voxel_keys(points, 0.5)
    assert inverse.shape == (len(points),) and inverse.min() == 0 and inverse.max() == len(index) - 1
    assert np.all(np.diff(index) > 0)  # kept rows in file order
    assert len(index) == len(np.unique(keys)) < len(points)
    assert np.array_equal(keys[index[inverse]], keys)  # every vertex -> a kept point in its own voxel
    # deterministic: the first vertex of each voxel
    first = np.unique(keys, return_index=True)[1]
    assert np.array_equal(index, np.sort(first))
    again = grid_sample(points, 0.5, "test")
    assert np.array_equal(again[0], index) and np.array_equal(again[1], inverse)


def test_grid_sample_train_mode_picks_one_random_point_per_voxel(points: np.ndarray) -> None:
    keys = voxel_keys(points, 0.5)
    a = grid_sample(points, 0.5, "train", np.random.default_rng(0))
    b = grid_sample(points, 0.5, "train", np.random.default_rng(0))
    c = grid_sample(points, 0.5, "train", np.random.default_rng(1))
    for index, inverse in (a, c):
        assert len(np.unique(keys[index])) == len(index) == len(np.unique(keys))  # one per voxel, all voxels
        assert np.array_equal(keys[index[inverse]], keys)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[0], c[0])
    with pytest.raises(ValueError, match="rng"):
        grid_sample(points, 0.5, "train")
    ident, inv = grid_sample(points, None)
    assert np.array_equal(ident, np.arange(len(points))) and np.array_equal(inv, ident)


@pytest.mark.parametrize("mode", ["train", "test"])
def test_point_cap_keeps_a_map_for_every_vertex(points: np.ndarray, mode: str) -> None:
    index, inverse = grid_sample(points, 0.3, mode, np.random.default_rng(0))
    capped, cinv = cap_points(points, index, inverse, 3000, mode, np.random.default_rng(0))
    assert len(capped) == 3000 and np.all(np.diff(capped) > 0) and np.isin(capped, index).all()
    assert cinv.shape == (len(points),) and cinv.min() >= 0 and cinv.max() < 3000
    # a vertex whose voxel point survived keeps it; the others go to the nearest kept point
    kept = np.isin(index[inverse], capped)
    assert np.array_equal(capped[cinv[kept]], index[inverse[kept]])
    lost = np.flatnonzero(~kept)[:50]
    d_kept = np.linalg.norm(points[capped[cinv[lost]]] - points[lost], axis=1)
    d_best = np.linalg.norm(points[capped][None] - points[lost][:, None], axis=2).min(1)
    assert np.allclose(d_kept, d_best)
    same = cap_points(points, index, inverse, 10**6, mode)
    assert same[0] is index
