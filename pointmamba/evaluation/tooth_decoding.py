"""Tooth-level decoding: FDI positions assigned jointly along the arch, in order, each at most once per side.

A per-vertex classifier can label two neighbouring teeth with one number (a lower lateral incisor called
a central one, and every tooth behind it one position short). Teeth along one side of the arch come in a
fixed order, each at most once, with known typical widths. This module turns that into a
one-dimensional segmentation per side and solves it exactly by dynamic programming:

1. tooth vertices (argmax not gingiva) are split by side (the summed probability of each side's classes)
   and given an angle around a point inside the arch (canonical frame: crowns +z, incisors +y), binned
   by ``bin_deg``; each bin's arc length is its median radius times the bin angle, empty bins (gaps of
   missing teeth) are dropped so that widths measure tooth material;
2. per side, the bins from the midline outwards are cut into consecutive segments with strictly
   increasing positions 1..8 (missing teeth are skipped positions). A segment costs the summed
   ``-log q`` of its vertices (``q``: the network's probabilities of that side's eight classes,
   renormalized) plus ``width_weight * n_vertices * ((length - w) / (0.35 w))**2`` with ``w`` the typical
   mesiodistal width of that tooth (upper/lower tables below); the cheapest segmentation is exact;
3. each tooth vertex may then take only the positions decoded within ``tolerance_mm`` of its bin (and
   gingiva): the network still draws the boundaries, but no longer two teeth with one number.

The result is a probability matrix with the disallowed classes set to zero, for argmax or the graph cut.
"""
from __future__ import annotations

import numpy as np

# Typical mesiodistal crown widths in mm, positions 1..8 (central incisor .. third molar); textbook means
# (e.g. Wheeler's dental anatomy). Lower incisors are much narrower than upper ones.
TOOTH_WIDTH_MM = {
    "upper": np.array([8.5, 6.5, 7.5, 7.0, 6.5, 10.0, 9.0, 8.5]),
    "lower": np.array([5.0, 5.5, 7.0, 7.0, 7.0, 11.0, 10.5, 10.0]),
}
WIDTH_SIGMA = 0.35  # relative spread of the width prior (patients, crowding, scan scale)


def side_blocks(num_classes: int, jaw: str | None) -> list[np.ndarray]:
    """Class ids of positions 1..8 for the two sides: [-x side, +x side] in the canonical frame."""
    if num_classes == 17:
        return [np.arange(1, 9), np.arange(9, 17)]
    if jaw == "lower":
        return [np.arange(17, 25), np.arange(25, 33)]
    return [np.arange(1, 9), np.arange(9, 17)]


def _segment_side(cost: np.ndarray, length: np.ndarray, count: np.ndarray, widths: np.ndarray,
                  width_weight: float) -> np.ndarray:
    """Exact segmentation of ``B`` ordered bins into runs with strictly increasing labels 0..K-1.

    ``cost`` (B, K) summed -log q per bin and label, ``length`` (B,) mm per bin, ``count`` (B,) vertices
    per bin. Returns the label of every bin."""
    B, K = cost.shape
    csum = np.vstack([np.zeros((1, K)), np.cumsum(cost, 0)])  # (B+1, K)
    lsum = np.concatenate([[0.0], np.cumsum(length)])
    nsum = np.concatenate([[0.0], np.cumsum(count)])
    INF = np.inf
    # D[b + 1, k]: best cost of bins 0..b with the last run labelled k; D[0, :] start (no run yet)
    D = np.full((B + 1, K), INF)
    back = np.zeros((B + 1, K, 2), dtype=np.int64)  # (start bin of the run, previous label or -1)
    for b in range(B):
        starts = np.arange(b + 1)  # run = bins start..b
        seg_len = lsum[b + 1] - lsum[starts]
        seg_n = nsum[b + 1] - nsum[starts]
        # best predecessor ending at start-1 with label < k: prefix minimum over labels
        prev = D[starts]  # (S, K): D at position start (bins 0..start-1)
        prev_min = np.full((len(starts), K), INF)
        prev_arg = np.full((len(starts), K), -1, dtype=np.int64)
        run_min = np.where(starts == 0, 0.0, INF)  # nothing before the first run costs 0
        run_arg = np.full(len(starts), -1, dtype=np.int64)
        for k in range(K):
            prev_min[:, k], prev_arg[:, k] = run_min, run_arg
            better = prev[:, k] < run_min
            run_min = np.where(better, prev[:, k], run_min)
            run_arg = np.where(better, k, run_arg)
        for k in range(K):
            data = csum[b + 1, k] - csum[starts, k]
            prior = width_weight * seg_n * ((seg_len - widths[k]) / (WIDTH_SIGMA * widths[k])) ** 2
            total = prev_min[:, k] + data + prior
            i = int(np.argmin(total))
            D[b + 1, k] = total[i]
            back[b + 1, k] = (starts[i], prev_arg[i, k])
    labels = np.empty(B, dtype=np.int64)
    b, k = B, int(np.argmin(D[B]))
    while b > 0:
        start, prev_k = back[b, k]
        labels[start:b] = k
        b, k = int(start), int(prev_k)
    return labels


