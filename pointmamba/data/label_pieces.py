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

:func:`tooth_pieces` (the connected pieces of each tooth label) is also what the numbering numbers
(:func:`pointmamba.inference.tooth_numbering.cut_pieces`).
"""
from __future__ import annotations

import numpy as np

MIN_SHARE = 0.1
"""A second piece holding less of the number's vertices is a speck, not a tooth."""

MIN_GAP_MM = 5.0
"""A second piece nearer the main one than this (mm, nearest vertices) is the same crown cut by a hole."""


def tooth_pieces(labels: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """Connected pieces (mesh ``edges``, see :func:`.mesh.mesh_edges`) of vertices sharing one tooth
    label, as vertex-id arrays."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    labels = np.asarray(labels)
    e = edges
    e = e[(labels[e[:, 0]] == labels[e[:, 1]]) & (labels[e[:, 0]] > 0)]
    n = len(labels)
    _, comp = connected_components(coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)), directed=False)
    tooth = np.flatnonzero(labels > 0)
    order = tooth[np.argsort(comp[tooth], kind="stable")]
    starts = np.flatnonzero(np.r_[True, np.diff(comp[order]) != 0]) if len(order) else np.zeros(0, dtype=np.int64)
    return [p for p in np.split(order, starts[1:])] if len(order) else []


def scattered_label_findings(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray) -> list[str]:
    """One line per tooth number found in two places (see the module doc); [] for a file without."""
    from scipy.spatial import cKDTree

    from .mesh import mesh_edges

    labels = np.asarray(labels)
    by_number: dict[int, list[np.ndarray]] = {}
    for piece in tooth_pieces(labels, mesh_edges(faces, len(labels))):
        by_number.setdefault(int(labels[piece[0]]), []).append(piece)
    findings = []
    for fdi, pieces in sorted(by_number.items()):
        if len(pieces) < 2:
            continue
        pieces.sort(key=len, reverse=True)  # stable: equal sizes keep the pieces' order
        total = sum(len(p) for p in pieces)
        tree = cKDTree(vertices[pieces[0]])
        for piece in pieces[1:]:
            if len(piece) < MIN_SHARE * total:
                break
            gap = float(tree.query(vertices[piece])[0].min())
            if gap >= MIN_GAP_MM:
                findings.append(f"tooth {fdi} is labelled in two places {gap:.0f} mm apart ({len(pieces[0])} "
                                f"and {len(piece)} vertices): one of them another tooth?")
    return findings
