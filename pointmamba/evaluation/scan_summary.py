"""Summary figures over the scans of a split: the per-scan mIoU's mean, 10th percentile and share of
kept scans (>= 0.80), the dataset-level mIoU and the worst scans, for the whole split and per group
(source, jaw, arches with <= 13 teeth, arches with a third molar, and, where the vertices are given,
arches with a side that 3D-IOSSeg numbers both ways and the others; those arches again with the
dentition given from each reference's own numbering, where the rows carry ``miou_given``), and where the
rows carry ``review``, the share of scans flagged for review.

A mean over scans hides the failures that matter (a whole run of teeth one number off costs a scan about
0.2 mIoU); the 10th percentile and the kept share show them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .metrics import ConfusionMatrix

KEPT_MIOU = 0.80
"""A scan at or above this per-scan mIoU is one a user would keep."""


def reference_groups(labels: np.ndarray, aligned: np.ndarray | None = None, jaw: str | None = None
                     ) -> dict[str, bool]:
    """Which groups a reference arch belongs to: ``few_teeth`` (<= 13 teeth), ``third_molar``; with its
    vertices in the canonical frame (``aligned``) and ``jaw`` also ``lone_premolar``: a side with a
    canine, one premolar-sized tooth, then molars, which 3D-IOSSeg numbers both ways
    (:func:`~pointmamba.data.lone_premolar.lone_premolar_sides`)."""
    teeth = [int(t) for t in np.unique(labels) if t > 0]
    groups = {"few_teeth": len(teeth) <= 13, "third_molar": any(t % 10 == 8 for t in teeth)}
    if aligned is not None and jaw is not None:
        from ..data.lone_premolar import lone_premolar_sides

        groups["lone_premolar"] = bool(lone_premolar_sides(aligned, labels, jaw))
    return groups


def group_rows(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows by group name: ``all``, ``source <name>``, ``jaw <name>``, ``<= 13 teeth``, ``third molar``,
    and where some arch has one, ``lone premolar side`` (under the default ``auto`` dentition), ``lone
    premolar side, dentition given`` (copies of its rows whose ``miou`` and ``review`` are their
    ``miou_given`` and ``review_given``) and ``no
    lone premolar side``."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    for key, label in (("source", "source"), ("jaw", "jaw")):
        for value in sorted({str(r[key]) for r in rows}):
            groups[f"{label} {value}"] = [r for r in rows if str(r[key]) == value]
    groups["<= 13 teeth"] = [r for r in rows if r["few_teeth"]]
    groups["third molar"] = [r for r in rows if r["third_molar"]]
    if any(r.get("lone_premolar") for r in rows):
        groups["lone premolar side"] = [r for r in rows if r["lone_premolar"]]
        given = [{**r, "miou": r["miou_given"], "review": r.get("review_given")} for r in rows
                 if r["lone_premolar"] and r.get("miou_given") is not None]
        if given:
            groups["lone premolar side, dentition given"] = given
        groups["no lone premolar side"] = [r for r in rows if not r["lone_premolar"]]
    return {k: v for k, v in groups.items() if v}


def summarize(rows: Sequence[dict[str, Any]], confusion: Sequence[ConfusionMatrix] | None = None,
              worst: int = 3) -> dict[str, dict[str, Any]]:
    """Per group: ``scans``, ``mean_scan_miou``, ``p10_scan_miou``, ``kept`` (share >= 0.80),
    ``dataset_miou`` (from the summed confusion matrices, when given, aligned with ``rows``) and
    ``worst`` (the lowest scans, name and mIoU); ``flagged`` (share flagged for review) where rows carry
    ``review``. A group of row copies (the dentition given) has no ``dataset_miou``: the matrices are the
    default prediction's."""
    index = {id(r): i for i, r in enumerate(rows)}
    out: dict[str, dict[str, Any]] = {}
    for name, members in group_rows(rows).items():
        m = np.array([r["miou"] for r in members], dtype=np.float64)
        entry: dict[str, Any] = {"scans": len(members), "mean_scan_miou": float(m.mean()),
                                 "p10_scan_miou": float(np.percentile(m, 10)), "kept": float((m >= KEPT_MIOU).mean())}
        if any("review" in r for r in members):
            entry["flagged"] = float(np.mean([bool(r.get("review")) for r in members]))
        if confusion is not None and all(id(r) in index for r in members):
            cm = ConfusionMatrix(confusion[0].num_classes)
            for r in members:
                cm.merge(confusion[index[id(r)]])
            entry["dataset_miou"] = cm.miou()
        order = np.argsort(m, kind="stable")[:worst]
        entry["worst"] = [(members[i]["name"], float(m[i])) for i in order]
        out[name] = entry
    return out


