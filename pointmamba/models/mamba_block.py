"""Pre-norm bidirectional Mamba block with per-sample DropPath, over one serialization order."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ..point.sequence import Routes, routes
from .bimamba import BiMamba

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["DropPath", "MambaBlock", "mixer_routes"]


class DropPath(nn.Module):
    """Stochastic depth per sample of a packed batch: drops a sample's whole residual branch."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"DropPath: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor, batch: Tensor, num_samples: int) -> Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = (torch.rand(num_samples, device=x.device) >= self.p).to(x.dtype) / (1.0 - self.p)
        return x * keep[batch].unsqueeze(1)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class MambaBlock(nn.Module):
    """``feat + DropPath(BiMamba(LayerNorm(feat)))`` with the mixer run along order ``k``.

    ``forward(feat (N, C) in row order, point, k)``: rows go to curve order with ``order[k]``, back with
    ``inverse[k]``; the mixer never crosses samples (it gets the per-sample lengths).
    """

    def __init__(self, channels: int, d_state: int = 16, d_conv: int = 4, expand: float = 2,
                 combine: str = "sum", share_params: bool = False, drop_path: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.mixer = BiMamba(channels, d_state=d_state, d_conv=d_conv, expand=expand, combine=combine,
                             share_params=share_params)
        self.drop_path = DropPath(drop_path)

    def forward(self, feat: Tensor, point: PointBatch, k: int) -> Tensor:
        # rows go straight from row order into each direction's padded sequences and back (gathers that
        # fold in order[k], the reversal and the padding): the same values as reordering with order[k] and
        # inverse[k] around the packed mixer, with fewer copies and no scatter in the backward
        y = self.mixer.mix_rows(self.norm(feat), mixer_routes(point, k))
        return feat + self.drop_path(y, point.batch, point.num_samples)


def mixer_routes(point: PointBatch, k: int) -> Routes:
    """The mixer's :class:`~pointmamba.point.sequence.Routes` along order ``k``, cached in ``point.cache`` per
    ``point.order`` tensor (every block at one resolution using order k shares them)."""
    holder = point.cache.get("mixer_routes")
    if holder is None or holder[0] is not point.order:  # re-serialized: stale
        holder = point.cache["mixer_routes"] = (point.order, {})
    if k not in holder[1]:
        holder[1][k] = routes(point.order[k], point.lengths)
    return holder[1][k]
