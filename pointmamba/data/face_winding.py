"""Which way a mesh's faces are wound: out of the jaw, as the scans the model learned from, or inside out.

Some exports wind every face the other way (and a mirrored mesh is wound so), so that each normal points into
the jaw. The network reads the vertex normals: such a mesh came out with no tooth found on every one of 16 scans
tried (mIoU 0.03-0.12; docs/results/face_winding).

How it shows: the surface's **signed bend**. Over the mesh's edges, ``(n_b - n_a) . (x_b - x_a)`` (vertex
normals ``n``, positions ``x``) is positive where the surface turns away from its normals (convex seen from
outside, as crowns, cusps and gum bumps are) and negative where it turns towards them; summed, divided by the
sum of its magnitudes, it is a number in [-1, 1] whose sign is the winding's: reversing every face negates it
exactly. On the 190 meshes as they are (187 shared scans, 3 samples) it is positive (docs/results/face_winding).
"""
from __future__ import annotations

import numpy as np

from .mesh import vertex_normals

SAMPLED_FACES = 20_000
"""Faces whose edges the signed bend sums at most (every k-th face): its sign needs no more."""


def signed_bend(vertices: np.ndarray, faces: np.ndarray) -> float:
    """The mesh's signed bend in [-1, 1] (see the module doc); 0 for a mesh with no bend (flat) or no faces.
    Summed over the faces' own edges (an edge between two faces counts twice, which changes no sign), of at most
    :data:`SAMPLED_FACES` faces taken evenly through the file."""
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return 0.0
    points = np.asarray(vertices, dtype=np.float64)
    normals = vertex_normals(points, faces)
    some = faces[::max(1, len(faces) // SAMPLED_FACES)]
    a, b = some.T.reshape(-1), some[:, [1, 2, 0]].T.reshape(-1)
    bend = ((normals[b] - normals[a]) * (points[b] - points[a])).sum(1)
    total = float(np.abs(bend).sum())
    return float(bend.sum()) / total if total > 0 else 0.0


def inside_out(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """True when the mesh's faces are wound into the jaw: its signed bend is negative."""
    return signed_bend(vertices, faces) < 0
