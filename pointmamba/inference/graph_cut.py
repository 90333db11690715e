"""Graph-cut refinement of per-vertex class probabilities on the mesh (as MeshSegNet refines its output).

Energy: sum over vertices of ``-log p(label)`` plus, over mesh edges whose two vertices differ in label,
``smoothing * w_ij``. ``w_ij`` follows MeshSegNet's dihedral weighting on the angle ``a`` between the two
vertex normals: ``-log(a / pi)``, so flat stretches are expensive to cut and creases cheap, and convex
creases cost ``1 + |cos a|`` times more than concave ones, because tooth/gingiva and tooth/tooth boundaries
run along concave grooves. Minimized by alpha-expansion (``gco-wrapper``, the GCO library).

``tooth_pair_cost`` 2 makes an edge between two different teeth cost twice its weight (an edge between a
tooth and the gingiva once): a strip of gingiva between two teeth costs two boundaries, and handing it to
one of the teeth only one, so a Potts cut (1) gives thin interdental gingiva to a tooth unless the network
is very sure of it. With 2 both cost the same and the network's evidence decides. The pairwise term stays a
metric (2 <= 1 + 1), which alpha-expansion needs (docs/results/gum_between_teeth).

Only the vertices whose label is in question go into the cut. A vertex is *settled* when it and every
vertex within ``SETTLED_RINGS`` mesh rings share their most likely class, each by a margin of at least
``SETTLED_MARGIN`` (second probability <= 5 % of the first): it keeps that class, and its edges to the
cut's vertices become unary costs of those (cost ``w`` for every label but the settled one). The cut's
energy is the full one with the settled labels fixed. On the shared scans (5k, 50k and 201k vertices) and
the val scans every label came out as the full cut's, with 20-60 % of the vertices settled (the 201k scan:
4.9 s -> 2.3 s on a loaded machine); ``settle=False`` cuts every vertex.

On a mesh finer than the network's grid (at least ``COARSE_MIN_VERTICES`` vertices a ``COARSE_CELL_MM``
cell, e.g. a 200k-vertex scan) the others are cut in two passes: the same energy on the cells first, then
vertex by vertex with each vertex allowed only the labels near it (:mod:`.expansion`): the labels of the
cells around it and those almost as cheap as its best. On the 201k-vertex MLEX001 (subdivided) 95 of
201,287 labels differ from one cut of every vertex, at 0.002 % more energy (accuracy 0.9367 -> 0.9363);
on MLEX001 itself 67 of 50,643 (0.9518 -> 0.9526). The 56 val scans of both splits are too coarse for
two passes: one cut, every label as before (415,717 vertices). ``coarse_first=False`` gives one cut of
the unsettled vertices on any mesh. (Those figures are of the candidates (2 cells, 1 nat) and the old
smoothing; with the smoothing scaled by density (``density_power``) they fell short of one cut, split B's val
scans at 16x their vertices 0.807 against 0.830, and the wider candidates below, 6 cells and 3 nats, match it:
0.830, at 0.43 of one cut's time on 201k vertices; docs/results/scan_density.) The fine pass runs one cycle
of its moves (``fine_cycles``): later cycles changed about 0.1 % of the labels and cost more than the
first; val scans at 4x / 16x score within 0.0005 of running it to convergence (docs/results/predict_speed).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..data.mesh import mesh_edges  # a mesh function; callers also find it here as graph_cut.mesh_edges
from .expansion import potts

REFERENCE_EDGE_MM = 0.677
"""Mean edge length (mm) of the densest decimated training scan (186 of ``../shared/data``: 0.678-1.18 mm).
The cut's unary terms grow with the vertices per mm^2 and its cut costs with the edges crossed per mm, so
on a finer mesh the same ``smoothing`` smooths less; ``density_power`` k scales it by
``(REFERENCE_EDGE_MM / mean edge)^k`` on meshes finer than this, and leaves coarser ones as they were
(docs/results/scan_density)."""

MAX_SMOOTHING = 1000.0
"""Largest ``smoothing``: cut costs stay far inside the solver's int32 (NaN or 1e308 overflowed them to
negative costs, on which alpha-expansion never converged)."""

MAX_CYCLES = 20
"""Alpha-expansion cycles at most (each tries every label once). It stops earlier when a cycle changes
nothing: 2-3 cycles on the shared scans, which reach the same labels as running to convergence or lower
energy (MLEX001: 78 of 50,643 vertices differ from GCO's adaptive run-to-convergence, energy 1,588,974
against 1,589,006)."""

SETTLED_MARGIN = 3.0  # nats of -log p between the best class and the second (p2 / p1 <= 0.05)
SETTLED_RINGS = 2  # mesh rings around a settled vertex that must agree with it

COARSE_CELL_MM = 0.6
"""Cell of the first, coarse pass on fine meshes: the shipped recipe's grid (``data.grid_size``), within
which its probabilities are constant, so the coarse pass sees what the network saw. Another grid only moves
more of the work to the fine pass, which may move any boundary by two cells."""
COARSE_MIN_VERTICES = 3  # vertices per cell (on average) from which a mesh is cut coarse first
CANDIDATE_CELLS = 6  # a vertex of the fine pass may take the labels of the coarse cells this many cells away
CANDIDATE_NATS = 3.0  # ... and every label whose cost is within this of its cheapest
# (6, 3.0) since 2026-11-26, (2, 1.0) before: with the smoothing scaled by density the narrower candidates
# left the fine pass short of one cut's labels (split B at 16x the vertices 0.807 against 0.830 for one
# cut; 6 and 3.0 score 0.830, at 0.43 of one cut's time on 201k vertices: docs/results/scan_density)


def edge_weights(vertices: np.ndarray, normals: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """MeshSegNet-style cut costs per edge (see module doc); always > 0."""
    ni, nj = normals[edges[:, 0]], normals[edges[:, 1]]
    cos = np.clip((ni * nj).sum(1), -1.0, 1.0)
    angle = np.arccos(cos)
    base = -np.log(np.clip(angle / np.pi, 1e-4, 1.0)) + 1e-3
    convex = ((nj - ni) * (vertices[edges[:, 1]] - vertices[edges[:, 0]])).sum(1) > 0
    w = np.where(convex, base * (1.0 + np.abs(cos)), base)
    return w / w.mean()  # mean 1: ``smoothing`` means the same on coarse and fine meshes


def symmetric_adjacency(edges: np.ndarray, n: int):  # noqa: ANN201 - scipy is imported lazily
    """(n, n) float32 sparse adjacency of undirected ``edges`` (both directions), for ring propagation."""
    from scipy.sparse import csr_matrix

    adjacency = csr_matrix((np.ones(len(edges), dtype=np.float32), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return adjacency + adjacency.T


def settled_vertices(unary: np.ndarray, edges: np.ndarray, margin: float = SETTLED_MARGIN,
                     rings: int = SETTLED_RINGS) -> np.ndarray:
    """(V,) bool: the vertex and all within ``rings`` rings agree on the lowest-cost label, each by at
    least ``margin`` (see module doc)."""
    n = len(unary)
    best = unary.argmin(1)
    two = np.partition(unary, 1, axis=1)[:, :2] if unary.shape[1] > 1 else np.c_[unary, unary + np.inf]
    unsure = (two[:, 1] - two[:, 0]) < margin
    split = best[edges[:, 0]] != best[edges[:, 1]]
    unsure[edges[split, 0]] = True
    unsure[edges[split, 1]] = True
    if rings > 0 and len(edges):
        adjacency = symmetric_adjacency(edges, n)
        reach = unsure.astype(np.float32)
        for _ in range(rings):
            reach = reach + adjacency @ reach
        unsure = reach > 0
    return ~unsure


def density_factor(vertices: np.ndarray, edges: np.ndarray, power: float) -> float:
    """What ``smoothing`` is multiplied by on this mesh: ``(REFERENCE_EDGE_MM / mean edge length)^power``
    where the mesh is finer than the reference, else 1 (see :data:`REFERENCE_EDGE_MM`)."""
    if power == 0 or len(edges) == 0:
        return 1.0
    mean_edge = float(np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1).mean())
    return max(1.0, REFERENCE_EDGE_MM / max(mean_edge, 1e-9)) ** power


def graph_cut(probs: np.ndarray, vertices: np.ndarray, faces: np.ndarray, normals: np.ndarray,
              smoothing: float = 1.0, settle: bool = True, coarse_first: bool = True,
              density_power: float = 0.0, fine_cycles: int = MAX_CYCLES, tooth_pair_cost: int = 1,
              edges: np.ndarray | None = None) -> np.ndarray:
    """Labels (V,) minimizing the energy of the module doc; classes with zero probability everywhere are
    left out of the optimization (they cannot win). ``settle``: settled vertices keep their class and only
    the others are cut (see module doc). ``coarse_first``: a fine mesh is cut coarse first, then vertex
    by vertex near the boundaries (see module doc); False: one cut of every unsettled vertex.
    ``density_power``: on a mesh finer than the training scans ``smoothing`` grows by
    :func:`density_factor` (0: the same smoothing at every density). ``fine_cycles``: the fine pass's
    alpha-expansion cycles at most (:data:`MAX_CYCLES`: until a cycle changes nothing). ``tooth_pair_cost``:
    1 or 2, the cost (in edge weights) of an edge between two teeth; class 0 is the gingiva (module doc).
    ``edges``: the mesh's :func:`mesh_edges` where the caller has them (None: made here)."""
    probs = np.asarray(probs, dtype=np.float64)
    if not (np.isfinite(smoothing) and 0 <= smoothing <= MAX_SMOOTHING):
        raise ValueError(f"graph_cut: smoothing must be in [0, {MAX_SMOOTHING:g}], got {smoothing!r}")
    if isinstance(fine_cycles, bool) or not isinstance(fine_cycles, (int, np.integer)) or fine_cycles < 1:
        raise ValueError(f"graph_cut: fine_cycles must be an integer >= 1, got {fine_cycles!r}")
    if not (np.isfinite(density_power) and density_power >= 0):
        raise ValueError(f"graph_cut: density_power must be finite and >= 0, got {density_power!r}")
    if isinstance(tooth_pair_cost, bool) or tooth_pair_cost not in (1, 2):
        raise ValueError(f"graph_cut: tooth_pair_cost must be 1 or 2 (a metric needs <= 2), got {tooth_pair_cost!r}")
    if not np.isfinite(probs).all():  # NaN costs abort the GCO library natively (the process dies)
        raise ValueError("graph_cut: class probabilities hold NaN or infinite values")
    used = np.flatnonzero(probs.max(0) > 0)
    unary = -np.log(np.clip(probs[:, used], 1e-6, 1.0))
    if len(used) == 1 or len(faces) == 0 or smoothing <= 0:
        return used[unary.argmin(1)]
    n = len(probs)
    edges = mesh_edges(faces, n) if edges is None else edges
    points = np.asarray(vertices, np.float64)
    ratio = density_factor(points, edges, 1.0) if density_power else 1.0
    weights = edge_weights(points, np.asarray(normals, np.float64), edges)
    smoothing = min(smoothing * ratio ** density_power, MAX_SMOOTHING)
    # integer energies in 1/100 units (gco reads the raw buffers)
    unary_i = np.round(unary * 100).astype(np.int64)
    weights_i = np.clip(np.round(weights * smoothing * 100), 1, 2**30).astype(np.int64)
    labels = unary_i.argmin(1)
    free = ~settled_vertices(unary, edges) if settle else np.ones(n, dtype=bool)
    pair = pair_costs(used, tooth_pair_cost)

    def cut(e: np.ndarray, w: np.ndarray, c: np.ndarray, sites: np.ndarray) -> np.ndarray:
        return (_coarse_then_fine(e, w, c, points[sites], fine_cycles, pair) if coarse_first
                else _expansion(e, w, c, pair))

    return used[_cut_free(free, labels, unary_i, edges, weights_i, cut, pair)]


