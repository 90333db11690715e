"""Canonical pose of a jaw scan: crowns towards +z, arch opening towards -y, centred at the origin.

Scans arrive in arbitrary poses (in the shared scans the occlusal axis is y for some and z for others).
:func:`canonical_pose` returns a proper rigid 4x4 transform (rotation, no reflection, so the patient's
left and right are kept) that maps the scan into this frame:

1. Centre: area-weighted centroid of the surface (vertex density varies a lot on decimated scans).
2. Occlusal axis: the least-variance principal axis, refined by fitting a plane through the upper half
   of the surface (the crowns) three times; crowns define the occlusal plane better than the gingiva.
3. Its sign (which side the crowns are on): from labels if given (tooth centroid minus gingiva centroid);
   otherwise a majority vote of three geometric cues that agree on all 49 shared scans: the area-
   weighted normal sum points out of the scanned (occlusal) side, the open boundary of the scan lies on
   the root side, and the surface mass is skewed towards the crowns (long tail towards the roots). A closed
   mesh (its rim filled) has neither of the first two; its crown side is where its normals spread, opposite
   its flat side (the third moment of the normals along the axis).
4. Arch direction: a parabola ``y = a x^2 + b x + c`` is fitted to the upper half of the surface
   (projected on the occlusal plane) for in-plane rotations on a 2 degree grid, refined to 0.25 degree;
   the best fit's axis is the sagittal direction and the side it opens to becomes -y. With labels, the
   incisors decide the sign instead (they are at +y).
5. x = y cross z (right-handed). In this frame quadrants 1 and 3 lie at -x, 2 and 4 at +x anatomically.

Measured on the 49 shared scans (geometry only; ``alignment_errors``, tests/test_data_pose.py):
occlusal axis (plane through tooth centroids, signed to the crowns) vs +z after alignment: mean 1.1,
max 3.0 deg; arch front (perpendicular to the mean left-right vector of matching tooth pairs) vs +y:
median 1.4, mean 2.6, max 22.9 deg (three asymmetric scans above 10 deg; train with z rotations of
+-30 deg). With labels the result is the same on these scans (signs were already right).
Note: in the shared scans quadrant 1 (upper) lies at -x but quadrant 3 (lower) at +x, so one of the two
jaws' left/right labelling is mirrored there (their README: "the true left/right was not verified").

Points go back to the scan's own frame with ``np.linalg.inv(T)``; vertex order is never changed, so
per-vertex predictions need no mapping at all.
"""
from __future__ import annotations

import numpy as np

from .mesh import apply_transform, face_normals, vertex_areas

_MAX_FIT_POINTS = 6000
"""Points used in the plane and parabola fits (a fixed-stride subsample): enough for a stable fit."""


def _weights(vertices: np.ndarray, faces: np.ndarray | None) -> np.ndarray:
    if faces is not None and len(faces):
        w = vertex_areas(vertices, faces)
        if w.sum() > 0:
            return w / w.sum()
    return np.full(len(vertices), 1.0 / len(vertices))


