"""Semantic-segmentation metrics from an accumulated confusion matrix.

``ConfusionMatrix`` counts (target, prediction) pairs over any number of batches, can be summed across
``torch.distributed`` ranks, and derives accuracy, per-class IoU / Dice and their means.

Convention: ``matrix[t, p]`` = number of points whose target is ``t`` and prediction is ``p`` (rows are
targets, columns predictions). For class ``c``: ``tp = matrix[c, c]``, ``fn = row sum - tp``,
``fp = column sum - tp``.

Mean IoU / mean Dice choice: the mean is taken over classes present in the target OR the prediction
(``tp + fp + fn > 0``). A class absent from both has an undefined IoU (0/0): it is reported as NaN and left
out of the mean, so a validation set that contains no third molars does not drag mIoU down. A class that
is predicted but never present in the target has IoU 0 and does count (it is a false positive).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor


def _as_long_tensor(x: Tensor | np.ndarray | Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x
    else:
        t = torch.as_tensor(np.asarray(x))
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"ConfusionMatrix.update: {name} must hold integer class labels, got dtype {t.dtype}")
    return t.reshape(-1).long()


def _nanmean(x: np.ndarray) -> float:
    """Mean over the finite entries; NaN (without a RuntimeWarning) when there are none."""
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


class ConfusionMatrix:
    """Accumulates a ``num_classes x num_classes`` int64 confusion matrix (rows = target, cols = prediction).

    Points whose target equals ``ignore_index`` are skipped (whatever their prediction). Any other label
    outside ``[0, num_classes)`` in target or prediction is an error. The matrix lives on ``device``
    (CPU by default); ``update`` counts on the inputs' device and adds the result there.
    """

    def __init__(self, num_classes: int, ignore_index: int = -100, device: torch.device | str = "cpu") -> None:
        if int(num_classes) < 1:
            raise ValueError(f"ConfusionMatrix: num_classes must be >= 1, got {num_classes}")
        self.num_classes = int(num_classes)
        self.ignore_index = int(ignore_index)
        self.matrix = torch.zeros(self.num_classes, self.num_classes, dtype=torch.int64, device=device)

    # ---------------------------------------------------------------- accumulation
    def update(self, pred: Tensor | np.ndarray, target: Tensor | np.ndarray) -> "ConfusionMatrix":
        """Add predicted labels ``pred`` against ``target`` (same number of elements, any shape)."""
        p = _as_long_tensor(pred, "pred")
        t = _as_long_tensor(target, "target")
        if p.numel() != t.numel():
            raise ValueError(
                f"ConfusionMatrix.update: pred has {p.numel()} elements but target has {t.numel()}"
            )
        if p.device != t.device:
            p = p.to(t.device)
        keep = t != self.ignore_index
        p, t = p[keep], t[keep]
        n = self.num_classes
        for name, v in (("target", t), ("pred", p)):
            if v.numel() and (int(v.min()) < 0 or int(v.max()) >= n):
                bad = v[(v < 0) | (v >= n)]
                raise ValueError(
                    f"ConfusionMatrix.update: {name} has labels outside [0, {n}) "
                    f"(e.g. {bad[:5].tolist()}); ignore_index is {self.ignore_index}"
                )
        counts = torch.bincount(t * n + p, minlength=n * n).reshape(n, n)
        self.matrix += counts.to(self.matrix.device)
        return self

    def merge(self, other: "ConfusionMatrix") -> "ConfusionMatrix":
        """Add another accumulator's counts into this one (same number of classes)."""
        if not isinstance(other, ConfusionMatrix):
            raise TypeError(f"ConfusionMatrix.merge: expected a ConfusionMatrix, got {type(other).__name__}")
        if other.num_classes != self.num_classes:
            raise ValueError(
                f"ConfusionMatrix.merge: num_classes differ ({self.num_classes} vs {other.num_classes})"
            )
        self.matrix += other.matrix.to(self.matrix.device)
        return self

    def all_reduce(self, group: Any = None) -> "ConfusionMatrix":
        """Sum the matrix over the ranks of ``group`` in place; a no-op unless torch.distributed is initialised.

        NCCL only reduces CUDA tensors, so under that backend the counts travel via the current CUDA device.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return self
        m = self.matrix
        if dist.get_backend(group) == "nccl" and m.device.type != "cuda":
            m = m.to(torch.device("cuda", torch.cuda.current_device()))
        dist.all_reduce(m, op=dist.ReduceOp.SUM, group=group)
        if m is not self.matrix:
            self.matrix.copy_(m.to(self.matrix.device))
        return self

    def reset(self) -> "ConfusionMatrix":
        self.matrix.zero_()
        return self

    # ---------------------------------------------------------------- derived metrics
    def _counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m = self.matrix.detach().cpu().numpy().astype(np.float64)
        tp = np.diag(m)
        return tp, m.sum(axis=0) - tp, m.sum(axis=1) - tp  # tp, fp, fn

    @property
    def total(self) -> int:
        """Number of counted (non-ignored) points."""
        return int(self.matrix.sum())

    def accuracy(self) -> float:
        """Overall point accuracy, ``trace / total``; NaN when nothing was counted."""
        total = self.total
        return float(torch.trace(self.matrix)) / total if total else float("nan")

    def iou(self) -> np.ndarray:
        """Per-class IoU ``tp / (tp + fp + fn)``, float64 (C,); NaN for classes absent from target and prediction."""
        tp, fp, fn = self._counts()
        den = tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, tp / den, np.nan)

    def miou(self) -> float:
        """Mean IoU over classes present in the target or the prediction (see module docstring)."""
        return _nanmean(self.iou())

    def dice(self) -> np.ndarray:
        """Per-class Dice / F1 ``2 tp / (2 tp + fp + fn)``, float64 (C,); NaN for classes absent from both."""
        tp, fp, fn = self._counts()
        den = 2 * tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, 2 * tp / den, np.nan)

    def mean_dice(self) -> float:
        """Mean Dice over classes present in the target or the prediction."""
        return _nanmean(self.dice())

    def summary(self) -> dict[str, float]:
        """``{"accuracy", "miou", "mean_dice"}`` as Python floats, for logging."""
        return {"accuracy": self.accuracy(), "miou": self.miou(), "mean_dice": self.mean_dice()}

    # ---------------------------------------------------------------- (de)serialisation
    def state_dict(self) -> dict[str, Any]:
        return {
            "num_classes": self.num_classes,
            "ignore_index": self.ignore_index,
            "matrix": self.matrix.detach().cpu().clone(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = {"num_classes", "matrix"} - set(state)
        if missing:
            raise KeyError(f"ConfusionMatrix.load_state_dict: missing keys {sorted(missing)}")
        if int(state["num_classes"]) != self.num_classes:
            raise ValueError(
                f"ConfusionMatrix.load_state_dict: state has num_classes={state['num_classes']}, "
                f"this accumulator has {self.num_classes}"
            )
        m = torch.as_tensor(state["matrix"])
        if tuple(m.shape) != (self.num_classes, self.num_classes):
            raise ValueError(
                f"ConfusionMatrix.load_state_dict: matrix shape {tuple(m.shape)} != "
                f"({self.num_classes}, {self.num_classes})"
            )
        self.ignore_index = int(state.get("ignore_index", self.ignore_index))
        self.matrix.copy_(m.to(dtype=torch.int64, device=self.matrix.device))

    def __repr__(self) -> str:
        return f"ConfusionMatrix(num_classes={self.num_classes}, ignore_index={self.ignore_index}, total={self.total})"
