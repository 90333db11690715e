"""Training augmentations of a jaw scan: rotation, scale, mirror (with left/right label swap), jitter.

Every random choice takes a ``numpy.random.Generator`` so that a run is reproducible. Coordinates are
(N, 3) in the canonical frame (see :mod:`pointmamba.data.pose`); normals are rotated with them.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .fdi import mirror_fdi
from .mesh import rotate

ROTATION_MODES = ("z", "so3")

DEFAULT_AUGMENT: dict[str, Any] = {
    "rotate": "z",        # "z": about the occlusal axis plus a small tilt; "so3": any rotation; None: off
    "max_z_deg": 30.0,    # canonical alignment leaves up to ~23 deg of arch direction error on real scans
    "max_tilt_deg": 5.0,  # ... and up to ~3 deg of occlusal axis error
    "scale": (0.9, 1.1),  # isotropic factor range; None: off
    "anisotropic": False,
    "mirror": 0.5,        # probability of a mirror across the sagittal plane x = 0, with label swap
    "jitter": 0.01,       # Gaussian sigma in mm (scans are in mm); 0: off
    "jitter_clip": 0.05,
}
"""A sensible training augmentation for aligned scans; pass ``augment=DEFAULT_AUGMENT`` (or a modified
copy) to the dataset. Unaligned scans need ``"rotate": "so3"``."""


def rotation_about(axis: np.ndarray, angle: float) -> np.ndarray:
    """3x3 rotation by ``angle`` radians about ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def random_rotation(rng: np.random.Generator, mode: str = "z", max_z_deg: float = 180.0,
                    max_tilt_deg: float = 0.0) -> np.ndarray:
    """A random 3x3 rotation.

    ``"z"``: uniform angle in [-max_z_deg, max_z_deg] about +z, then a tilt of uniform angle in
    [0, max_tilt_deg] about a uniformly random horizontal axis. ``"so3"``: uniform over all rotations.
    """
    if mode == "so3":
        q = rng.standard_normal(4)
        q /= np.linalg.norm(q)
        w, x, y, z = q
        return np.array([
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ])
    if mode != "z":
        raise ValueError(f"random_rotation: mode must be one of {ROTATION_MODES}, got {mode!r}")
    rz = rotation_about([0, 0, 1], np.radians(rng.uniform(-max_z_deg, max_z_deg)))
    phi = rng.uniform(0, 2 * np.pi)
    tilt = rotation_about([np.cos(phi), np.sin(phi), 0.0], np.radians(rng.uniform(0, max_tilt_deg)))
    return tilt @ rz


def mirror(coord: np.ndarray, normal: np.ndarray | None = None, labels: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Reflect across the plane x = 0 (sagittal after canonical alignment) and swap FDI left/right.

    Any reflection turns a jaw into its mirror image, whose teeth are those of the other side, so the
    label swap (1x <-> 2x, 3x <-> 4x) is right whatever the pose. Normals are reflected too.
    """
    flip = np.array([-1.0, 1.0, 1.0], dtype=coord.dtype)
    coord = coord * flip
    if normal is not None:
        normal = normal * flip.astype(normal.dtype)
    if labels is not None:
        labels = mirror_fdi(labels)
    return coord, normal, labels


def jitter(coord: np.ndarray, rng: np.random.Generator, sigma: float, clip: float | None = None) -> np.ndarray:
    """Add Gaussian noise of ``sigma`` (clipped to +-``clip``) to every coordinate."""
    noise = rng.standard_normal(coord.shape) * sigma
    if clip is not None:
        noise = np.clip(noise, -clip, clip)
    return coord + noise.astype(coord.dtype)


class Augment:
    """A training augmentation built from a dict (keys as in :data:`DEFAULT_AUGMENT`; missing keys are
    off, unknown keys are an error). Applies mirror, rotation, scale, jitter in this order.

    ``aug(coord, normal, labels, rng) -> (coord, normal, labels)``; labels are FDI numbers (or None).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        unknown = set(config) - set(DEFAULT_AUGMENT)
        if unknown:
            raise ValueError(f"Augment: unknown key(s) {sorted(unknown)}; valid: {sorted(DEFAULT_AUGMENT)}")
        self.rotate = config.get("rotate")
        if self.rotate not in (None, *ROTATION_MODES):
            raise ValueError(f"Augment: rotate must be None or one of {ROTATION_MODES}, got {self.rotate!r}")
        self.max_z_deg = float(config.get("max_z_deg", 180.0))
        self.max_tilt_deg = float(config.get("max_tilt_deg", 0.0))
        scale = config.get("scale")
        if scale is not None:
            scale = tuple(float(s) for s in scale)
            if len(scale) != 2 or not 0 < scale[0] <= scale[1]:
                raise ValueError(f"Augment: scale must be (low, high) with 0 < low <= high, got {scale}")
        self.scale = scale
        self.anisotropic = bool(config.get("anisotropic", False))
        self.mirror = float(config.get("mirror", 0.0))
        if not 0.0 <= self.mirror <= 1.0:
            raise ValueError(f"Augment: mirror is a probability in [0, 1], got {self.mirror}")
        self.jitter = float(config.get("jitter", 0.0))
        self.jitter_clip = config.get("jitter_clip")

    def __call__(self, coord: np.ndarray, normal: np.ndarray | None, labels: np.ndarray | None,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        # Draw every random number whether or not a step is on, so changing one option does not shift
        # the random stream of the others.
        do_mirror = rng.random() < self.mirror
        rot = random_rotation(rng, self.rotate or "z", self.max_z_deg, self.max_tilt_deg)
        factors = rng.uniform(*(self.scale or (1.0, 1.0)), size=3)
        if do_mirror:
            coord, normal, labels = mirror(coord, normal, labels)
        if self.rotate is not None:
            coord = rotate(coord, rot)
            if normal is not None:
                normal = rotate(normal, rot)
        if self.scale is not None:
            factors = factors if self.anisotropic else np.full(3, factors[0])
            coord = coord * factors.astype(coord.dtype)
            if normal is not None and self.anisotropic:  # normals transform with the inverse transpose
                normal = normal / factors.astype(normal.dtype)
                normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
        if self.jitter > 0:
            coord = jitter(coord, rng, self.jitter, self.jitter_clip)
        return coord, normal, labels
