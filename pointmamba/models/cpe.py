"""Conditional positional encoding (CPE, PTv3's) on the submanifold sparse conv.

``feat + LayerNorm(Linear(SubMConv3d_k(feat)))``. LayerNorm rather than BatchNorm keeps a scan's output
independent of its batch mates in training as well as eval.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

from ..ops.submconv import SubMConv3d

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["CPE"]


class CPE(nn.Module):
    """``forward(feat (N, C), point) -> (N, C)``, residual."""

    def __init__(self, channels: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.conv = SubMConv3d(channels, channels, kernel_size, bias=True)
        self.linear = nn.Linear(channels, channels)
        self.norm = nn.LayerNorm(channels)

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        return feat + self.norm(self.linear(self.conv(feat, point)))
