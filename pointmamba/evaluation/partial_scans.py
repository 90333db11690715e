"""Partial scans of a labelled arch: one side, the other side, the front teeth (issue 43: a user scans a
quadrant or the front teeth; the network must name the teeth it sees, not count them from the scan's
centre).

Each variant keeps a set of reference teeth and the gingiva nearest them (:func:`around_teeth`):

* ``side_right``: the patient's right side (quadrant 1 or 4) and the other central incisor;
* ``side_left``: the left side (quadrant 2 or 3) and the other central incisor;
* ``front``: the incisors, canines and first premolars of both sides (positions 1-4).

A variant whose reference keeps fewer than 3 teeth is skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

PARTIAL_VARIANTS = ("side_right", "side_left", "front")
MIN_TEETH = 3


def variant_teeth(labels: np.ndarray, jaw: str, variant: str) -> np.ndarray:
    """The reference teeth (FDI) that ``variant`` of an arch holding ``labels`` keeps."""
    if variant not in PARTIAL_VARIANTS:
        raise ValueError(f"partial-scan variant must be one of {PARTIAL_VARIANTS}, got {variant!r}")
    if jaw not in ("upper", "lower"):
        raise ValueError(f"a partial scan needs the jaw (upper or lower), got {jaw!r}")
    right, left = (1, 2) if jaw == "upper" else (4, 3)
    teeth = np.unique(labels[labels > 0])
    quadrant, position = teeth // 10, teeth % 10
    if variant == "front":
        return teeth[position <= 4]
    side, other = (right, left) if variant == "side_right" else (left, right)
    return teeth[(quadrant == side) | ((quadrant == other) & (position == 1))]


def around_teeth(coord: np.ndarray, labels: np.ndarray, teeth: np.ndarray) -> np.ndarray:
    """The points (bool (N,)) of ``teeth`` (FDI numbers) and every gingiva point whose nearest tooth point
    is one of theirs: the arch as a scan of those teeth alone would hold it. ``labels`` FDI (0 gingiva),
    with at least one tooth point."""
    from scipy.spatial import cKDTree

    tooth = np.flatnonzero(labels > 0)
    nearest = labels[tooth][cKDTree(coord[tooth]).query(coord, k=1)[1]]
    return np.isin(nearest, teeth)


def partial_scan(scan: Any, variant: str) -> Any | None:
    """``scan`` (a labelled ``pointmamba.data.Scan``) cut to ``variant``, or None when it would hold fewer than
    :data:`MIN_TEETH` teeth. Labels of the kept vertices are the reference's."""
    from .removal_check import kept_scan

    teeth = variant_teeth(scan.labels, scan.jaw, variant)
    if len(teeth) < MIN_TEETH:
        return None
    keep = around_teeth(scan.vertices.astype(np.float64), scan.labels, teeth)
    return kept_scan(scan.vertices, scan.faces, scan.labels, keep, scan)


@dataclass
class PartialResult:
    """One partial scan, segmented and scored against its reference."""

    scan: str
    variant: str
    vertices: int
    teeth: int
    miou: float
    accuracy: float
    review: bool
    findings: str
    wrong: dict[int, int]  # reference tooth -> the number most of its vertices got, where they differ


def score_partial(name: str, variant: str, part: Any, predict: Callable[[Any], Any], num_classes: int) -> PartialResult:
    """Segment ``part`` (a partial scan from :func:`partial_scan`) with ``predict`` (Scan -> Prediction) and
    score it as ``tools/test.py`` scores a scan: the per-scan mIoU over the classes in the reference or the
    prediction, and the review flag."""
    from ..data import fdi_to_class
    from .metrics import ConfusionMatrix
    from .removal_check import tooth_numbers
    from .scan_summary import review_columns

    pred = predict(part)
    cm = ConfusionMatrix(num_classes).update(pred.classes, fdi_to_class(part.labels, part.jaw, num_classes))
    numbers = tooth_numbers(part.labels, pred.fdi)
    wrong = {int(t): int(p) for t, p in numbers.items() if t != p}
    review = review_columns(pred, part)
    return PartialResult(name, variant, part.num_vertices, len(numbers), cm.miou(), cm.accuracy(),
                         bool(review["review"]), review["findings"], wrong)


def partial_summary(results: list[PartialResult]) -> dict[str, Any]:
    """Per variant and over all: scans, mean / 10th percentile / kept (>= 0.80) of the per-scan mIoU, the share
    flagged, and flag recall on the scans below 0.80."""
    from .scan_summary import kept_and_flagged

    def one(rs: list[PartialResult]) -> dict[str, Any]:
        f = kept_and_flagged([r.miou for r in rs], [r.review for r in rs])
        return {"scans": f["scans"], "mean": f["mean"], "p10": f["p10"], "kept": f["kept"] / f["scans"],
                "flagged": (f["below_flagged"] + f["kept_flagged"]) / f["scans"], "below_kept": f["below"],
                "below_kept_flagged": f["below_flagged"], "kept_flagged": f["kept_flagged"]}

    out = {"all": one(results)} if results else {}
    for v in PARTIAL_VARIANTS:
        rs = [r for r in results if r.variant == v]
        if rs:
            out[v] = one(rs)
    return out
