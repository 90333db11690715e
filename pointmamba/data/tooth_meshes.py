"""A segmented scan cut into one mesh per tooth plus the gingiva, as orthodontic setup software takes them.

Labels are per vertex; a cut needs every face in exactly one piece. The rule:

1. **Majority.** A face goes to the label two or three of its corners carry. A face whose three corners
   all differ (where two teeth and the gingiva meet) goes to the gingiva if a corner is gingiva, else to
   the lower-numbered tooth. A lone vertex of another label inside a tooth therefore leaves no hole: the
   faces around it have two corners of the tooth.
2. **No holes.** For each tooth, the faces that are not its own form connected pieces (across shared
   edges). A piece that touches no open border of the scan and has fewer faces than the tooth is enclosed
   by the tooth: a hole in it (a mislabelled island), and goes to the tooth. The scan's remaining surface
   always reaches the cut border of the scan (or, on a closed mesh, is larger than any tooth).
3. **No gingiva crumbs.** The gingiva's faces form connected pieces too; rule 1 leaves single faces where
   two teeth and the gingiva meet (13-19 such pieces per exported gingiva, mostly one face each). A piece
   that is not the largest, has fewer than ``ISLAND_SHARE`` (1 %) of the gingiva's faces and shares an edge
   with a tooth goes to the tooth it shares most edges with (ties: the lower number). A piece that touches
   no tooth (a separate part of the scan file) stays gingiva.

Each piece keeps the original vertices (coordinates and units as in the scan file) and the faces'
winding; :func:`split_by_label` numbers a piece's vertices in their original order.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

import numpy as np

ISLAND_SHARE = 0.01
"""A gingiva piece below this share of the gingiva's faces, beside a tooth, goes to that tooth (rule 3)."""


def _face_adjacency(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (E, 2) of faces sharing an edge, (F,) whether a face has an edge on the open border)."""
    f = len(faces)
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    owner = np.tile(np.arange(f), 3)
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    edges, owner = edges[order], owner[order]
    same = (edges[1:] == edges[:-1]).all(1)
    pairs = np.stack([owner[:-1][same], owner[1:][same]], 1)  # non-manifold edges link each consecutive pair
    start = np.r_[True, ~same]
    group = np.cumsum(start) - 1
    uses = np.bincount(group)
    border = np.zeros(f, dtype=bool)
    border[owner[uses[group] == 1]] = True
    return pairs, border


def face_labels(faces: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The label owning each face (F,) by the rules in the module doc (majority, holes filled, no gingiva crumbs)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    faces = np.asarray(faces, dtype=np.int64)
    corner = np.asarray(labels, dtype=np.int64)[faces]  # (F, 3)
    a, b, c = corner.T
    owner = np.where((a == b) | (a == c), a, np.where(b == c, b, -1))
    mixed = owner < 0
    owner[mixed] = np.where((corner[mixed] == 0).any(1), 0, corner[mixed].min(1))
    pairs, border = _face_adjacency(faces)
    n = len(faces)
    for tooth in np.unique(owner):
        if tooth <= 0:
            continue
        mine = owner == tooth
        keep = ~mine[pairs[:, 0]] & ~mine[pairs[:, 1]]
        e = pairs[keep]
        graph = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
        _, comp = connected_components(graph, directed=False)
        comp = np.where(mine, -1, comp)
        others = comp[comp >= 0]
        size = np.bincount(others)
        touches = np.bincount(others, weights=border[comp >= 0]) > 0
        holes = np.flatnonzero(~touches & (size < mine.sum()) & (size > 0))
        if len(holes):
            owner[np.isin(comp, holes)] = tooth
    return _absorb_gingiva_islands(owner, pairs)


def _components(mask: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Connected piece of each face in ``mask`` across shared edges (-1 for the faces outside it)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(mask)
    e = pairs[mask[pairs[:, 0]] & mask[pairs[:, 1]]]
    _, comp = connected_components(coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)), directed=False)
    return np.where(mask, comp, -1)


def _absorb_gingiva_islands(owner: np.ndarray, pairs: np.ndarray, share: float = ISLAND_SHARE) -> np.ndarray:
    """Rule 3 of the module doc: small gingiva pieces beside a tooth given to the tooth."""
    gum = owner == 0
    if not gum.any():
        return owner
    comp = _components(gum, pairs)
    sizes = np.bincount(comp[gum])
    small = (sizes > 0) & (sizes < share * gum.sum())
    small[sizes.argmax()] = False  # the gingiva itself, whatever its share
    # every (island, tooth) edge, both directions
    a, b = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    edge = gum[a] & ~gum[b]
    edge[edge] = small[comp[a[edge]]]
    if not edge.any():
        return owner
    island, tooth = comp[a[edge]], owner[b[edge]]
    keys, counts = np.unique(np.stack([island, tooth], 1), axis=0, return_counts=True)
    order = np.lexsort((keys[:, 1], -counts, keys[:, 0]))  # per island: most edges first, then the lower number
    keys = keys[order]
    first = np.r_[True, keys[1:, 0] != keys[:-1, 0]]
    to = np.full(len(sizes), -1, dtype=owner.dtype)
    to[keys[first, 0]] = keys[first, 1]
    moved = gum & (to[np.maximum(comp, 0)] >= 0)
    out = owner.copy()
    out[moved] = to[comp[moved]]
    return out


def split_by_label(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{label: (vertices, faces)}``: one sub-mesh per label that owns a face (0 = gingiva), cut by
    :func:`face_labels`. Together the pieces hold every face of the scan exactly once."""
    vertices = np.asarray(vertices)
    faces = np.asarray(faces, dtype=np.int64)
    owner = face_labels(faces, labels)
    pieces = {}
    for label in np.unique(owner):
        own = faces[owner == label]
        used = np.unique(own)
        remap = np.full(len(vertices), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        pieces[int(label)] = (vertices[used], remap[own])
    return pieces


def piece_name(stem: str, label: int) -> str:
    """``<stem>_<FDI>.stl`` for a tooth, ``<stem>_gingiva.stl`` for the gingiva."""
    return f"{stem}_{'gingiva' if label == 0 else int(label)}.stl"


def write_tooth_meshes(folder: str | PathLike, stem: str, vertices: np.ndarray, faces: np.ndarray,
                       labels: np.ndarray) -> list[Path]:
    """Write every piece of :func:`split_by_label` as a binary STL (:func:`piece_name`), atomically."""
    from .mesh import write_stl

    return [write_stl(Path(folder) / piece_name(stem, label), v, f)
            for label, (v, f) in split_by_label(vertices, faces, labels).items()]
