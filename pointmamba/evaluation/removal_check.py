"""Tooth-removal invariance: take one tooth out of a complete arch and see whether the others keep their
numbers. A network that counts teeth from the midline renumbers every tooth behind the gap.

Per complete reference arch (positions 1..7 on both sides), the intact scan is predicted once; then each
tooth in turn is removed and the scan predicted again. A remaining tooth "changes" when the number most
of its vertices get differs from the intact prediction's. Removal modes:

* ``delete``: the tooth's vertices and every face touching them are cut out (a hole, as software cuts a
  tooth out; a real gap has closed gingiva, so this is a lower bound on the problem);
* ``flatten``: its crown is lowered onto the gingiva around it (the missing-tooth augmentation's
  geometry, :class:`~pointmamba.data.missing_teeth.MissingTeeth`), the mesh kept whole;
* ``close``: flattened, then its space closed: the arch behind it turned forward until the tooth behind
  meets the one in front (:func:`~pointmamba.data.missing_teeth.close_space`), as after an orthodontic
  extraction; the gingiva in the closed wedge and the faces touching it are cut out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

REMOVAL_MODES = ("delete", "flatten", "close")


def tooth_numbers(reference: np.ndarray, predicted: np.ndarray) -> dict[int, int]:
    """The number each reference tooth carries in ``predicted``: the most common value on its vertices
    (the majority rule of :func:`~pointmamba.inference.confidence.tooth_truth`, groups and values swapped)."""
    from ..inference.confidence import tooth_truth

    return tooth_truth(reference, predicted)


def without_tooth(scan: Any, tooth: int | list[int], mode: str = "delete") -> Any:
    """``scan`` with reference tooth ``tooth`` removed (in ``flatten`` mode its vertices stay, labelled
    gingiva; in ``close`` mode those in its closed space go with the gingiva there); ``delete`` and
    ``flatten`` also take a list of teeth, all removed at once."""
    from ..data.dataset import preprocess_scan
    from ..data.mesh import apply_transform
    from ..data.missing_teeth import MissingTeeth, close_space

    if mode not in REMOVAL_MODES:
        raise ValueError(f"removal mode must be one of {REMOVAL_MODES}, got {mode!r}")
    teeth = np.atleast_1d(np.asarray(tooth))
    if mode == "close" and len(teeth) != 1:
        raise ValueError(f"removal mode 'close' closes one tooth's space at a time, got {len(teeth)} teeth")
    gone = np.isin(scan.labels, teeth)
    if mode == "delete":
        return kept_scan(scan.vertices, scan.faces, scan.labels, ~gone, scan)
    transform = preprocess_scan(scan)["transform"]
    canonical = apply_transform(scan.vertices.astype(np.float64), transform)
    normals = apply_transform(scan.vertex_normals(), transform, direction=True)
    flat = MissingTeeth({"ridge_drop_mm": 0.5})
    moved, _ = flat._flattened(canonical, normals, scan.labels, gone, np.random.default_rng(0))
    canonical[gone] = moved
    keep = np.ones(len(canonical), dtype=bool)
    if mode == "close":
        canonical, _, keep = close_space(canonical, normals, scan.labels, int(teeth[0]), 1.0)
    vertices = apply_transform(canonical, np.linalg.inv(transform))
    return kept_scan(vertices, scan.faces, np.where(gone, 0, scan.labels), keep, scan)


def kept_scan(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray, keep: np.ndarray, scan: Any) -> Any:
    """A scan of the ``keep`` vertices and the faces between them, named and jawed as ``scan``."""
    from ..data import Scan

    new_id = np.cumsum(keep) - 1
    kept_faces = new_id[faces[keep[faces].all(1)]]
    return Scan(vertices[keep], kept_faces, labels[keep], scan.jaw, scan.id_patient)


@dataclass
class Removal:
    """One tooth removed from one scan: how many of the other teeth changed their number."""

    scan: str
    tooth: int
    others: int
    changed: list[int]  # reference numbers of the teeth whose predicted number changed


def removal(scan: str, tooth: int, base: dict[int, int], reference: np.ndarray, predicted: np.ndarray) -> Removal:
    """The :class:`Removal` of ``tooth`` from ``scan``: ``base`` the intact prediction's :func:`tooth_numbers`,
    ``reference`` / ``predicted`` the FDI labels of the scan without the tooth."""
    after = tooth_numbers(reference, predicted)
    return Removal(scan, tooth, len(after), [t for t, n in after.items() if n != base[t]])


def removal_rows(removals: list[Removal]) -> list[dict[str, Any]]:
    """The rows of a removals.csv: scan, removed, others, changed (space-separated)."""
    return [{"scan": r.scan, "removed": r.tooth, "others": r.others, "changed": " ".join(map(str, r.changed))}
            for r in removals]


def check_scan(scan: Any, predict: Callable[[Any], np.ndarray], mode: str = "delete") -> list[Removal]:
    """Every single-tooth removal of one labelled ``scan``; ``predict(scan) -> FDI per vertex``."""
    base = tooth_numbers(scan.labels, predict(scan))
    out = []
    for tooth in sorted(base):
        reduced = without_tooth(scan, tooth, mode)
        out.append(removal(scan.name, tooth, base, reduced.labels, predict(reduced)))
    return out


def removal_summary(removals: list[Removal]) -> dict[str, Any]:
    """Totals: removals, those that changed any other tooth (count and share), teeth checked, teeth
    changed (count and share)."""
    teeth = sum(r.others for r in removals)
    changed = sum(len(r.changed) for r in removals)
    hit = sum(bool(r.changed) for r in removals)
    return {"scans": len({r.scan for r in removals}), "removals": len(removals), "removals_changing_any": hit,
            "share_of_removals_changing_any": hit / max(len(removals), 1), "teeth_checked": teeth,
            "teeth_changed": changed, "share_of_teeth_changed": changed / max(teeth, 1)}