def _smallest_axis(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted centroid and principal axes (columns, ascending variance) of points ``x``."""
    w = w / w.sum()
    c = w @ x
    y = x - c
    _, vec = np.linalg.eigh((w[:, None] * y).T @ y)
    return c, vec[:, 0], vec


def _boundary_vertices(faces: np.ndarray, n: int) -> np.ndarray:
    """Vertices on edges that belong to exactly one face (the open rim of the scan), sorted."""
    from .mesh import rim_edges

    return np.unique(rim_edges(faces, n))


CLOSED_SHARE = 0.05
"""A mesh whose vector area (faces' normals times areas, summed) is under this share of its area is closed, or
nearly: its open rims enclose little (an open scan's is about a third of its area)."""


def _crown_sign_geometry(x: np.ndarray, faces: np.ndarray | None, w: np.ndarray, z: np.ndarray) -> float:
    """+1 if the crowns are on the +z side of the centred points ``x``: by majority of three cues, or for a
    closed mesh (:data:`CLOSED_SHARE`; a rim filled, a model on its base) by its flat side alone."""
    h = x @ z
    votes = [-np.sign(w @ (h ** 3))]  # skew: long tail towards the roots
    if faces is not None and len(faces):
        normals = face_normals(x, faces)
        summed = normals.sum(0)
        double_area = np.sqrt(np.einsum("ij,ij->i", normals, normals))
        if np.linalg.norm(summed) < CLOSED_SHARE * double_area.sum():
            # closed: no rim, normals summing to ~0, and a fill's large flat faces pulling the skew the wrong way
            # (27 of 29 fan-closed scans). Its flat side's normals all point away from the crowns while theirs
            # spread, so the area-weighted third moment along z is negative with the crowns at +z (29 of 29;
            # wound outward, as infer.orient_faces makes it; docs/results/hole_fill)
            nz = (normals @ z) / np.maximum(double_area, 1e-300)
            return 1.0 if double_area @ nz ** 3 <= 0 else -1.0
        votes.append(np.sign(summed @ z))
        rim = _boundary_vertices(faces, len(x))
        if len(rim):
            votes.append(-np.sign(h[rim].mean() - w @ h))
    total = float(np.sum(votes))
    return 1.0 if total >= 0 else -1.0


def _subsample(n: int) -> np.ndarray:
    return np.linspace(0, n - 1, min(n, _MAX_FIT_POINTS)).astype(np.int64)


def _parabola_fits(p2: np.ndarray, w: np.ndarray, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least-squares ``v = a u^2 + b u + c`` in frames rotated by each theta (all at once):
    residuals (T,) and curvatures a (T,)."""
    c, s = np.cos(thetas)[:, None], np.sin(thetas)[:, None]
    u = p2[None, :, 0] * c + p2[None, :, 1] * s  # (T, N)
    v = -p2[None, :, 0] * s + p2[None, :, 1] * c
    u2 = u * u
    m0, m1, m2, m3, m4 = w.sum(), u @ w, u2 @ w, (u2 * u) @ w, (u2 * u2) @ w  # weighted moments
    gram = np.stack([np.stack([m4, m3, m2], -1), np.stack([m3, m2, m1], -1),
                     np.stack([m2, m1, np.full_like(m1, m0)], -1)], -2)  # (T, 3, 3)
    rhs = np.stack([(u2 * v) @ w, (u * v) @ w, v @ w], -1)  # (T, 3)
    coef = np.linalg.solve(gram + 1e-12 * np.eye(3), rhs[..., None])[..., 0]
    resid = (v * v) @ w - (coef * rhs).sum(-1)
    return resid, coef[:, 0]


def _parabola_front(p2: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Unit 2-D direction from the arch opening towards the front (the closed end of the U)."""
    grid = np.radians(np.arange(0.0, 180.0, 2.0))
    resid, _ = _parabola_fits(p2, w, grid)
    fine = grid[np.argmin(resid)] + np.radians(np.arange(-2.0, 2.01, 0.25))
    resid, curv = _parabola_fits(p2, w, fine)
    k = int(np.argmin(resid))
    axis = np.array([-np.sin(fine[k]), np.cos(fine[k])])  # the fitted parabola's symmetry axis
    return -axis * (1.0 if curv[k] >= 0 else -1.0)  # it opens towards +axis when a > 0


def canonical_pose(vertices: np.ndarray, faces: np.ndarray | None = None,
                   labels: np.ndarray | None = None) -> np.ndarray:
    """4x4 float64 transform T with ``aligned = vertices @ T[:3, :3].T + T[:3, 3]`` in the canonical
    frame: centred, crowns towards +z, arch opening towards -y, x = y x z (a rotation: no mirroring).

    ``faces`` (recommended) give area weights and two of the three crown-side cues; ``labels`` (FDI per
    vertex), when given, decide the crown side and the front by the teeth. See the module docstring.
    """
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
        raise ValueError(f"canonical_pose: need (V >= 4, 3) vertices, got {v.shape}")
    faces = None if faces is None else np.asarray(faces)
    w = _weights(v, faces)
    centre, z, axes = _smallest_axis(v, w)
    x = v - centre
    labels = None if labels is None else np.asarray(labels)
    teeth = labels > 0 if labels is not None else None
    if teeth is not None and teeth.any() and (~teeth).any():
        sign = np.sign((x[teeth].mean(0) - x[~teeth].mean(0)) @ z) or 1.0
    else:
        sign = _crown_sign_geometry(x, faces, w, z)
    z = z * sign
    idx = _subsample(len(v))
    for _ in range(3):  # refine: the plane through the crowns (upper half of the surface)
        h = x[idx] @ z
        top = idx[h > np.median(h)]
        _, z_new, _ = _smallest_axis(x[top], w[top])
        z = z_new * (1.0 if z_new @ z >= 0 else -1.0)
    # in-plane basis from the principal axes, then the arch direction
    e1 = axes[:, 2] - (axes[:, 2] @ z) * z
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(z, e1)
    h = x[idx] @ z
    top = idx[h > np.median(h)]
    p2 = np.stack([x[top] @ e1, x[top] @ e2], 1)
    f2 = _parabola_front(p2, w[top] / w[top].sum())
    y = f2[0] * e1 + f2[1] * e2
    if teeth is not None and teeth.any():
        incisors = teeth & np.isin(labels % 10, (1, 2))
        if incisors.any() and (x[incisors].mean(0) - x[teeth].mean(0)) @ y < 0:
            y = -y
    y = y - (y @ z) * z
    y /= np.linalg.norm(y)
    xa = np.cross(y, z)
    rot = np.stack([xa, y, z], 0)
    transform = np.eye(4)
    transform[:3, :3] = rot
    transform[:3, 3] = -rot @ centre
    return transform


# ------------------------------------------------------------------------------ measuring alignment
def occlusal_axis_from_labels(vertices: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Reference occlusal axis: normal of the plane through the tooth centroids, signed to the crowns."""
    v = np.asarray(vertices, dtype=np.float64)
    teeth = [t for t in np.unique(labels) if t > 0]
    if len(teeth) < 3:
        raise ValueError("occlusal_axis_from_labels: needs at least 3 labelled teeth")
    cents = np.stack([v[labels == t].mean(0) for t in teeth])
    _, _, vt = np.linalg.svd(cents - cents.mean(0))
    n = vt[2]
    crown = v[labels > 0].mean(0) - v[labels == 0].mean(0) if (labels == 0).any() else n
    return n if n @ crown >= 0 else -n


def arch_front_from_labels(vertices: np.ndarray, labels: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Reference front direction in the plane normal to ``z``: perpendicular to the mean left-right
    vector of matching tooth pairs (1p-2p, 4p-3p), signed towards the incisors."""
    v = np.asarray(vertices, dtype=np.float64)
    z = z / np.linalg.norm(z)
    lateral = []
    for p in range(1, 9):
        for qa, qb in ((1, 2), (4, 3)):
            a, b = labels == qa * 10 + p, labels == qb * 10 + p
            if a.any() and b.any():
                d = v[b].mean(0) - v[a].mean(0)
                d -= (d @ z) * z
                lateral.append(d / np.linalg.norm(d))
    if not lateral:
        raise ValueError("arch_front_from_labels: no tooth present on both sides")
    lat = np.mean(lateral, 0)
    front = np.cross(z, lat)
    front /= np.linalg.norm(front)
    teeth = labels > 0
    incisors = teeth & np.isin(labels % 10, (1, 2))
    if incisors.any() and (v[incisors].mean(0) - v[teeth].mean(0)) @ front < 0:
        front = -front
    return front


def alignment_errors(vertices: np.ndarray, faces: np.ndarray | None, labels: np.ndarray,
                     use_labels: bool = False, transform: np.ndarray | None = None) -> tuple[float, float]:
    """Angles in degrees after :func:`canonical_pose` (labels used only if ``use_labels``; or after a
    given ``transform``): (reference occlusal axis vs +z, reference arch front vs +y)."""
    t = transform if transform is not None else canonical_pose(vertices, faces, labels if use_labels else None)
    aligned = apply_transform(np.asarray(vertices, dtype=np.float64), t)
    z = occlusal_axis_from_labels(aligned, labels)
    front = arch_front_from_labels(aligned, labels, np.array([0.0, 0.0, 1.0]))
    occl = np.degrees(np.arccos(np.clip(z[2], -1.0, 1.0)))
    arch = np.degrees(np.arccos(np.clip(front[1], -1.0, 1.0)))
    return float(occl), float(arch)