def pair_costs(classes: np.ndarray, tooth_pair_cost: int = 1) -> np.ndarray:
    """(L, L) int64 cost, in edge weights, of an edge whose two ends take classes ``classes[i]`` and
    ``classes[j]``: 0 alike, 1 where one is the gingiva (class 0), ``tooth_pair_cost`` between two teeth."""
    classes = np.asarray(classes)
    pair = potts(len(classes))
    teeth = classes > 0
    pair[np.outer(teeth, teeth) & (pair > 0)] = tooth_pair_cost
    return pair


def _cut_free(free: np.ndarray, labels: np.ndarray, unary: np.ndarray, edges: np.ndarray, weights: np.ndarray,
              cut: Callable[..., np.ndarray], pair: np.ndarray) -> np.ndarray:
    """``labels`` (V,) with the ``free`` vertices relabelled by ``cut(edges, weights, cost, sites)``
    on the free vertices alone: their edges to the fixed ones become unary costs (``w * pair[label, fixed
    vertex's label]`` for each label), so the cut minimizes the full energy with the fixed labels kept."""
    labels = labels.copy()
    sites = np.flatnonzero(free)
    if len(sites) == 0:
        return labels
    local = np.full(len(free), -1, dtype=np.int64)
    local[sites] = np.arange(len(sites))
    a, b = edges[:, 0], edges[:, 1]
    n_labels = pair.shape[0]
    # to_fixed[p, f]: the summed weights of free vertex p's edges to fixed vertices labelled f; each label l then
    # costs sum_f to_fixed[p, f] pair[l, f]. Integers below 2^53 throughout, so float64 sums are exact.
    to_fixed = np.zeros(len(sites) * n_labels)
    for s, t in ((a, b), (b, a)):
        m = free[s] & ~free[t]
        to_fixed += np.bincount(local[s[m]] * n_labels + labels[t[m]], weights=weights[m],
                                minlength=len(sites) * n_labels)
    cost = unary[sites].astype(np.int64) + (to_fixed.reshape(-1, n_labels) @ pair.T.astype(np.float64)).astype(np.int64)
    inner = free[a] & free[b]
    # C order int32 (gco reads the raw buffers; fancy indexing can give F order)
    sub_edges = np.ascontiguousarray(np.stack([local[a[inner]], local[b[inner]]], 1), dtype=np.int32)
    cost_i = np.ascontiguousarray(np.minimum(cost, 2**30), dtype=np.int32)
    sub_weights = np.ascontiguousarray(weights[inner], dtype=np.int32)
    labels[sites] = cut(sub_edges, sub_weights, cost_i, sites)
    return labels


