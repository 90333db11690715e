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


def check_jaw_size(vertices: np.ndarray, path: str | PathLike | None) -> None:
    """Raise :class:`ScanFormatError` for a mesh with too few vertices to be a jaw scan."""
    if len(vertices) < MIN_JAW_VERTICES:
        raise ScanFormatError(path, "vertices", f"{len(vertices)} vertices: too few for a jaw scan (at least "
                                                f"{MIN_JAW_VERTICES}; jaw scans have thousands)")
