"""Summary figures over the scans of a split: the per-scan mIoU's mean, 10th percentile and share of
kept scans (>= 0.80), the dataset-level mIoU and the worst scans, for the whole split and per group
(source, jaw, arches with <= 13 teeth, arches with a third molar, and, where the vertices are given,
arches with a side that 3D-IOSSeg numbers both ways and the others).

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
    (:func:`~pointmamba.data.closed_extractions.lone_premolar_sides`)."""
    teeth = [int(t) for t in np.unique(labels) if t > 0]
    groups = {"few_teeth": len(teeth) <= 13, "third_molar": any(t % 10 == 8 for t in teeth)}
    if aligned is not None and jaw is not None:
        from ..data.closed_extractions import lone_premolar_sides

        groups["lone_premolar"] = bool(lone_premolar_sides(aligned, labels, jaw))
    return groups


def group_rows(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows by group name: ``all``, ``source <name>``, ``jaw <name>``, ``<= 13 teeth``, ``third molar``,
    and where some arch has one, ``lone premolar side`` and ``no lone premolar side``."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    for key, label in (("source", "source"), ("jaw", "jaw")):
        for value in sorted({str(r[key]) for r in rows}):
            groups[f"{label} {value}"] = [r for r in rows if str(r[key]) == value]
    groups["<= 13 teeth"] = [r for r in rows if r["few_teeth"]]
    groups["third molar"] = [r for r in rows if r["third_molar"]]
    if any(r.get("lone_premolar") for r in rows):
        groups["lone premolar side"] = [r for r in rows if r["lone_premolar"]]
        groups["no lone premolar side"] = [r for r in rows if not r["lone_premolar"]]
    return {k: v for k, v in groups.items() if v}


def summarize(rows: Sequence[dict[str, Any]], confusion: Sequence[ConfusionMatrix] | None = None,
              worst: int = 3) -> dict[str, dict[str, Any]]:
    """Per group: ``scans``, ``mean_scan_miou``, ``p10_scan_miou``, ``kept`` (share >= 0.80),
    ``dataset_miou`` (from the summed confusion matrices, when given, aligned with ``rows``) and
    ``worst`` (the lowest scans, name and mIoU)."""
    index = {id(r): i for i, r in enumerate(rows)}
    out: dict[str, dict[str, Any]] = {}
    for name, members in group_rows(rows).items():
        m = np.array([r["miou"] for r in members], dtype=np.float64)
        entry: dict[str, Any] = {"scans": len(members), "mean_scan_miou": float(m.mean()),
                                 "p10_scan_miou": float(np.percentile(m, 10)), "kept": float((m >= KEPT_MIOU).mean())}
        if confusion is not None:
            cm = ConfusionMatrix(confusion[0].num_classes)
            for r in members:
                cm.merge(confusion[index[id(r)]])
            entry["dataset_miou"] = cm.miou()
        order = np.argsort(m, kind="stable")[:worst]
        entry["worst"] = [(members[i]["name"], float(m[i])) for i in order]
        out[name] = entry
    return out


def summary_table(summary: dict[str, dict[str, Any]]) -> str:
    """The summary as a markdown table."""
    lines = ["| scans | n | mean scan mIoU | 10th pct | kept (>= 0.80) | dataset mIoU | worst |",
             "|---|---|---|---|---|---|---|"]
    for name, e in summary.items():
        worst = ", ".join(f"{n} {v:.3f}" for n, v in e["worst"])
        ds = f"{e['dataset_miou']:.4f}" if "dataset_miou" in e else "-"
        lines.append(f"| {name} | {e['scans']} | {e['mean_scan_miou']:.4f} | {e['p10_scan_miou']:.4f} | "
                     f"{e['kept']:.0%} | {ds} | {worst} |")
    return "\n".join(lines) + "\n"