def decode_teeth(coord: np.ndarray, probs: np.ndarray, jaw: str, num_classes: int = 17,
                 width_weight: float = 0.1, bin_deg: float = 1.0, tolerance_mm: float = 1.5) -> np.ndarray:
    """Probabilities (V, C) with the classes the arch decoding rules out set to 0 (see module doc).

    ``coord`` (V, 3): vertices in the canonical frame (crowns +z, incisors towards +y), in mm.

    Measured alternative left out: taking the tooth vertices from a first graph cut's labels resisted
    i.i.d. noise in a simulation but lowered val mIoU on real predictions (0.622 -> 0.605)."""
    return arch_decoding(coord, probs, jaw, num_classes, width_weight, bin_deg, tolerance_mm)[0]


def arch_decoding(coord: np.ndarray, probs: np.ndarray, jaw: str, num_classes: int = 17,
                  width_weight: float = 0.1, bin_deg: float = 1.0,
                  tolerance_mm: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Both uses of one decoding: the masked probabilities of :func:`decode_teeth`, and the class the
    decoding gives each vertex's bin (V,), -1 for vertices that are not teeth (for :func:`relabel_teeth`)."""
    probs = np.asarray(probs, dtype=np.float64)
    if jaw not in TOOTH_WIDTH_MM:
        raise ValueError(f"decode_teeth: jaw must be 'upper' or 'lower', got {jaw!r}")
    pred = probs.argmax(1)
    tooth = np.flatnonzero(pred != 0)
    decoded = np.full(len(probs), -1, dtype=np.int64)
    if len(tooth) < 10:
        return probs, decoded
    blocks = side_blocks(num_classes, jaw)
    xy = coord[tooth, :2].astype(np.float64)
    y_lo, y_hi = np.percentile(xy[:, 1], [2, 98])
    centre = np.array([np.median(xy[:, 0]), y_lo + 0.3 * (y_hi - y_lo)])
    rel = xy - centre
    theta = np.degrees(np.arctan2(rel[:, 0], rel[:, 1]))  # 0 at the incisors, < 0 towards -x
    radius = np.linalg.norm(rel, axis=1)
    side_mass = np.stack([probs[tooth][:, blk].sum(1) for blk in blocks], 1)
    side = side_mass.argmax(1)
    widths = TOOTH_WIDTH_MM[jaw]
    allowed = np.zeros_like(probs, dtype=bool)
    allowed[:, 0] = True
    allowed[pred == 0] = True  # gingiva vertices keep every class
    for s, blk in enumerate(blocks):
        members = np.flatnonzero(side == s)
        if len(members) == 0:
            continue
        away = -theta[members] if s == 0 else theta[members]  # angle from the midline outwards
        bins = np.floor(away / bin_deg).astype(np.int64)
        uniq, inv = np.unique(bins, return_inverse=True)  # occupied bins only: gaps are dropped
        q = probs[tooth[members]][:, blk]
        q = q / np.maximum(q.sum(1, keepdims=True), 1e-12)
        cost = np.zeros((len(uniq), len(blk)))
        np.add.at(cost, inv, -np.log(np.maximum(q, 1e-6)))
        count = np.bincount(inv, minlength=len(uniq)).astype(np.float64)
        side_radius = radius[members]
        med_r = np.array([np.median(side_radius[inv == i]) for i in range(len(uniq))])
        length = med_r * np.radians(bin_deg)
        bin_label = _segment_side(cost, length, count, widths, width_weight)
        arc = np.cumsum(length) - length / 2
        bin_allowed = np.zeros((len(uniq), len(blk)), dtype=bool)  # positions decoded within the tolerance
        for i in range(len(uniq)):
            bin_allowed[i, bin_label[np.abs(arc - arc[i]) <= tolerance_mm]] = True
        rows = tooth[members]
        allowed[np.ix_(rows, blk)] = bin_allowed[inv]
        decoded[rows] = blk[bin_label[inv]]
    out = np.where(allowed, probs, 0.0)
    return out / np.maximum(out.sum(1, keepdims=True), 1e-12), decoded


def relabel_teeth(labels: np.ndarray, decoded: np.ndarray, faces: np.ndarray, agree: float = 0.5) -> np.ndarray:
    """Tooth-level use of the decoding: each connected piece of one tooth label (mesh adjacency) takes the
    decoded position most of its vertices have when at least ``agree`` of them share it (a whole tooth
    relabelled, its boundary kept); a piece whose vertices the decoding splits between positions (two
    teeth under one number) takes the decoded position vertex by vertex. ``agree`` 0.5 / 0.7 / 0.9 gave
    mIoU 0.802 / 0.806 / 0.742 on one split and 0.791 / 0.786 / 0.726 on another (0.785 / 0.791 without):
    0.5 is the only value that made no held-out jaw worse."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from ..data.mesh import mesh_edges

    labels = np.asarray(labels).copy()
    e = mesh_edges(faces)
    same = (labels[e[:, 0]] == labels[e[:, 1]]) & (labels[e[:, 0]] > 0)
    e = e[same]
    n = len(labels)
    graph = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    tooth = np.flatnonzero(labels > 0)  # gingiva vertices are pieces of their own: skipped, not visited
    order = tooth[np.argsort(comp[tooth], kind="stable")]
    starts = np.flatnonzero(np.r_[True, np.diff(comp[order]) != 0])
    for members in np.split(order, starts[1:]):
        dec = decoded[members]
        known = dec >= 0
        if not known.any():
            continue
        values, counts = np.unique(dec[known], return_counts=True)
        if counts.max() >= agree * known.sum():
            labels[members] = values[counts.argmax()]
        else:
            labels[members[known]] = dec[known]
    return labels
