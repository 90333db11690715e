"""Pre-norm bidirectional Mamba block with per-sample DropPath, over one serialization order."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from .bimamba import BiMamba

if TYPE_CHECKING:
    from ..structure import PointBatch

__all__ = ["DropPath", "MambaBlock"]


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
        h = self.norm(feat).index_select(0, point.order[k])
        y = self.mixer(h, point.lengths).index_select(0, point.inverse[k])
        return feat + self.drop_path(y, point.batch, point.num_samples)
