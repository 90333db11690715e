"""One FDI number on two separate teeth: a label file whose number covers two places far apart.

A number typed on the wrong tooth leaves the tooth it belongs to unnumbered (or doubly numbered), and the
wrong tooth carries a number whose other piece sits elsewhere on the arch. On the 187 shared references
(``../shared/data``, 2026-11-28, ``docs/results/reference_doubts/``) every tooth's label is one connected
piece of the mesh, but for one: IOS002_upper's "16" is its first molar (369 vertices) and, 27 mm away (36 mm
between centres), its right central incisor (190 vertices), which carries no "11". No other label there has a
second piece of even 20 vertices.

A number's second piece is reported where it holds at least :data:`MIN_SHARE` of the number's vertices and
lies at least :data:`MIN_GAP_MM` from the main piece. A crown the scanner left a hole across comes apart into
pieces next to each other, under the gap; a speck of a neighbour's label is under the share.
"""
from __future__ import annotations

import numpy as np

MIN_SHARE = 0.1
"""A second piece holding less of the number's vertices is a speck, not a tooth."""

MIN_GAP_MM = 5.0
"""A second piece nearer the main one than this (mm, nearest vertices) is the same crown cut by a hole."""


def label_pieces(faces: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(V,) id of each vertex's piece: vertices joined by an edge whose two ends carry the same label."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(labels)
    f = np.asarray(faces, dtype=np.int64)
    edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    edges = edges[labels[edges[:, 0]] == labels[edges[:, 1]]]
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def scattered_label_findings(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray) -> list[str]:
    """One line per tooth number found in two places (see the module doc); [] for a file without."""
    from scipy.spatial import cKDTree

    labels = np.asarray(labels)
    pieces = label_pieces(faces, labels)
    findings = []
    for fdi in np.unique(labels[labels > 0]):
        ids, counts = np.unique(pieces[labels == fdi], return_counts=True)
        if len(ids) < 2:
            continue
        order = np.argsort(-counts, kind="stable")
        main = vertices[pieces == ids[order[0]]]
        tree = cKDTree(main)
        for k in order[1:]:
            if counts[k] < MIN_SHARE * counts.sum():
                break
            gap = float(tree.query(vertices[pieces == ids[k]])[0].min())
            if gap >= MIN_GAP_MM:
                findings.append(f"tooth {int(fdi)} is labelled in two places {gap:.0f} mm apart ({counts[order[0]]} "
                                f"and {counts[k]} vertices): one of them another tooth?")
    return findings
