"""Conditional positional encoding (CPE) and the stem, both on the submanifold sparse conv.

CPE (PTv3's): ``feat + LayerNorm(Linear(SubMConv3d_k(feat)))``. Stem: ``GELU(LayerNorm(SubMConv3d_5(feat)))``
lifting the input channels. LayerNorm rather than BatchNorm keeps a scan's output independent of its
batch mates in training as well as eval.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..ops.sparse_conv import SubMConv3d

__all__ = ["CPE", "Stem"]


class CPE(nn.Module):
    """``forward(feat (N, C), point) -> (N, C)``, residual."""

    def __init__(self, channels: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.conv = SubMConv3d(channels, channels, kernel_size, bias=True)
        self.linear = nn.Linear(channels, channels)
        self.norm = nn.LayerNorm(channels)

    def forward(self, feat: Tensor, point: Any) -> Tensor:
        return feat + self.norm(self.linear(self.conv(feat, point)))


class Stem(nn.Module):
    """``forward(feat (N, Cin), point) -> (N, C)``."""

    def __init__(self, in_channels: int, channels: int, kernel_size: int = 5) -> None:
        super().__init__()
        self.conv = SubMConv3d(in_channels, channels, kernel_size, bias=False)
        self.norm = nn.LayerNorm(channels)
        self.act = nn.GELU()

    def forward(self, feat: Tensor, point: Any) -> Tensor:
        return self.act(self.norm(self.conv(feat, point)))
