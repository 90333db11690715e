"""Grid sampling (one point per voxel) and a point cap, both keeping a map back to every vertex.

Both return ``(index, inverse)``: ``index`` (M,) the kept rows of the input (ascending, so kept points
keep file order) and ``inverse`` (N,) for every input point the kept row that stands for it, so a
per-row prediction ``pred`` becomes a per-vertex one with ``pred[inverse]``.
"""
from __future__ import annotations

import numpy as np

GRID_MODES = ("train", "test")


def voxel_keys(coord: np.ndarray, grid_size: float) -> np.ndarray:
    """One int64 key per point for its voxel (cells of ``grid_size`` from the points' minimum corner)."""
    if not grid_size > 0:
        raise ValueError(f"voxel_keys: grid_size must be > 0, got {grid_size}")
    g = np.floor((coord - coord.min(0)) / grid_size).astype(np.int64)
    dims = g.max(0) + 1
    if float(dims[0]) * float(dims[1]) * float(dims[2]) >= 2.0 ** 62:
        raise ValueError(f"voxel_keys: grid of {dims.tolist()} cells is too fine for int64 keys "
                         f"(grid_size {grid_size} for an extent of {np.ptp(coord, 0).tolist()})")
    return (g[:, 0] * dims[1] + g[:, 1]) * dims[2] + g[:, 2]


def _sorted_rows(index: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reorder kept rows to ascending input order and renumber ``inverse`` to match."""
    order = np.argsort(index, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return index[order].astype(np.int64), rank[inverse]


def grid_sample(coord: np.ndarray, grid_size: float | None, mode: str = "test",
                rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keep one point per voxel of size ``grid_size``.

    ``"train"``: a random point of each voxel (needs ``rng``); ``"test"``: the first point of each voxel
    in input order (deterministic). ``grid_size`` None or 0 keeps every point.
    """
    if mode not in GRID_MODES:
        raise ValueError(f"grid_sample: mode must be one of {GRID_MODES}, got {mode!r}")
    n = len(coord)
    if not grid_size:
        ident = np.arange(n, dtype=np.int64)
        return ident, ident.copy()
    key = voxel_keys(coord, grid_size)
    _, first, voxel = np.unique(key, return_index=True, return_inverse=True)
    voxel = voxel.reshape(-1)
    if mode == "train":
        if rng is None:
            raise ValueError("grid_sample: mode 'train' needs rng (a numpy Generator)")
        perm = rng.permutation(n)
        _, first_in_perm = np.unique(key[perm], return_index=True)  # same sorted voxel order as above
        first = perm[first_in_perm]
    return _sorted_rows(first, voxel)


def cap_points(coord: np.ndarray, index: np.ndarray, inverse: np.ndarray, max_points: int | None,
               mode: str = "test", rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``max_points`` of the rows ``index`` (random in "train", evenly strided in "test");
    points whose row was dropped map to the nearest kept point, so ``inverse`` still covers every point.
    """
    if max_points is None or len(index) <= max_points:
        return index, inverse
    if max_points <= 0:
        raise ValueError(f"cap_points: max_points must be positive, got {max_points}")
    if mode == "train":
        if rng is None:
            raise ValueError("cap_points: mode 'train' needs rng (a numpy Generator)")
        rows = np.sort(rng.choice(len(index), size=max_points, replace=False))
    elif mode == "test":
        rows = np.unique(np.linspace(0, len(index) - 1, max_points).round().astype(np.int64))
    else:
        raise ValueError(f"cap_points: mode must be one of {GRID_MODES}, got {mode!r}")
    from scipy.spatial import cKDTree

    new_row = np.full(len(index), -1, dtype=np.int64)
    new_row[rows] = np.arange(len(rows))
    new_index = index[rows]
    new_inverse = new_row[inverse]
    lost = np.flatnonzero(new_inverse < 0)
    if len(lost):
        _, nearest = cKDTree(coord[new_index]).query(coord[lost])
        new_inverse[lost] = nearest
    return new_index, new_inverse
