"""Bare ridge: a nearly edentulous arch must come back with the few teeth it has and no others.

From a labelled arch, every tooth but a few kept ones is flattened onto the gingiva (the removal check's
``flatten``: :func:`~pointmamba.evaluation.removal_check.without_tooth`), the scan is predicted, and three
things are counted: **phantom teeth** (predicted tooth numbers whose vertices lie mostly on the flattened
ridge), the share of the ridge predicted as tooth, and the kept teeth that keep their own number.
Flattening is how the project makes a healed ridge; no real edentulous scan is among the shared data.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np


def kept_teeth(labels: np.ndarray, count: int, name: str) -> np.ndarray:
    """``count`` of the reference teeth of ``labels`` (FDI numbers), drawn with a seed from the scan's
    ``name``: the same scan keeps the same teeth in every run."""
    teeth = np.unique(labels[labels > 0])
    rng = np.random.default_rng([zlib.crc32(name.encode()), count])
    return np.sort(rng.choice(teeth, size=min(count, len(teeth)), replace=False)).astype(np.int64)


@dataclass
class RidgeResult:
    """One arch with all teeth but ``kept`` flattened, as predicted."""

    scan: str
    kept: list[int]
    phantoms: list[int]  # predicted numbers lying mostly on the flattened ridge
    ridge_called_tooth: float  # share of the flattened vertices predicted as a tooth
    kept_right: int  # kept teeth whose vertices mostly carry their own number


def ridge_result(name: str, labels: np.ndarray, flattened: np.ndarray, predicted: np.ndarray,
                 kept: np.ndarray) -> RidgeResult:
    """Count a prediction ``predicted`` (FDI per vertex) of an arch whose ``flattened`` vertices (mask) are
    bare ridge and whose ``labels`` (FDI, 0 on the ridge) hold the ``kept`` teeth."""
    from .removal_check import tooth_numbers

    predicted = np.asarray(predicted)
    phantoms = [int(t) for t in np.unique(predicted[predicted > 0])
                if flattened[predicted == t].mean() > 0.5]
    numbers = tooth_numbers(labels, predicted)
    right = sum(numbers.get(int(t)) == int(t) for t in kept)
    share = float((predicted[flattened] > 0).mean()) if flattened.any() else 0.0
    return RidgeResult(name, [int(t) for t in kept], phantoms, share, int(right))


def ridge_arch(scan: Any, keep: np.ndarray) -> tuple[Any, np.ndarray]:
    """(``scan`` with every tooth but ``keep`` flattened onto the gingiva, mask of the flattened vertices)."""
    from .removal_check import without_tooth

    gone = np.setdiff1d(np.unique(scan.labels[scan.labels > 0]), keep)
    return without_tooth(scan, list(gone), "flatten"), np.isin(scan.labels, gone)


def ridge_summary(results: list[RidgeResult]) -> dict[str, Any]:
    """Totals over arches: how many came back without a phantom tooth, phantom teeth per arch, the share
    of the ridge called tooth, and the kept teeth right."""
    n = max(len(results), 1)
    clean = sum(not r.phantoms for r in results)
    phantoms = sum(len(r.phantoms) for r in results)
    return {"arches": len(results), "arches_without_phantom": clean, "share_without_phantom": clean / n,
            "phantom_teeth": phantoms, "phantom_teeth_per_arch": phantoms / n,
            "ridge_called_tooth": float(np.mean([r.ridge_called_tooth for r in results])) if results else 0.0,
            "kept_teeth": sum(len(r.kept) for r in results), "kept_teeth_right": sum(r.kept_right for r in results)}
