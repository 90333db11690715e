"""Distances between consecutive points along space-filling curves, at the input grid and after pooling.

These are the distances a RelPos module sees (each point to its predecessor along the curve, within one
scan). ``pointmamba-plot-distances`` histograms them to choose ``max_rel_dist`` and the quantile.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from ..models.pooling import GridPooling
from ..models.relpos import relative_steps
from ..point.batch import DEFAULT_ORDERS, PointBatch

PERCENTILES = (50, 90, 95, 99)


def consecutive_distances(point: PointBatch, orders: Sequence[str] | None = None) -> dict[str, Tensor]:
    """For each curve order: distances (in ``coord`` units) from every point to its predecessor along the
    curve, the first point of each sample left out (the step RelPos encodes, via ``relative_steps``).

    ``point`` needs ``grid_coord``; it is serialized with ``orders`` (no shuffling) unless ``orders`` is
    None and it already is.
    """
    if orders is not None or point.order is None:
        point.clear_cache()
        point.serialize(tuple(orders) if orders is not None else point.orders or DEFAULT_ORDERS)
    out: dict[str, Tensor] = {}
    for k, name in enumerate(point.orders):
        step, first = relative_steps(point, k)
        out[name] = torch.linalg.vector_norm(step.float(), dim=1)[~first]
    return out


def stage_distances(point: PointBatch, orders: Sequence[str], stages: int = 1) -> list[dict[str, Tensor]]:
    """Consecutive distances per order for stage 0 (``point``'s grid) and ``stages - 1`` coarser stages,
    each made by the network's grid pooling (2x2x2 cells, i.e. ``grid_coord >> 1``, mean coordinates)."""
    if stages < 1:
        raise ValueError(f"stages must be >= 1, got {stages}")
    if point.grid_coord is None:
        raise ValueError("stage_distances: the PointBatch needs grid_coord (build it with grid_size)")
    out = [consecutive_distances(point, orders)]
    for _ in range(stages - 1):
        point, _ = GridPooling.coarsen(point)  # serialized with the parent's orders
        out.append(consecutive_distances(point))
    return out


def summarize(values: np.ndarray, quantile: float | None = None, max_rel_dist: float | None = None) -> dict:
    """Percentiles (50/90/95/99), mean, max, count; the ``quantile`` value and the fraction of distances
    above ``max_rel_dist`` when given."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {"count": 0}
    pct = np.percentile(values, PERCENTILES)
    out = {"count": int(values.size), "mean": float(values.mean()), "max": float(values.max())}
    out.update({f"p{p}": float(v) for p, v in zip(PERCENTILES, pct)})
    if quantile is not None:
        out["quantile"] = float(quantile)
        out["quantile_value"] = float(np.quantile(values, quantile))
    if max_rel_dist is not None:
        out["max_rel_dist"] = float(max_rel_dist)
        out["frac_above_max_rel_dist"] = float((values > max_rel_dist).mean())
    return out
