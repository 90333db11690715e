"""Is a mesh complete? Signs of a file cut short, and meshes too small to be a jaw.

An OBJ cut at a line boundary inside its face section parses cleanly and silently loses faces (half of
them: accuracy 0.80 -> 0.59 on MSN001). What can be seen:

* vertices in no face: faces usually follow the vertex order, so the vertices of the lost faces are
  left in none (2.7 % after losing the last 3 % of MSN001's faces). The 49 shared scans have none.
  Refused from :data:`MAX_UNUSED_FRACTION` on, a warning below it.
* few faces: a scanned surface has about two faces per vertex (1.80-1.98 on the shared scans; faces +
  boundary vertices = 2.00 x vertices on all of them); below one per vertex (faces lost in no vertex
  order, or an unwelded mesh) a warning, for meshes of jaw size (small ones are mostly boundary).
* a last line without a newline: the file may end mid-number (checked by the OBJ reader).

And meshes that read cleanly but are not one jaw's surface, whose results are silently worse (warned):

* double-sided: every face also stored with the opposite winding, so the vertex normals cancel (MSN001:
  accuracy 0.94 -> 0.85). The 187 shared scans repeat at most 0.04 % of their faces.
* two jaws in one file: two large separate parts (the lower part of MSN001 stacked with its upper jaw:
  accuracy 0.94 -> 0.53). On the 187 shared scans the second largest part holds at most 0.8 % of the
  vertices.
"""
from __future__ import annotations

import warnings
from os import PathLike

import numpy as np

from .errors import ScanFormatError, ScanWarning

MAX_UNUSED_FRACTION = 0.01
"""Vertices in no face, as a fraction of all, from which a mesh is refused as truncated."""

MIN_FACES_PER_VERTEX = 1.0
"""Below this many faces per vertex a warning says faces may be missing."""

MAX_REPEATED_FACES = 0.05
"""Fraction of faces repeating another face's three vertices from which a mesh is warned about."""

MIN_SECOND_PART = 0.2
"""Fraction of the vertices in the second largest connected part from which a mesh is warned about."""

MIN_JAW_VERTICES = 500
"""Fewer vertices cannot show a jaw's teeth (the shared, decimated scans have 4k-50k)."""


def unused_vertices(num_vertices: int, faces: np.ndarray) -> np.ndarray:
    """Indices of the vertices no face uses."""
    used = np.zeros(num_vertices, dtype=bool)
    used[np.asarray(faces).reshape(-1)] = True
    return np.flatnonzero(~used)


def check_complete(vertices: np.ndarray, faces: np.ndarray, path: str | PathLike | None) -> None:
    """Raise :class:`ScanFormatError` when many vertices are in no face (faces lost); warn
    (:class:`ScanWarning`) for a few such vertices or few faces per vertex."""
    n = len(vertices)
    unused = unused_vertices(n, faces)
    if len(unused) and len(unused) >= MAX_UNUSED_FRACTION * n:
        raise ScanFormatError(path, "faces", f"{len(unused)} of {n} vertices ({len(unused) / n:.1%}) are in no face, "
                                             f"first vertex {unused[0]} (0-based): the face list looks truncated "
                                             "(file cut short?); re-export the scan")
    if len(unused):
        warnings.warn(ScanWarning(f"{path}: faces: {len(unused)} of {n} vertices are in no face (first "
                                  f"{unused[0]}, 0-based); they get no normal and a poor prediction"), stacklevel=2)
    ratio = len(faces) / max(n, 1)
    if ratio < MIN_FACES_PER_VERTEX and n >= MIN_JAW_VERTICES:  # small test and toy meshes are mostly rim
        warnings.warn(ScanWarning(f"{path}: faces: only {len(faces)} faces for {n} vertices ({ratio:.2f} per "
                                  "vertex; a scanned surface has about 2): faces may be missing (file cut "
                                  "short?) or the mesh is unwelded"), stacklevel=2)


def _repeats(*columns: np.ndarray) -> int:
    """How many rows repeat an earlier row of the given uint64 columns (hashed into one key, then sorted: a
    1-D sort is far faster than sorting rows; a hash collision could count one face more, far below any
    fraction that is warned about)."""
    key = np.zeros(len(columns[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):  # wrapping multiplication is the hash
        for col, mult in zip(columns, (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)):
            key ^= col * np.uint64(mult)
    key.sort()
    return int((key[1:] == key[:-1]).sum())


def repeated_faces(faces: np.ndarray) -> tuple[int, int]:
    """(faces that repeat another face's three vertices, how many of them with the opposite winding)."""
    f = np.asarray(faces, dtype=np.int64)
    if len(f) < 2:
        return 0, 0
    a, b, c = f.astype(np.uint64).T
    lo = np.minimum(np.minimum(a, b), c)
    hi = np.maximum(np.maximum(a, b), c)
    repeats = _repeats(lo, a + b + c - lo - hi, hi)
    if not repeats:
        return 0, 0
    # the same face with the same winding: the same corners after rotating the smallest one to the front
    first, second = np.where(a == lo, a, np.where(b == lo, b, c)), np.where(a == lo, b, np.where(b == lo, c, a))
    same_winding = _repeats(first, second, a + b + c - first - second)
    return repeats, repeats - same_winding


def part_sizes(num_vertices: int, faces: np.ndarray) -> np.ndarray:
    """Vertex counts of the connected parts of a mesh, largest first (a vertex in no face is a part)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    f = np.asarray(faces, dtype=np.int64)
    edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]]])
    graph = coo_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])),
                       shape=(num_vertices, num_vertices))
    _, part = connected_components(graph, directed=False)
    return np.sort(np.bincount(part))[::-1]


def check_one_surface(vertices: np.ndarray, faces: np.ndarray, path: str | PathLike | None) -> None:
    """Warn (:class:`ScanWarning`) for a double-sided mesh (many faces stored twice, normals cancel) and for
    two large separate parts (two jaws in one file): both read cleanly and predict far worse."""
    repeats, flipped = repeated_faces(faces)
    if repeats >= MAX_REPEATED_FACES * len(faces):
        kind = (f"{flipped} of them with the opposite winding: a double-sided mesh, whose normals cancel"
                if flipped >= repeats / 2 else "a mesh with duplicated faces")
        warnings.warn(ScanWarning(f"{path}: faces: {repeats} of {len(faces)} faces ({repeats / len(faces):.0%}) repeat "
                                  f"another face's three vertices, {kind}; the prediction will be poor: export "
                                  "the scan single-sided"), stacklevel=2)
    if len(vertices) >= MIN_JAW_VERTICES:
        sizes = part_sizes(len(vertices), faces)
        if len(sizes) > 1 and sizes[1] >= MIN_SECOND_PART * len(vertices):
            warnings.warn(ScanWarning(f"{path}: faces: the mesh has {int((sizes >= MIN_SECOND_PART * len(vertices)).sum())} "
                                      f"large separate parts ({', '.join(f'{s / len(vertices):.0%}' for s in sizes[:3])} of "
                                      "the vertices): two jaws in one file? Segment each jaw from its own file"),
                          stacklevel=2)


def check_jaw_size(vertices: np.ndarray, path: str | PathLike | None) -> None:
    """Raise :class:`ScanFormatError` for a mesh with too few vertices to be a jaw scan."""
    if len(vertices) < MIN_JAW_VERTICES:
        raise ScanFormatError(path, "vertices", f"{len(vertices)} vertices: too few for a jaw scan (at least "
                                                f"{MIN_JAW_VERTICES}; jaw scans have thousands)")
