"""The dental arch: tooth positions along it, the frame it is measured in, and teeth measured along it.

Three ways to name a place on one jaw's arch, and the conversions between them (written once, here):

* **FDI number** ``q p``: quadrant ``q`` (1 upper right, 2 upper left, 3 lower left, 4 lower right) and
  position ``p`` 1..8 (central incisor .. third molar);
* **arch index** 0..15 along the arch in the canonical frame (crowns +z, incisors +y): the -x side's third
  molar is 0, its central incisor 7, the +x side's central incisor 8, its third molar 15. Quadrants 1 and 3
  lie on -x (a crowns-up upper jaw is seen from below, so its right side is on -x), 2 and 4 on +x;
* **side position** -8..-1, 1..8: the patient's right side negative, the left positive (the order of the
  review's tooth list, right to left for both jaws).

Teeth are measured along the arch as the numbering, its priors and the review checks need it: an
:class:`ArchFrame` (angles around a point inside the arch), each tooth an :class:`Instance` with its place
and mesio-distal width (:func:`measure_instances`), and the space between two teeth (:func:`gap_mm`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

NUM_POSITIONS = 8  # per side: central incisor .. third molar
NUM_ARCH_INDICES = 2 * NUM_POSITIONS  # along the whole arch
MINUS_X_QUADRANTS = (1, 3)  # quadrants on the canonical frame's -x side (arch indices 0..7)
RIGHT_QUADRANTS = (1, 4)  # the patient's right


def position_of_index(a: np.ndarray | int) -> np.ndarray | int:
    """Tooth position 1..8 (central incisor .. third molar) of arch index ``a`` (0..15)."""
    a = np.asarray(a)
    out = np.where(a < NUM_POSITIONS, NUM_POSITIONS - a, a - (NUM_POSITIONS - 1))
    return int(out) if out.ndim == 0 else out


def index_of_fdi(fdi: int) -> int:
    """Arch index 0..15 of FDI number ``fdi`` (either jaw)."""
    quadrant, position = divmod(int(fdi), 10)
    return NUM_POSITIONS - position if quadrant in MINUS_X_QUADRANTS else NUM_POSITIONS - 1 + position


def fdi_of_index(a: int, jaw: str) -> int:
    """FDI number at arch index ``a`` (0..15) of ``jaw`` ("upper" or "lower")."""
    minus_x, plus_x = (1, 2) if jaw == "upper" else (3, 4)
    return (minus_x if a < NUM_POSITIONS else plus_x) * 10 + position_of_index(a)


def per_index(per_position: Iterable[float]) -> np.ndarray:
    """A value per position 1..8 (pooled over the sides) spread to arch indices 0..15."""
    v = np.asarray(list(per_position), dtype=np.float64)
    return np.concatenate([v[::-1], v])


def side_position(fdi: int) -> int:
    """Position with the patient's side as sign: -8..-1 on the right (quadrants 1, 4), 1..8 on the left."""
    quadrant, position = divmod(int(fdi), 10)
    return -position if quadrant in RIGHT_QUADRANTS else position


def skipped_between(a: int, b: int) -> list[int]:
    """The FDI numbers between neighbours ``a`` and ``b`` of one jaw (``a`` to the patient's right of ``b``)."""
    right, left = (1, 2) if a < 30 else (4, 3)
    return [(right if i < 0 else left) * 10 + abs(i) for i in range(side_position(a) + 1, side_position(b)) if i != 0]


def side_classes(num_classes: int, jaw: str | None) -> list[np.ndarray]:
    """Class ids of positions 1..8 on the two sides, [-x side, +x side] in the canonical frame: a 17-class
    model numbers one jaw (1..8 then 9..16), a 33-class model the upper (1..16) and lower (17..32) jaws."""
    if num_classes == 17:
        return [np.arange(1, 9), np.arange(9, 17)]
    if jaw == "lower":
        return [np.arange(17, 25), np.arange(25, 33)]
    return [np.arange(1, 9), np.arange(9, 17)]


def index_classes(num_classes: int, jaw: str | None) -> np.ndarray:
    """The class id at each arch index 0..15."""
    minus_x, plus_x = side_classes(num_classes, jaw)
    return np.concatenate([minus_x[::-1], plus_x])


# Typical mesio-distal crown widths in mm, positions 1..8 (central incisor .. third molar); textbook means
# (e.g. Wheeler's dental anatomy). The review's width checks were calibrated on these (docs/results/confidence);
# the numbering's priors use the widths measured on the training scans (inference/arch_priors.py FITTED).
TEXTBOOK_WIDTH_MM = {
    "upper": np.array([8.5, 6.5, 7.5, 7.0, 6.5, 10.0, 9.0, 8.5]),
    "lower": np.array([5.0, 5.5, 7.0, 7.0, 7.0, 11.0, 10.5, 10.0]),
}


