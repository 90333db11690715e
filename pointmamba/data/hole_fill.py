"""A filled hole: the large triangles with which a watertight export closes a scan's open rim.

Why it matters: with the rim closed, the canonical pose (:mod:`.pose`) loses its rim cue for the crowns' side, and
the normals of a closed surface sum to nothing: 7 of 16 scans whose rim was closed by a fan of triangles came out
upside down (docs/results/hole_fill). The fill is no scanned surface, so it is left out of the segmentation as a
model's base is (:mod:`.model_base`), its own vertices gingiva.

What counts as a fill: faces of more than :data:`AREA_RATIO` times the mesh's median face area, together at least
:data:`MIN_SHARE` of its area, and every face at a vertex whose faces are at least half such faces. On the 190 meshes as they are the largest face is at most 15.4 times the median. A
fill remeshed into triangles of the scan's own size is not found.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mesh import face_normals

AREA_RATIO = 20.0  # a fill's faces: larger than this times the median face
MIN_SHARE = 0.01  # ... and together at least this share of the mesh's area


@dataclass(frozen=True)
class HoleFill:
    """``faces`` (F,) bool, the fill's faces; ``area_mm2`` their area."""

    faces: np.ndarray
    area_mm2: float


def find_hole_fill(vertices: np.ndarray, faces: np.ndarray) -> HoleFill | None:
    """The faces of a filled hole in a mesh, or None (see the module doc)."""
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return None
    area = 0.5 * np.linalg.norm(face_normals(np.asarray(vertices, dtype=np.float64), faces), axis=1)
    fill = area > AREA_RATIO * float(np.median(area))
    if not fill.any() or float(area[fill].sum()) < MIN_SHARE * float(area.sum()):
        return None
    # a vertex whose faces are mostly fill (a fan's centre) takes all of its faces with it: where the rim passes
    # near the fill's centre, its triangles there are small
    n = len(vertices)
    corners = faces.reshape(-1)
    in_fill = np.bincount(corners, weights=np.repeat(fill, 3).astype(np.float64), minlength=n)
    mostly = in_fill >= 0.5 * np.bincount(corners, minlength=n)
    fill |= mostly[faces].any(1)
    return HoleFill(faces=fill, area_mm2=float(area[fill].sum()))
