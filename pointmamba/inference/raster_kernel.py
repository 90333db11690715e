"""The z-buffer of the pictures (:func:`pointmamba.inference.render.rasterize`): a numba loop over the faces.

Each face is tested at the pixel centres inside its bounding box, with the edge functions and the
barycentric depth of the numpy z-buffer it replaced, written in the same float64 operations in the same
order, so every pixel gets the same face (the tests compare it with a per-pixel loop). A scan finer than the
picture has faces smaller than a pixel: most cover no pixel centre, and the numpy version spent its time
on index arrays for them (0.24 s of a 201k-vertex scan's 0.58 s picture).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..ops import compile_notice

compile_notice.install()  # the first picture compiles this for a few seconds: say so


@njit(cache=True)
def nearest_faces(xy, depth, faces, width, height, best_depth, best_face):  # noqa: ANN001, ANN201 - numba  # pragma: no cover
    """Fill ``best_face`` (width * height,) with the nearest face covering each pixel centre (ties: the later
    face) and ``best_depth`` with its depth; both windings count, degenerate and non-finite faces cover none."""
    for f in range(faces.shape[0]):
        i, j, k = faces[f, 0], faces[f, 1], faces[f, 2]
        ax, bx, cx = xy[i, 0], xy[j, 0], xy[k, 0]
        ay, by, cy = xy[i, 1], xy[j, 1], xy[k, 1]
        if not (math.isfinite(ax + bx + cx + ay + by + cy)):
            continue
        lo_x = max(math.ceil(min(min(ax, bx), cx) - 0.5), 0.0)
        lo_y = max(math.ceil(min(min(ay, by), cy) - 0.5), 0.0)
        hi_x = min(math.floor(max(max(ax, bx), cx) - 0.5), width - 1.0)
        hi_y = min(math.floor(max(max(ay, by), cy) - 0.5), height - 1.0)
        if hi_x < lo_x or hi_y < lo_y:
            continue
        area = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        if not (area > 0 or area < 0):
            continue
        za, zb, zc = depth[i], depth[j], depth[k]
        for py in range(int(lo_y), int(hi_y) + 1):
            qy = py + 0.5
            for px in range(int(lo_x), int(hi_x) + 1):
                qx = px + 0.5
                wa = (cx - bx) * (qy - by) - (cy - by) * (qx - bx)
                wb = (ax - cx) * (qy - cy) - (ay - cy) * (qx - cx)
                wc = area - wa - wb
                if area > 0:
                    inside = wa >= 0 and wb >= 0 and wc >= 0
                else:
                    inside = wa <= 0 and wb <= 0 and wc <= 0
                if inside:
                    d = (wa * za + wb * zb + wc * zc) / area
                    pixel = py * width + px
                    if d >= best_depth[pixel]:
                        best_depth[pixel] = d
                        best_face[pixel] = f