def kept_and_flagged(miou: np.ndarray, review: np.ndarray) -> dict[str, Any]:
    """A set of scans' per-scan mIoU figures with the review flag's counts: ``scans``, ``mean``, ``p10``,
    ``kept`` (how many at >= :data:`KEPT_MIOU`), ``below_flagged`` of the ``below`` ones flagged and
    ``kept_flagged`` of the kept ones. ``miou`` and ``review`` (bool) one per scan, at least one."""
    miou, review = np.asarray(miou, dtype=np.float64), np.asarray(review, dtype=bool)
    below = miou < KEPT_MIOU
    return {"scans": len(miou), "mean": float(miou.mean()), "p10": float(np.percentile(miou, 10)),
            "kept": int((~below).sum()), "below_flagged": int((review & below).sum()), "below": int(below.sum()),
            "kept_flagged": int((review & ~below).sum())}


def summary_table(summary: dict[str, dict[str, Any]]) -> str:
    """The summary as a markdown table."""
    flags = any("flagged" in e for e in summary.values())
    lines = ["| scans | n | mean scan mIoU | 10th pct | kept (>= 0.80) | dataset mIoU |" + (" flagged |" if flags else "")
             + " worst |", "|---|---|---|---|---|---|" + ("---|" if flags else "") + "---|"]
    for name, e in summary.items():
        worst = ", ".join(f"{n} {v:.3f}" for n, v in e["worst"])
        ds = f"{e['dataset_miou']:.4f}" if "dataset_miou" in e else "-"
        flagged = (f" {e['flagged']:.0%} |" if "flagged" in e else " - |") if flags else ""
        lines.append(f"| {name} | {e['scans']} | {e['mean_scan_miou']:.4f} | {e['p10_scan_miou']:.4f} | "
                     f"{e['kept']:.0%} | {ds} |{flagged} {worst} |")
    return "\n".join(lines) + "\n"


def review_columns(pred: Any, scan: Any) -> dict[str, Any]:
    """A predicted scan's ``review`` (flagged or not) and ``findings`` (their kinds), as
    :class:`~pointmamba.inference.segmenter.Segmenter` flags it: ``pred`` a :class:`~.inference.Prediction` of ``scan``."""
    return prediction_review(pred, scan.jaw, scan.faces)


def prediction_review(pred: Any, jaw: str | None, faces: np.ndarray) -> dict[str, Any]:
    """:func:`review_columns` of a prediction of a mesh with ``faces`` whose jaw is ``jaw``."""
    conf = prediction_confidence(pred, jaw, faces)[1]
    return {"review": conf.review, "findings": finding_kinds(conf)}


def finding_kinds(conf: Any) -> str:
    """The kinds of a :class:`~pointmamba.inference.confidence.ScanConfidence`'s findings, sorted, space-separated
    (the ``findings`` column of tools/test.py)."""
    return " ".join(sorted({kind for kind, _ in conf.findings}))


def prediction_confidence(pred: Any, jaw: str | None, faces: np.ndarray) -> tuple[np.ndarray, Any]:
    """(instance id per vertex, :class:`~pointmamba.inference.confidence.ScanConfidence`) of a prediction of a
    mesh with ``faces`` whose jaw is ``jaw``: its teeth, their runner-ups and the review flag, as the
    Segmenter makes them (the confidences not lowered for a flag: that changes no number, runner-up or finding)."""
    from ..data.teeth3ds import instances_from_labels
    from ..inference.confidence import scan_confidence

    instances = pred.instances if pred.instances is not None else instances_from_labels(pred.fdi)
    # the jaw check's finding too, as tools/predict.py reports it (a given jaw its teeth contradict)
    conf = scan_confidence(pred.probs, pred.classes, instances, jaw, pred.aligned, pred.instance_probs,
                           faces=faces, numbering=pred.numbering, jaw_call=getattr(pred, "jaw_call", None),
                           faces_reversed=bool(getattr(pred, "reversed_finding", False)))
    return np.asarray(instances), conf


def dentition_given_columns(model: Any, scan: Any, cfg: dict[str, Any], device: Any, aligned: np.ndarray,
                            num_classes: int) -> dict[str, Any]:
    """For an arch with a side of the lone-premolar pattern, the dentition its reference's own numbering
    gives (:func:`~.dentition.reference_dentition`), the per-scan mIoU predicted with it given and whether
    that prediction is flagged (``dentition_given``, ``miou_given``, ``review_given``; None for other arches)."""
    from ..data import fdi_to_class
    from ..inference.dentition import reference_dentition
    from ..inference.pipeline import segment_scan

    given = reference_dentition(aligned, scan.labels, scan.jaw)
    if given is None:
        return {"dentition_given": None, "miou_given": None, "review_given": None}
    pred = segment_scan(model, scan, {**cfg, "infer": {**(cfg.get("infer") or {}), "dentition": given}}, device)
    target = fdi_to_class(scan.labels, scan.jaw, num_classes)
    return {"dentition_given": given, "miou_given": ConfusionMatrix(num_classes).update(pred.classes, target).miou(),
            "review_given": review_columns(pred, scan)["review"]}
