"""Missing-tooth augmentation: training arches that lose whole teeth, so the network numbers teeth by
what they are instead of counting them from the midline.

Most training arches are complete, so a per-point classifier can learn "the seventh tooth from the
midline is 37": it then calls a first molar 37 when the second molars are missing, and every tooth
behind a gap one number short. Removing random teeth from identity-labelled arches breaks that shortcut.
A removed tooth is

* **flattened**: its crown points are lowered onto the gingiva around it (height and normal
  interpolated from the nearest gingiva vertices, seen from above, a little lower as a healed ridge
  is) and labelled gingiva, as a healed gap looks;
* **deleted**: its points are dropped, as a scan with a hole (a tooth cut out in software) looks.

:func:`close_space` closes a removed tooth's space (the removal check's ``close`` mode).

With probability ``edentulous`` an arch loses all but 0-3 of its teeth (a nearly edentulous arch must
come back with no teeth or the few it has, not with teeth invented along the ridge).

Only for labels that are tooth identities: on an arch labelled by position along the arch, a removed
tooth would leave the numbers behind it wrong (see ``data.position_label_roots``).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .augment import rotation_about
from .mesh import rotate

DEFAULT_MISSING_TEETH: dict[str, Any] = {
    "p": 0.5,  # probability that a training arch loses teeth
    "max_teeth": 3,  # it loses 1..max_teeth teeth (uniform), never all of them
    "flatten": 0.7,  # probability that a removed tooth is flattened to gingiva (else its points are deleted)
    "edentulous": 0.03,  # probability that an arch keeps only 0-3 of its teeth (all flattened)
    "ridge_drop_mm": 1.0,  # a flattened tooth sits up to this much below the gingiva around it (uniform)
    "neighbours": 8,  # gingiva vertices interpolated per flattened point
}


class MissingTeeth:
    """``MissingTeeth(config)(coord, normal, labels, rng) -> (coord, normal, labels)``.

    ``coord`` (N, 3) in the canonical frame (crowns towards +z), ``labels`` FDI numbers (0 gingiva).
    Keys as in :data:`DEFAULT_MISSING_TEETH` (missing keys take the defaults; unknown keys are an error).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        config = dict(config or {})
        unknown = set(config) - set(DEFAULT_MISSING_TEETH)
        if unknown:
            raise ValueError(f"MissingTeeth: unknown key(s) {sorted(unknown)}; valid: {sorted(DEFAULT_MISSING_TEETH)}")
        c = {**DEFAULT_MISSING_TEETH, **config}
        for key in ("p", "flatten", "edentulous"):
            if not 0.0 <= float(c[key]) <= 1.0:
                raise ValueError(f"MissingTeeth: {key} is a probability in [0, 1], got {c[key]!r}")
        if int(c["max_teeth"]) < 1 or int(c["neighbours"]) < 1:
            raise ValueError(f"MissingTeeth: max_teeth and neighbours must be >= 1, got {c['max_teeth']}, "
                             f"{c['neighbours']}")
        if not 0.0 <= float(c["ridge_drop_mm"]) <= 10.0:
            raise ValueError(f"MissingTeeth: ridge_drop_mm must be in [0, 10], got {c['ridge_drop_mm']!r}")
        self.p, self.max_teeth, self.flatten = float(c["p"]), int(c["max_teeth"]), float(c["flatten"])
        self.edentulous, self.ridge_drop = float(c["edentulous"]), float(c["ridge_drop_mm"])
        self.neighbours = int(c["neighbours"])

    def choose(self, teeth: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(teeth to remove, whether each is flattened) for an arch holding ``teeth`` (FDI numbers)."""
        none = np.zeros(0, dtype=teeth.dtype)
        if len(teeth) == 0:
            return none, np.zeros(0, dtype=bool)
        if rng.random() < self.edentulous:
            keep = int(rng.integers(0, min(3, len(teeth)) + 1))
            removed = rng.permutation(teeth)[: len(teeth) - keep]
            return np.sort(removed), np.ones(len(removed), dtype=bool)
        if rng.random() >= self.p or len(teeth) < 2:
            return none, np.zeros(0, dtype=bool)
        count = int(rng.integers(1, min(self.max_teeth, len(teeth) - 1) + 1))
        removed = np.sort(rng.choice(teeth, size=count, replace=False))
        return removed, rng.random(count) < self.flatten

    def __call__(self, coord: np.ndarray, normal: np.ndarray, labels: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        teeth = np.unique(labels[labels > 0])
        removed, flat = self.choose(teeth, rng)
        if len(removed) == 0:
            return coord, normal, labels
        coord, normal, labels = coord.copy(), normal.copy(), labels.copy()
        gone = np.isin(labels, removed[flat])
        if gone.any():
            coord[gone], normal[gone] = self._flattened(coord, normal, labels, gone, rng)
        keep = ~np.isin(labels, removed[~flat])
        labels[gone] = 0
        return coord[keep], normal[keep], labels[keep]

    def _flattened(self, coord: np.ndarray, normal: np.ndarray, labels: np.ndarray, gone: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """New coordinates and normals of the ``gone`` points: lowered onto the gingiva seen from above."""
        from scipy.spatial import cKDTree

        gum = np.flatnonzero(labels == 0)
        points = coord[gone].astype(np.float64)
        if len(gum) == 0:  # no gingiva in the scan: drop the crowns to the lowest tooth level
            z = np.full(len(points), coord[:, 2].min())
            n = np.tile([0.0, 0.0, 1.0], (len(points), 1))
        else:
            k = min(self.neighbours, len(gum))
            dist, idx = cKDTree(coord[gum, :2]).query(points[:, :2], k=k)
            dist, idx = dist.reshape(len(points), k), idx.reshape(len(points), k)
            w = 1.0 / np.maximum(dist, 0.05) ** 2
            w /= w.sum(1, keepdims=True)
            z = (w * coord[gum[idx], 2]).sum(1)
            n = (w[:, :, None] * normal[gum[idx]]).sum(1)
            n[:, 2] = np.abs(n[:, 2]) + 0.5  # a ridge faces up: buccal and lingual normals average to +z
            n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
        # one drop per removed tooth (a ridge sits below the gum line around it), same for all its points
        teeth, which = np.unique(labels[gone], return_inverse=True)
        drop = rng.uniform(0.0, self.ridge_drop, size=len(teeth))[which]
        points[:, 2] = z - drop
        return points.astype(coord.dtype), n.astype(normal.dtype)


def close_space(coord: np.ndarray, normal: np.ndarray, labels: np.ndarray, tooth: int,
                fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tooth``'s space closed by ``fraction`` of its width: (coord, normal, points kept). A wedge
    from the tooth's front edge, ``fraction`` of its angular width, loses its gingiva and the tooth's
    own (flattened) points; the teeth around it keep every point. Everything behind the wedge on that
    side (and the teeth behind the gap, whole) turns forward about the vertical axis through the
    origin by the wedge's angle, so the wedge's two edges meet. ``labels`` still name the tooth."""
    at = labels == tooth
    side = 1.0 if coord[at, 0].mean() >= 0 else -1.0
    angle = np.arctan2(side * coord[:, 0], coord[:, 1])  # 0 at the front (+y), growing towards the back
    start, end = np.percentile(angle[at], [2.0, 98.0])
    cut = float(end - start) * fraction
    centre = np.median(angle[at])
    others = np.unique(labels[(labels > 0) & ~at])
    behind = np.isin(labels, [t for t in others if np.median(angle[labels == t]) > centre])
    in_front = (labels > 0) & ~at & ~behind
    keep = ~(((labels == 0) | at) & (angle >= start) & (angle <= start + cut))
    turn = behind | ((angle > start + cut) & ~in_front)
    rotation = rotation_about([0.0, 0.0, 1.0], side * cut)
    coord, normal = coord.copy(), normal.copy()
    coord[turn] = rotate(coord[turn], rotation)
    normal[turn] = rotate(normal[turn], rotation)
    return coord, normal, keep


def arch_is_complete(labels: np.ndarray, jaw: str | None) -> bool:
    """Whether an arch holds positions 1..7 on both sides (its position labels are then identities)."""
    if jaw not in ("upper", "lower"):
        return False
    quadrants = (1, 2) if jaw == "upper" else (3, 4)
    present = set(np.unique(labels).tolist())
    return all(10 * q + p in present for q in quadrants for p in range(1, 8))
