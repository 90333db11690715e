"""Scoring a trained network on a split: each scan predicted as ``pointmamba-predict`` predicts it (the ``infer``
config section), its per-scan metrics, the split's confusion matrix, per-class IoU / Dice, the overall figures
and the per-group summary. ``pointmamba-test`` (``pointmamba/cli/test.py``) writes what this returns; tests
call :func:`score_split` directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .metrics import ConfusionMatrix


@dataclass
class SplitResult:
    """What scoring a split gives (see :func:`score_split`)."""

    rows: list[dict[str, Any]]
    """One per scan, in the dataset's order: name, source, jaw, vertices, teeth, the reference groups,
    accuracy, miou, the review columns, the dentition-given columns and TSA / TLA / TIR / score (the
    columns of ``per_scan.csv``)."""
    per_class: list[dict[str, Any]]
    """One per class: class, name, iou, dice."""
    overall: dict[str, Any]
    """accuracy, miou, mdice, mean_scan_miou, num_scans and the aggregated Teeth3DS teeth metrics."""
    summary: dict[str, dict[str, Any]]
    """Per group of scans (all, per source, per jaw, ...): :func:`~pointmamba.evaluation.scan_summary.summarize`."""
    confusion: ConfusionMatrix
    """Over every vertex of every scan."""
    scan_confusions: list[ConfusionMatrix]
    """One per scan, in the order of ``rows``."""


def score_split(model: Any, cfg: dict[str, Any], dataset: Any, device: Any, progress: bool = True,
                desc: str = "test") -> SplitResult:
    """Predict every scan of ``dataset`` (a dataset built without augmentation: ``paths``, ``names``,
    ``sources``, ``aligned_vertices``) with ``model`` under ``cfg``'s ``infer`` section on ``device``,
    at every original vertex, and score it against its labels. ``progress``: a progress bar named ``desc``
    (``TQDM_DISABLE=1`` turns it off too). ValueError for a scan without labels."""
    from pointmamba.data import CLASS_NAMES, fdi_to_class, load_scan
    from pointmamba.inference.pipeline import segment_scan

    from .scan_summary import dentition_given_columns, reference_groups, review_columns, summarize
    from .teeth_metrics import aggregate_teeth_metrics, teeth_metrics

    num_classes = cfg["data"]["num_classes"]
    cm = ConfusionMatrix(num_classes)
    rows: list[dict[str, Any]] = []
    scan_cms: list[ConfusionMatrix] = []
    teeth_rows: list[dict[str, Any]] = []  # each scan's Teeth3DS teeth metrics, aggregated below
    indices: Any = range(len(dataset))
    if progress:
        from tqdm import tqdm

        indices = tqdm(indices, desc=desc)
    for i in indices:
        scan = load_scan(dataset.paths[i])
        pred = segment_scan(model, scan, cfg, device)
        if scan.labels is None:
            raise ValueError(f"{dataset.paths[i]}: no label file beside the mesh: scoring a split needs labels")
        target = fdi_to_class(scan.labels, scan.jaw, num_classes)
        scan_cm = ConfusionMatrix(num_classes).update(pred.classes, target)
        cm.merge(scan_cm)
        scan_cms.append(scan_cm)
        row = {"name": dataset.names[i], "source": dataset.sources[i], "jaw": scan.jaw,
               "vertices": int(scan.num_vertices), "teeth": int((np.unique(scan.labels) > 0).sum()),
               **reference_groups(scan.labels, dataset.aligned_vertices(i), scan.jaw),
               "accuracy": scan_cm.accuracy(), "miou": scan_cm.miou(), **review_columns(pred, scan)}
        # the pattern's arches again with the dentition their reference gives (a second network pass)
        row.update(dentition_given_columns(model, scan, cfg, device, dataset.aligned_vertices(i), num_classes)
                   if row.get("lone_premolar") else {"dentition_given": None, "miou_given": None, "review_given": None})
        tm = teeth_metrics(scan.vertices.astype(np.float64), scan.labels.astype(np.int64), pred.fdi)
        row.update({k: tm[k] for k in ("TSA", "TLA", "TIR", "score")})
        teeth_rows.append(tm)
        rows.append(row)

    names = CLASS_NAMES[num_classes]
    overall = {"accuracy": cm.accuracy(), "miou": cm.miou(), "mdice": cm.mean_dice(),
               "mean_scan_miou": float(np.mean([r["miou"] for r in rows])), "num_scans": len(rows)}
    if teeth_rows:
        overall.update({k: v for k, v in aggregate_teeth_metrics(teeth_rows).items() if k != "num_jaws"})
    per_class = [{"class": c, "name": names[c], "iou": float(cm.iou()[c]), "dice": float(cm.dice()[c])}
                 for c in range(num_classes)]
    return SplitResult(rows=rows, per_class=per_class, overall=overall, summary=summarize(rows, scan_cms),
                       confusion=cm, scan_confusions=scan_cms)
