"""Evaluation over a loader: per-vertex predictions at full resolution and segmentation metrics."""
from __future__ import annotations

from typing import Any, Iterator

import torch
from torch import nn
from tqdm import tqdm

from ..point.batch import PointBatch
from ..inference.pipeline import predict_batch
from .metrics import ConfusionMatrix


@torch.no_grad()
def predict_loader(
    model: nn.Module, loader: Any, device: torch.device, amp: bool = False, progress: bool = False
) -> Iterator[tuple[PointBatch, torch.Tensor]]:
    """Yield (batch, per-row logits) for every batch, in eval mode."""
    model.eval()
    for batch in tqdm(loader, desc="eval", disable=not progress, leave=False):
        yield predict_batch(model, batch, device, amp)


def full_resolution(batch: PointBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row values -> every original vertex (through the grid-sampling map), with vertex targets.

    Falls back to the sampled rows when the batch carries no map back to the vertices.
    """
    if "vertex_row" in batch.extra and "vertex_segment" in batch.extra:
        return rows[batch.extra["vertex_row"]], batch.extra["vertex_segment"]
    return rows, batch.extra["segment"]


def evaluate(
    model: nn.Module, loader: Any, num_classes: int, device: torch.device, amp: bool = False, progress: bool = False
) -> tuple[dict[str, Any], ConfusionMatrix]:
    """Accuracy, mIoU, per-class IoU and Dice over all vertices of the loader's scans, plus the mean loss;
    ``iou_by_jaw``: per-class IoU over each jaw's scans (a class id is another tooth in each jaw)."""
    cm = ConfusionMatrix(num_classes)
    by_jaw: dict[str, ConfusionMatrix] = {}
    loss_sum, loss_n = 0.0, 0
    for batch, logits in predict_loader(model, loader, device, amp, progress):
        target = batch.extra["segment"]
        valid = target != -100
        if valid.any():
            loss_sum += float(nn.functional.cross_entropy(logits[valid], target[valid], reduction="sum"))
            loss_n += int(valid.sum())
        pred, vtarget = full_resolution(batch, logits.argmax(1))
        pred, vtarget = pred.cpu(), vtarget.cpu()
        cm.update(pred, vtarget)
        jaws = batch.extra.get("jaw")
        if jaws is not None and "vertex_offset" in batch.extra and len(pred) == int(batch.extra["vertex_offset"][-1]):
            ends = batch.extra["vertex_offset"].tolist()
            for jaw, start, end in zip(jaws, [0] + ends[:-1], ends):
                if jaw:
                    by_jaw.setdefault(jaw, ConfusionMatrix(num_classes)).update(pred[start:end], vtarget[start:end])
    metrics = {
        "loss": loss_sum / max(loss_n, 1),
        "accuracy": cm.accuracy(),
        "miou": cm.miou(),
        "mdice": cm.mean_dice(),
        "iou": cm.iou().tolist(),
        "iou_by_jaw": {jaw: c.iou().tolist() for jaw, c in sorted(by_jaw.items())},
    }
    return metrics, cm
