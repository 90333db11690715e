"""The training loss: per-point cross-entropy, optionally class-balanced and weighted per scan."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

MAX_CLASS_WEIGHT = 4.0


def class_counts(dataset: Any) -> np.ndarray:
    """Vertices per class over every scan of a :class:`~pointmamba.data.Teeth3DSDataset` (from its cache)."""
    from ..data import fdi_to_class

    counts = np.zeros(dataset.num_classes, dtype=np.int64)
    for i in range(len(dataset)):
        d = dataset.preprocessed(i)
        if "labels" in d:
            classes = fdi_to_class(d["labels"].astype(np.int64), str(d["jaw"]) or None, dataset.num_classes)
            counts += np.bincount(classes[classes >= 0], minlength=dataset.num_classes)
    return counts


def balanced_class_weights(counts: np.ndarray, power: float) -> np.ndarray:
    """Tooth class ``c`` weighs ``(counts[c] / median tooth count) ** -power``, clipped to [1/4, 4];
    gingiva (class 0) weighs 1, and so does a class absent from the counts (it cannot be learned)."""
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.ones(len(counts))
    teeth = counts[1:]
    present = teeth > 0
    if power > 0 and present.any():
        median = np.median(teeth[present])
        w = np.ones_like(teeth)
        w[present] = np.clip((teeth[present] / median) ** -power, 1 / MAX_CLASS_WEIGHT, MAX_CLASS_WEIGHT)
        weights[1:] = w
    return weights


def segmentation_loss(logits: Tensor, target: Tensor, label_smoothing: float = 0.0,
                      class_weight: Tensor | None = None, point_weight: Tensor | None = None) -> Tensor:
    """Mean cross-entropy over labelled points (target -100 ignored). ``class_weight`` (C,) and
    ``point_weight`` (N,) make it the weighted mean ``sum(w_i * ce_i) / sum(w_i)`` with ``w_i`` their
    product; with neither it is exactly ``F.cross_entropy``'s mean."""
    logits = logits.float()
    if class_weight is None and point_weight is None:
        return F.cross_entropy(logits, target, ignore_index=-100, label_smoothing=label_smoothing)
    ce = F.cross_entropy(logits, target, ignore_index=-100, label_smoothing=label_smoothing, reduction="none")
    labelled = target != -100
    w = labelled.float()
    if class_weight is not None:
        w = w * class_weight.to(logits.device)[target.clamp(min=0)]
    if point_weight is not None:
        w = w * point_weight
    return (ce * w).sum() / w.sum().clamp(min=torch.finfo(torch.float32).tiny)
