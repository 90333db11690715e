"""A jaw model's base: the walls and the flat plate that a scan exported as a model stands on (lab scanners and
orthodontic software put the arch on a base whose bottom is one flat plane).

Why it matters: the plate closes the scan's open rim, and the canonical pose (:mod:`.pose`) tells the crowns'
side from that rim, the surface's normals and its mass. With the plate, the pose turned the scan upside down on
4 of 29 shared scans given a synthetic base, and those came out with no tooth found (mIoU 0.03-0.04). Left in,
the walls' area moved the pose's centre 4-5 mm towards the back, and the network read the gingiva behind the last
molar as a third molar on 2 of the 29. So the plate is found here, and with it the walls standing on it (an
extruded or tapered base's: the faces reached from the plate's edge at the wall's own angle to the plate); both
are left out of the segmentation and their own vertices are gingiva (docs/results/model_base).

What counts as a plate: the faces of one plane (normals within :data:`NORMAL_DEG` of one direction, centres
within :data:`OFFSET_MM` of one plane) whose area is at least :data:`MIN_AREA_MM2` and :data:`MIN_SHARE` of the
scan's. An intraoral scan holds no such patch: none of the 187 shared scans or the 3 samples has one (the largest
coplanar patch there is 79.5 mm^2, a flat trim: ``docs/results/model_base/no_plate.txt``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mesh import face_normals

NORMAL_DEG = 1.0  # faces of one plate: normals within this of the plate's
OFFSET_MM = 0.05  # ... and centres within this of its plane
MIN_AREA_MM2 = 100.0  # a plate at least this large (a model's base: about 1500-4000 mm^2)
MIN_SHARE = 0.05  # ... and at least this share of the scan's area
_BIN_DEG = 2.0  # the first search: normals in bins of this (then refined around the fullest bin)
WALL_DEG = 2.0  # a wall's faces: at the wall's own angle to the plate's normal within this
_FIRST_LOOK_FACES = 4000  # faces of the first look (every k-th face) that rules a plate out


@dataclass(frozen=True)
class ModelBase:
    """A model's base: ``faces`` (F,) bool, the faces left out (its flat plate and the walls standing on it);
    ``plate`` (F,) bool, the plate's alone; ``vertices`` (V,) bool, the vertices that only those faces use (gingiva);
    ``area_mm2`` the plate's area; ``normal`` (3,) its unit normal, as its faces are wound."""

    faces: np.ndarray
    plate: np.ndarray
    vertices: np.ndarray
    area_mm2: float
    normal: np.ndarray


def _fullest_direction(points: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(unit face normals (F, 3), twice the faces' areas (F,), the unit direction (3,) whose bin of _BIN_DEG
    holds the most area (n and -n alike: a plate's faces may be wound either way), that bin's area)."""
    fn = face_normals(points, faces)
    twice = np.linalg.norm(fn, axis=1)
    real = twice > 0
    unit = np.zeros_like(fn)
    unit[real] = fn[real] / twice[real, None]
    half = np.where((unit[:, 2] < 0)[:, None], -unit, unit)
    theta = np.degrees(np.arccos(np.clip(half[:, 2], 0.0, 1.0)))
    phi = np.degrees(np.arctan2(half[:, 1], half[:, 0])) + 180.0
    key = np.where(real, np.floor(theta / _BIN_DEG) * 1000 + np.floor(phi / _BIN_DEG), -1).astype(np.int64)
    bins, which = np.unique(key, return_inverse=True)
    which = which.reshape(-1)
    area = np.bincount(which, weights=twice) * (bins >= 0)
    fullest = which == int(area.argmax())
    direction = (half[fullest] * twice[fullest, None]).sum(0)
    return unit, twice, direction / max(np.linalg.norm(direction), 1e-300), 0.5 * float(area.max())


def find_model_base(vertices: np.ndarray, faces: np.ndarray) -> ModelBase | None:
    """The flat plate of a model's base in a mesh (coordinates in mm), or None (see the module doc)."""
    faces = np.asarray(faces, dtype=np.int64)
    points = np.asarray(vertices, dtype=np.float64)
    if len(faces) == 0:
        return None
    # a look at every k-th face first: a scan with no plate costs a few ms, not a pass over 400k faces
    step = max(1, len(faces) // _FIRST_LOOK_FACES)
    if step > 1:
        _, twice, _, bin_area = _fullest_direction(points, faces[::step])
        if bin_area * step < max(MIN_AREA_MM2, MIN_SHARE * 0.5 * float(twice.sum()) * step) / 4:
            return None
    unit, twice, normal, bin_area = _fullest_direction(points, faces)
    need = max(MIN_AREA_MM2, MIN_SHARE * 0.5 * float(twice.sum()))
    if bin_area < need / 2:  # a plate split across two bins holds half its area in one at least
        return None
    aligned = np.abs(unit @ normal) >= np.cos(np.radians(NORMAL_DEG))
    if 0.5 * twice[aligned].sum() < need:
        return None
    # the plane: the offset band of OFFSET_MM holding the most of the aligned faces' area
    offset = points[faces].mean(1) @ normal
    band = np.floor(offset[aligned] / OFFSET_MM).astype(np.int64)
    _, of = np.unique(band, return_inverse=True)
    of = of.reshape(-1)
    best = of == int(np.bincount(of, weights=twice[aligned]).argmax())
    plane = float(np.average(offset[aligned][best], weights=twice[aligned][best]))
    plate = aligned & (np.abs(offset - plane) <= OFFSET_MM)
    area = 0.5 * float(twice[plate].sum())
    if area < need:
        return None
    base = plate | _walls(faces, len(points), unit, plate, normal)
    only = np.zeros(len(points), dtype=bool)
    only[faces[base].reshape(-1)] = True
    only[faces[~base].reshape(-1)] = False
    if (unit[plate] @ normal * twice[plate]).sum() < 0:
        normal = -normal
    return ModelBase(faces=base, plate=plate, vertices=only, area_mm2=area, normal=normal)


def _walls(faces: np.ndarray, num_vertices: int, unit: np.ndarray, plate: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """(F,) bool: the walls standing on the plate, the faces reached from the plate's edge over faces whose angle
    to the plate's normal is the wall's own (the median of the faces along the plate's edge) within
    :data:`WALL_DEG`."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(faces)
    half = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    key = np.sort(half, 1) @ np.array([num_vertices, 1], dtype=np.int64)
    owner = np.tile(np.arange(n), 3)[np.argsort(key, kind="stable")]
    key = np.sort(key)
    shared = key[1:] == key[:-1]
    a, b = owner[:-1][shared], owner[1:][shared]  # faces that share an edge
    seed = np.zeros(n, dtype=bool)
    seed[b[plate[a] & ~plate[b]]] = True
    seed[a[plate[b] & ~plate[a]]] = True
    if not seed.any():
        return np.zeros(n, dtype=bool)
    angle = np.degrees(np.arccos(np.clip(np.abs(unit @ normal), 0.0, 1.0)))  # 90: a wall straight up from the plate
    wall = ~plate & (np.abs(angle - np.median(angle[seed])) <= WALL_DEG)
    keep = wall[a] & wall[b]
    graph = coo_matrix((np.ones(int(keep.sum())), (a[keep], b[keep])), shape=(n, n))
    _, part = connected_components(graph, directed=False)
    return wall & np.isin(part, part[seed & wall])
