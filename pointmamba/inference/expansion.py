"""Alpha-expansion of a Potts energy where each site may take only some labels (max-flow by PyMaxflow).

GCO's expansion moves every site in every move: with 17 labels, a cycle is 17 max-flows over the whole
graph. A vertex that can only end as one of the two or three labels around it needs only their moves:
the move of label ``a`` is a max-flow over the sites that may take ``a`` and do not have it yet, the
others staying as they are (GCO's sparse data costs do the same; its Python wrapper does not expose
them). Costs are integers, so a move is kept only where it lowers the energy exactly.

Energy: ``sum_p cost[p, label_p] + sum_(p,q) weight_pq * [label_p != label_q]``.
"""
from __future__ import annotations

import numpy as np


def potts_energy(labels: np.ndarray, cost: np.ndarray, edges: np.ndarray, weights: np.ndarray) -> int:
    """The energy of ``labels`` (integers, exact)."""
    labels = np.asarray(labels)
    unary = int(np.asarray(cost, dtype=np.int64)[np.arange(len(labels)), labels].sum())
    cut = labels[edges[:, 0]] != labels[edges[:, 1]]
    return unary + int(np.asarray(weights, dtype=np.int64)[cut].sum())


def restricted_expansion(edges: np.ndarray, weights: np.ndarray, cost: np.ndarray, candidates: np.ndarray,
                         labels: np.ndarray | None, max_cycles: int) -> np.ndarray:
    """Labels (n,) by alpha-expansion, each site ``p`` taking only labels with ``candidates[p]`` true.

    ``edges`` (E, 2) site ids, ``weights`` (E,) integer cut costs, ``cost`` (n, L) integer unaries;
    ``labels`` the start (None: each site's cheapest candidate; a start label is always allowed);
    ``max_cycles`` cycles at most (each tries every label once; it stops on one that changes nothing)."""
    cost = np.asarray(cost, dtype=np.int64)
    n, n_labels = cost.shape
    candidates = np.asarray(candidates, dtype=bool).copy()
    if labels is None:
        labels = np.where(candidates, cost, np.iinfo(np.int64).max).argmin(1)
    labels = np.asarray(labels, dtype=np.int64).copy()
    candidates[np.arange(n), labels] = True
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(weights, dtype=np.int64)
    # the sites that may take each label, and the edges that touch them: a move looks at nothing else
    movers = [np.flatnonzero(candidates[:, alpha]) for alpha in range(n_labels)]
    reach = [np.flatnonzero(candidates[edges[:, 0], alpha] | candidates[edges[:, 1], alpha])
             for alpha in range(n_labels)]
    # a move depends only on the labels of the sites it may move and of their neighbours (``looks[alpha]``):
    # after a move that changed nothing it stays idle until one of those changes (``stale``)
    # one cycle runs each move once: nothing is woken, so ``looks`` is not built (20 ms at 134k sites)
    wake = max_cycles > 1
    looks = np.zeros((n_labels, n if wake else 0), dtype=bool)
    for alpha in range(n_labels if wake else 0):
        looks[alpha, movers[alpha]] = True
        looks[alpha, edges[reach[alpha]].ravel()] = True
    stale = np.ones(n_labels, dtype=bool)
    var = np.zeros(n, dtype=bool)
    node = np.full(n, -1, dtype=np.int64)
    for _ in range(max_cycles):
        changed = False
        for alpha in range(n_labels):
            if not stale[alpha]:
                continue
            sites = movers[alpha][labels[movers[alpha]] != alpha]
            if len(sites) == 0:
                stale[alpha] = False
                continue
            var[sites] = True
            node[sites] = np.arange(len(sites))
            a, b, w_all = edges[reach[alpha], 0], edges[reach[alpha], 1], weights[reach[alpha]]
            move = _best_move(alpha, sites, labels, cost, var, node, a, b, w_all)
            if move.any():
                moved = sites[move]
                gain = int((cost[moved, labels[moved]] - cost[moved, alpha]).sum())
                new = labels.copy()
                new[moved] = alpha
                touched = var[a] | var[b]
                ta, tb = a[touched], b[touched]
                gain += int((w_all[touched] * ((labels[ta] != labels[tb]).astype(np.int64)
                                               - (new[ta] != new[tb]))).sum())
                if gain > 0:
                    if wake:
                        stale |= looks[:, moved].any(1)
                    labels = new
                    changed = True
                else:
                    stale[alpha] = False
            else:
                stale[alpha] = False
            var[sites] = False
            node[sites] = -1
        if not changed:
            break
    return labels


def _best_move(alpha: int, sites: np.ndarray, labels: np.ndarray, cost: np.ndarray, var: np.ndarray,
               node: np.ndarray, a: np.ndarray, b: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(len(sites),) bool: which of ``sites`` (flagged in ``var``, numbered by ``node``) take ``alpha`` in
    the cheapest expansion move, by one max-flow; ``a``, ``b``, ``weights`` the edges that touch them."""
    import maxflow

    k = len(sites)
    keep = cost[sites, labels[sites]].astype(np.float64)  # x = 0: the site keeps its label
    take = cost[sites, alpha].astype(np.float64)  # x = 1: it takes alpha
    va, vb = var[a], var[b]
    one = va ^ vb
    # an edge to a site that stays: its cut cost under either choice
    p = np.where(va[one], a[one], b[one])
    q = np.where(va[one], b[one], a[one])
    w = weights[one]
    keep += np.bincount(node[p], weights=w * (labels[p] != labels[q]), minlength=k)
    take += np.bincount(node[p], weights=w * (labels[q] != alpha), minlength=k)
    # an edge between two sites that may move: E(0,0) = w [differ], E(0,1) = E(1,0) = w, E(1,1) = 0,
    # written as A + (C - A) x_p + (D - C) x_q + (B + C - A - D) (1 - x_p) x_q
    both = va & vb
    p, q, w = a[both], b[both], weights[both]
    differ = w * (labels[p] != labels[q])
    keep += np.bincount(node[p], weights=differ, minlength=k)
    take += np.bincount(node[p], weights=w, minlength=k)
    take -= np.bincount(node[q], weights=w, minlength=k)
    low = np.minimum(keep, take)
    graph = maxflow.Graph[float]()
    ids = np.asarray(graph.add_nodes(k))
    graph.add_grid_tedges(ids, take - low, keep - low)  # the sink side takes alpha
    if len(p):
        graph.add_edges(node[p], node[q], (2 * w - differ).astype(np.float64), np.zeros(len(p)))
    graph.maxflow()
    return graph.get_grid_segments(ids)
