"""Grid pooling (2x2x2 parent cells via the serialized code) and unpooling with a skip connection.

Pooling follows PTv3's SerializedPooling: ``code >> 3`` of a curve code is the code of the point's
parent cell, so ``unique(code[0] >> 3)`` groups the 2x2x2 cells (samples never merge: the batch index
sits in the high bits). Features are projected, then reduced (max or mean) per cell; coordinates are
averaged; the pooled points get ``grid_coord >> 1`` and are re-serialized with the parent's orders.
Unpooling follows PTv3's SerializedUnpooling: ``proj_skip(skip) + proj(coarse)[cluster]``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..point.reductions import segment_reduce
from ..point.batch import PointBatch

__all__ = ["GridPooling", "GridUnpooling", "POOL_REDUCTIONS"]

POOL_REDUCTIONS = ("max", "mean")


def _proj(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_channels, out_channels), nn.LayerNorm(out_channels), nn.GELU())


class GridPooling(nn.Module):
    """``forward(feat, point) -> (coarse feat, coarse PointBatch, cluster (N,) fine row -> coarse row)``."""

    def __init__(self, in_channels: int, out_channels: int, reduce: str = "max") -> None:
        super().__init__()
        if reduce not in POOL_REDUCTIONS:
            raise ValueError(f"GridPooling: reduce must be one of {POOL_REDUCTIONS}, got {reduce!r}")
        self.reduce = reduce
        self.proj = nn.Linear(in_channels, out_channels)
        self.norm = nn.LayerNorm(out_channels)
        self.act = nn.GELU()

    @staticmethod
    def coarsen(point: PointBatch) -> tuple[PointBatch, Tensor]:
        """The parent-cell PointBatch (serialized, feat = coord placeholder) and the cluster map."""
        if point.code is None:
            raise ValueError("GridPooling: the PointBatch must be serialized first")
        parent, cluster = torch.unique(point.code[0] >> 3, sorted=True, return_inverse=True)
        m = len(parent)
        head = torch.empty(m, dtype=torch.long, device=cluster.device)
        head[cluster] = torch.arange(len(cluster), device=cluster.device)  # any row of each cell
        coord = segment_reduce(point.coord, cluster, m, "mean")
        batch = point.batch[head]
        offset = torch.cumsum(torch.bincount(batch, minlength=point.num_samples), 0)
        grid_size = point.grid_size * 2 if point.grid_size is not None else None
        coarse = PointBatch(coord, coord, offset=offset, grid_size=grid_size, grid_coord=point.grid_coord[head] >> 1)
        coarse.serialize(point.orders, depth=None)
        return coarse, cluster

    def forward(self, feat: Tensor, point: PointBatch) -> tuple[Tensor, PointBatch, Tensor]:
        coarse, cluster = self.coarsen(point)
        pooled = segment_reduce(self.proj(feat), cluster, len(coarse), self.reduce)
        return self.act(self.norm(pooled)), coarse, cluster


class GridUnpooling(nn.Module):
    """``forward(coarse feat (M, Cin), skip feat (N, Cskip), cluster (N,)) -> (N, Cout)``."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int) -> None:
        super().__init__()
        self.proj = _proj(in_channels, out_channels)
        self.proj_skip = _proj(skip_channels, out_channels)

    def forward(self, feat: Tensor, skip: Tensor, cluster: Tensor) -> Tensor:
        return self.proj_skip(skip) + self.proj(feat).index_select(0, cluster)
