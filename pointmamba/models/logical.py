"""Logical (causal-mask) position encoding: windowed causal self-attention along the serialized sequence.

No coordinates enter: position comes only from the upper-triangular mask, which lets the point at window
position i average over exactly i + 1 points, so what it sees depends on where it sits. Each sample's
sequence along the stage's first curve order is cut into windows of ``window`` points starting at the
sample's first point (cost linear in the number of points; a scan's windows do not depend on its batch
mates); inside a window a point attends to itself and the points before it. Output:
``feat + LayerNorm(Linear(attention))``. Padding sits after every valid point of its sample, so the causal
mask already keeps it out of every valid point's keys.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn
from torch.nn import functional as F

from ..point.sequence import pack_to_padded, padded_to_pack

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["LogicalPosition"]


class LogicalPosition(nn.Module):
    """``forward(feat (N, C), point) -> (N, C)``: adds the LayerNorm'ed causal windowed attention of order 0."""

    def __init__(self, channels: int, window: int = 64) -> None:
        super().__init__()
        if int(window) != window or window < 1:
            raise ValueError(f"logical.window must be a positive integer, got {window!r}")
        self.window = int(window)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.out = nn.Linear(channels, channels)
        self.norm = nn.LayerNorm(channels)

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        x, mask = pack_to_padded(feat.index_select(0, point.order[0]), point.lengths)  # (B, L, C)
        b, length, c = x.shape
        w = min(self.window, length)  # one window holds every sample when L <= window: same windows either way
        pad = -length % w
        x = F.pad(x, (0, 0, 0, pad))
        q, k, v = self.qkv(x).view(-1, w, 3, c).unbind(2)  # each (B * windows, w, C)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # mask: key index <= query index
        y = padded_to_pack(y.reshape(b, length + pad, c)[:, :length], mask)
        return feat + self.norm(self.out(y)).index_select(0, point.inverse[0])

    def extra_repr(self) -> str:
        return f"window={self.window}"
