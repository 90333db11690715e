"""Alpha-expansion of a metric labelling energy where each site may take only some labels (max-flow by PyMaxflow).

GCO's expansion moves every site in every move: with 17 labels, a cycle is 17 max-flows over the whole
graph. A vertex that can only end as one of the two or three labels around it needs only their moves:
the move of label ``a`` is a max-flow over the sites that may take ``a`` and do not have it yet, the
others staying as they are (GCO's sparse data costs do the same; its Python wrapper does not expose
them). Costs are integers, so a move is kept only where it lowers the energy exactly.

Energy: ``sum_p cost[p, label_p] + sum_(p,q) weight_pq * pair[label_p, label_q]``; ``pair`` is Potts
(``[label_p != label_q]``) unless given, and must be a metric (zero diagonal, symmetric, triangle
inequality) for an expansion move to be one max-flow.
"""
from __future__ import annotations

import numpy as np


def potts(n_labels: int) -> np.ndarray:
    """(L, L) int64 Potts costs: 1 between different labels."""
    return 1 - np.eye(n_labels, dtype=np.int64)


def cut_energy(labels: np.ndarray, cost: np.ndarray, edges: np.ndarray, weights: np.ndarray,
               pair: np.ndarray | None = None) -> int:
    """The energy of ``labels`` (integers, exact); ``pair`` None: Potts."""
    labels = np.asarray(labels)
    cost = np.asarray(cost, dtype=np.int64)
    pair = potts(cost.shape[1]) if pair is None else np.asarray(pair, dtype=np.int64)
    unary = int(cost[np.arange(len(labels)), labels].sum())
    return unary + int((np.asarray(weights, dtype=np.int64) * pair[labels[edges[:, 0]], labels[edges[:, 1]]]).sum())


def restricted_expansion(edges: np.ndarray, weights: np.ndarray, cost: np.ndarray, candidates: np.ndarray,
                         labels: np.ndarray | None, max_cycles: int, pair: np.ndarray | None = None) -> np.ndarray:
    """Labels (n,) by alpha-expansion, each site ``p`` taking only labels with ``candidates[p]`` true.

    ``edges`` (E, 2) site ids, ``weights`` (E,) integer cut costs, ``cost`` (n, L) integer unaries;
    ``labels`` the start (None: each site's cheapest candidate; a start label is always allowed);
    ``max_cycles`` cycles at most (each tries every label once; it stops on one that changes nothing);
    ``pair`` (L, L) integer metric of the cut costs (None: Potts)."""
    cost = np.asarray(cost, dtype=np.int64)
    n, n_labels = cost.shape
    pair = potts(n_labels) if pair is None else np.asarray(pair, dtype=np.int64)
    candidates = np.asarray(candidates, dtype=bool).copy()
    if labels is None:
        labels = np.where(candidates, cost, np.iinfo(np.int64).max).argmin(1)
    labels = np.asarray(labels, dtype=np.int64).copy()
    candidates[np.arange(n), labels] = True
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(weights, dtype=np.int64)
    # the sites that may take each label, and the edges that touch them: a move looks at nothing else
    movers = _rows(candidates.T, n_labels)
    reach = _rows((candidates[edges[:, 0]] | candidates[edges[:, 1]]).T, n_labels)
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
            move = _best_move(alpha, sites, labels, cost, var, node, a, b, w_all, pair)
            if move.any():
                moved = sites[move]
                gain = int((cost[moved, labels[moved]] - cost[moved, alpha]).sum())
                new = labels.copy()
                new[moved] = alpha
                touched = var[a] | var[b]
                ta, tb = a[touched], b[touched]
                gain += int((w_all[touched] * (pair[labels[ta], labels[tb]] - pair[new[ta], new[tb]])).sum())
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


def _rows(mask: np.ndarray, n_rows: int) -> list[np.ndarray]:
    """``[np.flatnonzero(mask[r]) for r in range(n_rows)]`` of a (n_rows, n) bool array, from one ``nonzero``."""
    row, col = np.nonzero(mask)
    return np.split(col, np.searchsorted(row, np.arange(1, n_rows)))


def _best_move(alpha: int, sites: np.ndarray, labels: np.ndarray, cost: np.ndarray, var: np.ndarray,
               node: np.ndarray, a: np.ndarray, b: np.ndarray, weights: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """(len(sites),) bool: which of ``sites`` (flagged in ``var``, numbered by ``node``) take ``alpha`` in
    the cheapest expansion move, by one max-flow; ``a``, ``b``, ``weights`` the edges that touch them,
    ``pair`` the metric of the cut costs."""
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
    keep += np.bincount(node[p], weights=w * pair[labels[p], labels[q]], minlength=k)
    take += np.bincount(node[p], weights=w * pair[alpha, labels[q]], minlength=k)
    # an edge between two sites that may move (neither has alpha): E(0,0) = A = w pair[l_p, l_q],
    # E(0,1) = B = w pair[l_p, alpha], E(1,0) = C = w pair[alpha, l_q], E(1,1) = D = 0, written as
    # A + (C - A) x_p + (D - C) x_q + (B + C - A - D) (1 - x_p) x_q; B + C - A >= 0 as ``pair`` is a metric
    both = va & vb
    p, q, w = a[both], b[both], weights[both]
    differ = w * pair[labels[p], labels[q]]
    c = w * pair[alpha, labels[q]]
    keep += np.bincount(node[p], weights=differ, minlength=k)
    take += np.bincount(node[p], weights=c, minlength=k)
    take -= np.bincount(node[q], weights=c, minlength=k)
    low = np.minimum(keep, take)
    graph = maxflow.Graph[float]()
    ids = np.asarray(graph.add_nodes(k))
    graph.add_grid_tedges(ids, take - low, keep - low)  # the sink side takes alpha
    if len(p):
        graph.add_edges(node[p], node[q], (w * pair[labels[p], alpha] + c - differ).astype(np.float64), np.zeros(len(p)))
    graph.maxflow()
    return graph.get_grid_segments(ids)
