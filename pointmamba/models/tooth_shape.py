"""ToothShapeNet: a tooth's position (1..8) from a crop of its surface alone (a PointNet).

Input (B, N, 6): points and normals in the tooth's own frame (see
:mod:`pointmamba.evaluation.tooth_shape`), and whether the tooth is in the upper jaw (B,). A shared
per-point MLP, max and mean pooling (order-free), the jaw, then a small head: 8 logits, and with
``no_tooth`` a ninth: the crop is no tooth at all (a patch of bare ridge where a tooth was, on which the
segmentation network can invent one).
"""
from __future__ import annotations

import torch
from torch import nn


class ToothShapeNet(nn.Module):
    """Position logits (B, 8) of tooth crops (B, N, 6) and jaw flags (B,) (1 upper, 0 lower); (B, 9) with
    ``no_tooth``, the last logit that of "no tooth"."""

    def __init__(self, width: int = 64, n_points: int = 256, num_positions: int = 8, no_tooth: bool = False) -> None:
        super().__init__()
        self.width, self.n_points, self.no_tooth = int(width), int(n_points), bool(no_tooth)
        w = self.width
        self.point_mlp = nn.Sequential(
            nn.Linear(6, w), nn.LayerNorm(w), nn.GELU(),
            nn.Linear(w, 2 * w), nn.LayerNorm(2 * w), nn.GELU(),
            nn.Linear(2 * w, 4 * w), nn.LayerNorm(4 * w), nn.GELU(),
        )
        self.head = nn.Sequential(
            nn.Linear(8 * w + 1, 2 * w), nn.LayerNorm(2 * w), nn.GELU(), nn.Dropout(0.2),
            nn.Linear(2 * w, num_positions + int(self.no_tooth)),
        )

    def forward(self, crops: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
        if crops.ndim != 3 or crops.shape[-1] != 6:
            raise ValueError(f"ToothShapeNet: crops must be (B, N, 6), got {tuple(crops.shape)}")
        f = self.point_mlp(crops)
        pooled = torch.cat([f.amax(1), f.mean(1), upper.to(f.dtype)[:, None]], dim=1)
        return self.head(pooled)
