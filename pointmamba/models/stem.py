"""The stem: ``GELU(LayerNorm(SubMConv3d_5(feat)))`` lifting the input channels to the first stage's.

LayerNorm rather than BatchNorm keeps a scan's output independent of its batch mates in training as well
as eval. The network holds it as ``cpe_stem`` (the weight names of every checkpoint).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

from ..ops.submconv import SubMConv3d

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["Stem"]


class Stem(nn.Module):
    """``forward(feat (N, Cin), point) -> (N, C)``."""

    def __init__(self, in_channels: int, channels: int, kernel_size: int = 5) -> None:
        super().__init__()
        self.conv = SubMConv3d(in_channels, channels, kernel_size, bias=False)
        self.norm = nn.LayerNorm(channels)
        self.act = nn.GELU()

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        return self.act(self.norm(self.conv(feat, point)))