@dataclass
class ArchFrame:
    """Angles around a point inside the arch: 0 at the incisors (+y), negative towards -x (degrees)."""

    centre: np.ndarray

    @classmethod
    def from_teeth(cls, xy: np.ndarray) -> "ArchFrame":
        """The point inside the arch from tooth vertices (x, y) in the canonical frame."""
        y_lo, y_hi = np.percentile(xy[:, 1], [2, 98])
        return cls(np.array([np.median(xy[:, 0]), y_lo + 0.3 * (y_hi - y_lo)]))

    def polar(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(angle in degrees, radius in mm) of points (x, y)."""
        rel = np.asarray(xy, dtype=np.float64) - self.centre
        return np.degrees(np.arctan2(rel[:, 0], rel[:, 1])), np.linalg.norm(rel, axis=1)


@dataclass
class Instance:
    """One tooth candidate: its vertices and where it sits along the arch."""

    vertices: np.ndarray  # vertex ids
    points: np.ndarray  # (k, 3) their coordinates in the canonical frame
    middle: float  # median angle around the arch frame's centre (deg): the order along the arch
    key: int = 0  # its index in the list it was measured from
    tangent: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0]))  # arch direction here (xy)
    width: float = 0.0  # mesio-distal width in mm: extent along the tangent (5th to 95th percentile)

    def along(self) -> np.ndarray:
        """Each point's coordinate along the arch direction (mm)."""
        return self.points[:, :2] @ self.tangent

    def tree(self) -> "cKDTree":  # noqa: F821 - scipy is imported lazily
        """A KD-tree of its points (built once)."""
        if getattr(self, "_tree", None) is None:
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self.points)
        return self._tree


def measure_instances(aligned: np.ndarray, members: list[np.ndarray], frame: ArchFrame | None = None
                      ) -> tuple[list[Instance], ArchFrame]:
    """Instances from lists of vertex ids, sorted along the arch (-x distal first; ``key`` is the index in
    ``members``), and the arch frame. The arch direction at an instance runs from its predecessor's
    centre to its successor's (its own and one neighbour's at the ends), so a molar at the back of the
    arch is measured along the arch, not across it."""
    if frame is None:
        teeth = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
        frame = ArchFrame.from_teeth(aligned[teeth, :2] if len(teeth) else np.zeros((1, 2)))
    out = []
    for k, ids in enumerate(members):
        ids = np.asarray(ids)
        theta, _ = frame.polar(aligned[ids, :2])
        out.append(Instance(ids, np.asarray(aligned[ids], dtype=np.float64), float(np.median(theta)), k))
    out.sort(key=lambda inst: inst.middle)
    centres = np.array([inst.points[:, :2].mean(0) for inst in out]).reshape(len(out), 2)
    for i, inst in enumerate(out):
        a, b = centres[max(i - 1, 0)], centres[min(i + 1, len(out) - 1)]
        if len(out) == 1:  # alone: the arch runs perpendicular to the radius
            rel = centres[0] - frame.centre
            a, b = np.zeros(2), np.array([rel[1], -rel[0]])
        d = b - a
        inst.tangent = d / max(np.linalg.norm(d), 1e-9)
        lo, hi = np.percentile(inst.along(), [5, 95])
        inst.width = float(hi - lo)
    return out, frame


GAP_QUERY_POINTS = 2000  # points per tooth queried for the spacing: enough for 0.1 mm on a full scan


def labelled_teeth(aligned: np.ndarray, labels: np.ndarray) -> tuple[dict[int, Instance], ArchFrame]:
    """Each tooth that FDI ``labels`` (V,) outline, measured along the arch (FDI number -> its
    :class:`Instance`, in increasing FDI order; {} without teeth), and the arch frame."""
    labels = np.asarray(labels)
    teeth = [int(t) for t in np.unique(labels) if t > 0]
    instances, frame = measure_instances(np.asarray(aligned, dtype=np.float64),
                                         [np.flatnonzero(labels == t) for t in teeth])
    return {teeth[inst.key]: inst for inst in sorted(instances, key=lambda inst: inst.key)}, frame


def gap_mm(a: Instance, b: Instance) -> float:
    """The space between two teeth: the smallest distance between their vertices (mm; about 0 where they
    touch). The larger tooth's KD-tree is kept on it; the smaller is queried at up to
    ``GAP_QUERY_POINTS`` of its vertices. Kept on ``a`` too: the numbering asks again under the other
    jaw's priors and each dentition reading."""
    known = a.__dict__.setdefault("_gaps", {})
    if id(b) in known and known[id(b)][0] is b:
        return known[id(b)][1]
    known[id(b)] = (b, _gap(a, b))
    return known[id(b)][1]


def _gap(a: Instance, b: Instance) -> float:
    small, large = (a, b) if len(a.points) <= len(b.points) else (b, a)
    step = max(1, len(small.points) // GAP_QUERY_POINTS)
    queries = small.points[::step]
    # the query nearest the other tooth's centre bounds the answer: the search then skips every branch
    # farther than it (far teeth took 10 ms a pair without the bound); the minimum found is the same
    probe = queries[np.argmin(((queries - large.points.mean(0)) ** 2).sum(1))]
    bound = float(large.tree().query(probe, k=1)[0])
    return float(large.tree().query(queries, k=1, distance_upper_bound=bound * (1 + 1e-9) + 1e-9)[0].min())


def crown_widths(aligned: np.ndarray, members: list[np.ndarray]) -> list[float]:
    """Each tooth's crown extent across the radius of the arch frame (mm): its vertices projected on the
    direction perpendicular to the radius through their centroid, 2nd to 98th percentile.

    The review's width findings were calibrated with this measure against :data:`TEXTBOOK_WIDTH_MM`
    (docs/results/confidence), and the widths in a prediction's JSON are it; the numbering measures along
    its neighbours (:func:`measure_instances`, 5th to 95th percentile) against the widths fitted with that.
    Merging the two would move the review's thresholds: that takes a recalibration on held-out scans."""
    frame = ArchFrame.from_teeth(aligned[np.concatenate(members), :2])
    out = []
    for rows in members:
        p = aligned[rows, :2] - frame.centre
        c = p.mean(0)
        tangent = np.array([c[1], -c[0]]) / max(float(np.linalg.norm(c)), 1e-9)
        proj = p @ tangent
        out.append(float(np.percentile(proj, 98) - np.percentile(proj, 2)))
    return out