def _coarse_then_fine(edges: np.ndarray, weights: np.ndarray, cost: np.ndarray, points: np.ndarray,
                      fine_cycles: int = MAX_CYCLES, pair: np.ndarray | None = None) -> np.ndarray:
    """The cut of a fine mesh in two passes. First the same energy on cells of ``COARSE_CELL_MM`` (a
    cell's cost is its vertices' summed costs, an edge between two cells the summed weights of the mesh
    edges between them): the labelling constant per cell. Then every vertex, starting from its cell's
    label, may take the labels of the cells within ``CANDIDATE_CELLS`` cells and those within
    ``CANDIDATE_NATS`` of its cheapest (:func:`.expansion.restricted_expansion`, ``fine_cycles`` cycles at
    most): far from a boundary that is one label, so only the vertices along the boundaries move. A mesh with fewer than
    ``COARSE_MIN_VERTICES`` vertices a cell is cut directly. ``pair``: :func:`pair_costs` (None: Potts)."""
    cell_index = np.floor(points / COARSE_CELL_MM)
    cell_index -= cell_index.min(0)
    span = cell_index.max(0) + 1
    if float(np.prod(span)) >= 2.0**62:  # no single integer key per cell (an absurd extent): one cut
        return _expansion(edges, weights, cost, pair)
    cell_index, span = cell_index.astype(np.int64), span.astype(np.int64)
    _, cells = np.unique((cell_index[:, 0] * span[1] + cell_index[:, 1]) * span[2] + cell_index[:, 2],
                         return_inverse=True)
    cells = cells.reshape(-1)
    m = int(cells.max()) + 1
    if len(cost) < COARSE_MIN_VERTICES * m or len(edges) == 0:
        return _expansion(edges, weights, cost, pair)
    coarse_cost = np.zeros((m, cost.shape[1]), dtype=np.int64)
    for label in range(cost.shape[1]):
        coarse_cost[:, label] = np.bincount(cells, weights=cost[:, label], minlength=m)
    ca, cb = cells[edges[:, 0]], cells[edges[:, 1]]
    cross = ca != cb
    lo, hi = np.minimum(ca[cross], cb[cross]), np.maximum(ca[cross], cb[cross])
    pairs, which = np.unique(lo * m + hi, return_inverse=True)
    coarse_w = np.bincount(which.reshape(-1), weights=weights[cross].astype(np.float64))
    coarse_edges = np.ascontiguousarray(np.stack([pairs // m, pairs % m], 1), dtype=np.int32)
    coarse = _expansion(coarse_edges, np.ascontiguousarray(np.minimum(coarse_w, 2**30), dtype=np.int32),
                         np.ascontiguousarray(np.minimum(coarse_cost, 2**30), dtype=np.int32), pair)
    # each vertex may take the coarse labels of the cells within CANDIDATE_CELLS of its own, and the labels
    # within CANDIDATE_NATS of its cheapest (a boundary the coarse pass put a few cells off)
    from .expansion import restricted_expansion

    adjacency = symmetric_adjacency(coarse_edges, m)
    near = np.zeros((m, cost.shape[1]), dtype=np.float32)
    near[np.arange(m), coarse] = 1.0
    for _ in range(CANDIDATE_CELLS):
        near = near + adjacency @ near
    close = cost - cost.min(1, keepdims=True) <= round(CANDIDATE_NATS * 100)
    return restricted_expansion(edges, weights, cost, (near[cells] > 0) | close, coarse[cells], fine_cycles, pair)


def _expansion(edges: np.ndarray, weights: np.ndarray, cost: np.ndarray, pair: np.ndarray | None = None) -> np.ndarray:
    """Alpha-expansion (GCO): ``cost`` (n, L) int32 unaries, int32 ``weights`` of the int32 ``edges``
    (local site ids), an edge costing ``weight * pair[label, label]`` (:func:`pair_costs`; None: Potts);
    labels (n,) int64."""
    from gco import cut_general_graph

    pairwise = np.ascontiguousarray(potts(cost.shape[1]) if pair is None else pair, dtype=np.int32)
    cut = cut_general_graph(edges, weights, cost, pairwise, n_iter=MAX_CYCLES, algorithm="expansion",
                            down_weight_factor=1)  # its default rescales, then truncates integers
    return np.asarray(cut, dtype=np.int64)
