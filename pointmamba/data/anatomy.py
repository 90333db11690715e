"""Anatomical side check: do the labels put quadrants 2 and 3 on the patient's left? From geometry alone.

Mirrored labels (left and right swapped) look like perfectly good labels to every other check; the
shared lower jaws carried them for months. The geometry decides instead:

* crown direction: from the gingiva's centroid to the teeth's, giving the sign of the occlusal-plane
  normal (the plane through the tooth centroids). Crowns point up (superior) in a lower jaw and down
  in an upper jaw.
* front: from the posterior teeth (premolars, molars) to the anterior ones (incisors, canines), in the
  occlusal plane; it uses only the tooth position digit, which mirroring does not change.
* in a right-handed frame the patient's left is ``superior x anterior``. Quadrants 2 (upper left) and
  3 (lower left) must lie on that side of quadrants 1 and 4.

A geometrically mirrored mesh (a left-handed export) fails the same way: the labels then disagree
with the anatomy, which is what a model trained on it would learn.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEFT_QUADRANTS = {"upper": 2, "lower": 3}
RIGHT_QUADRANTS = {"upper": 1, "lower": 4}

MIN_SEPARATION = 0.5
"""|cosine| between the left-minus-right tooth direction and the patient's left axis below which the
check gives no verdict (the two sides are not apart across the arch)."""


@dataclass
class SideCheck:
    """``verdict``: "ok", "mirrored" or "unsure"; ``score``: cosine between the direction from the
    right-side teeth to the left-side teeth and the patient's left (+1 ideal, -1 mirrored);
    ``reason`` explains "unsure"."""

    verdict: str
    score: float = float("nan")
    reason: str = ""

    @property
    def mirrored(self) -> bool:
        return self.verdict == "mirrored"


def _in_plane(vector: np.ndarray, normal: np.ndarray) -> np.ndarray | None:
    """The unit direction of ``vector`` projected on the plane of unit ``normal`` (None where nothing is left)."""
    vector = vector - (vector @ normal) * normal
    length = np.linalg.norm(vector)
    return None if length == 0 else vector / length


def side_check(vertices: np.ndarray, labels: np.ndarray, jaw: str) -> SideCheck:
    """Check that quadrants 2/3 lie on the patient's left (see the module docstring)."""
    v = np.asarray(vertices, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if jaw not in LEFT_QUADRANTS:
        return SideCheck("unsure", reason=f"jaw {jaw!r} unknown")
    teeth = labels > 0
    if not teeth.any() or teeth.all():
        return SideCheck("unsure", reason="needs both teeth and gingiva")
    fdis = [int(t) for t in np.unique(labels[teeth])]
    cents = np.stack([v[labels == t].mean(0) for t in fdis])
    pos = np.array([t % 10 for t in fdis])
    quad = np.array([t // 10 for t in fdis])
    if len(fdis) < 3:
        return SideCheck("unsure", reason=f"only {len(fdis)} teeth")
    # occlusal normal: plane through the tooth centroids, signed towards the crowns
    _, _, vt = np.linalg.svd(cents - cents.mean(0))
    normal = vt[2]
    if (v[teeth].mean(0) - v[~teeth].mean(0)) @ normal < 0:
        normal = -normal
    anterior, posterior = pos <= 3, pos >= 4
    if not anterior.any() or not posterior.any():
        return SideCheck("unsure", reason="needs anterior (incisor/canine) and posterior (premolar/molar) teeth")
    front = _in_plane(cents[anterior].mean(0) - cents[posterior].mean(0), normal)
    if front is None:
        return SideCheck("unsure", reason="anterior and posterior teeth coincide")
    superior = normal if jaw == "lower" else -normal  # upper crowns point down
    left = np.cross(superior, front)
    on_left, on_right = quad == LEFT_QUADRANTS[jaw], quad == RIGHT_QUADRANTS[jaw]
    if not on_left.any() or not on_right.any():
        return SideCheck("unsure", reason="teeth of only one side")
    across = _in_plane(cents[on_left].mean(0) - cents[on_right].mean(0), normal)
    if across is None:
        return SideCheck("unsure", reason="left and right teeth coincide")
    score = float(across @ left)
    if score >= MIN_SEPARATION:
        return SideCheck("ok", score)
    if score <= -MIN_SEPARATION:
        left_q, right_q = LEFT_QUADRANTS[jaw], RIGHT_QUADRANTS[jaw]
        return SideCheck("mirrored", score, f"quadrant {left_q} lies on the patient's right and {right_q} on the "
                                            "left: left/right swapped (labels or mesh mirrored)")
    return SideCheck("unsure", score, "left and right teeth are not apart across the arch")
