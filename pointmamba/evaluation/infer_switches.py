"""The measured effect of each inference switch (``infer`` config section) on a labelled split.

The network runs once per scan (plain and mirrored); every combination of switches is then applied to
the same probabilities, so the table shows what each switch adds, not run-to-run noise. The rotations of
``infer.tta_angles`` apply to every variant.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

_OFF = {"mirror_tta": False, "graph_cut": False, "instance_numbering": False}
_DEFAULT = {"mirror_tta": True, "graph_cut": True, "instance_numbering": True}
VARIANTS: dict[str, dict[str, bool]] = {
    "network only": _OFF,
    "+ mirror TTA": {**_OFF, "mirror_tta": True},
    "+ graph cut": {**_OFF, "graph_cut": True},
    "+ graph cut + instance numbering": {**_OFF, "graph_cut": True, "instance_numbering": True},
    "defaults (TTA + graph cut + instance numbering)": _DEFAULT,
    "defaults without mirror TTA": {**_DEFAULT, "mirror_tta": False},
    "defaults without graph cut": {**_DEFAULT, "graph_cut": False},
    "defaults without instance numbering": {**_DEFAULT, "instance_numbering": False},
}


def compare_switches(model: nn.Module, dataset: Any, cfg: dict[str, Any], device: torch.device) -> str:
    """A markdown table: per variant, mIoU over the split (per-class IoU from the summed confusion
    matrix), mean per-scan mIoU, upper / lower jaw mean per-scan mIoU and accuracy."""
    from tqdm import tqdm

    from ..data import fdi_to_class, load_scan
    from ..data.dataset import preprocess_scan
    from ..data.mesh import apply_transform
    from ..inference.config import infer_options
    from ..inference.pipeline import TestView, refine, summed_view_probabilities
    from .metrics import ConfusionMatrix
    from .scan_summary import KEPT_MIOU

    num_classes = cfg["data"]["num_classes"]
    base = infer_options(cfg)
    cms = {v: ConfusionMatrix(num_classes) for v in VARIANTS}
    per_scan: dict[str, list[tuple[str, float]]] = {v: [] for v in VARIANTS}
    for i in tqdm(range(len(dataset)), desc="inference switches"):
        scan = load_scan(dataset.paths[i])
        target = fdi_to_class(scan.labels, scan.jaw, num_classes)
        arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
        angles = base["tta_angles"]
        # the plain views once; the mirrored ones added to their sum (the order vertex_probabilities uses)
        plain_sum, transform = summed_view_probabilities(
            model, arrays, scan.name, cfg, device, [TestView(False, a) for a in angles])
        both_sum, _ = summed_view_probabilities(
            model, arrays, scan.name, cfg, device, [TestView(True, a) for a in angles], start=plain_sum.copy())
        plain, both = plain_sum / len(angles), both_sum / (2 * len(angles))
        aligned = apply_transform(scan.vertices.astype(np.float64), transform)
        normals = apply_transform(arrays["normals"].astype(np.float64), transform, direction=True)
        for name, switches in VARIANTS.items():
            options = {**base, **switches}
            classes = refine(both if switches["mirror_tta"] else plain, aligned, scan.faces, normals, scan.jaw,
                             num_classes, options)
            scan_cm = ConfusionMatrix(num_classes).update(classes, target)
            cms[name].merge(scan_cm)
            per_scan[name].append((scan.jaw, scan_cm.miou()))
    lines = ["| inference | mIoU | mean scan mIoU | 10th pct | kept (>= 0.80) | upper jaws | lower jaws | accuracy |",
             "|---|---|---|---|---|---|---|---|"]
    for name in VARIANTS:
        jaws = per_scan[name]
        scores = np.array([m for _, m in jaws])
        up = [m for j, m in jaws if j == "upper"]
        lo = [m for j, m in jaws if j == "lower"]
        lines.append(f"| {name} | {cms[name].miou():.4f} | {scores.mean():.4f} | {np.percentile(scores, 10):.4f} | "
                     f"{(scores >= KEPT_MIOU).mean():.0%} | {np.mean(up) if up else float('nan'):.4f} | "
                     f"{np.mean(lo) if lo else float('nan'):.4f} | {cms[name].accuracy():.4f} |")
    return "\n".join(lines) + "\n"
