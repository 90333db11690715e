"""A submanifold conv computed densely with ``F.conv3d``: the reference our sparse conv is tested against."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def dense_conv3d(feat: torch.Tensor, grid: torch.Tensor, batch: torch.Tensor, weight: torch.Tensor,
                 bias: torch.Tensor | None, shape: Sequence[int]) -> torch.Tensor:
    """Rows ``feat`` at voxels ``grid`` (N, 3) of samples ``batch`` scattered into a dense (X, Y, Z) =
    ``shape`` grid, convolved with ``weight`` (Cout, k, k, k, Cin; spconv's layout) and ``bias`` (zero
    padding), read back at the same voxels: (N, Cout)."""
    num, cin = int(batch.max()) + 1, feat.shape[1]
    dense = feat.new_zeros(num, *shape, cin)
    dense = dense.index_put((batch, grid[:, 0], grid[:, 1], grid[:, 2]), feat)
    w = weight.permute(0, 4, 1, 2, 3)  # (Cout, kx, ky, kz, Cin) -> conv3d's (Cout, Cin, kx, ky, kz)
    out = F.conv3d(dense.permute(0, 4, 1, 2, 3), w, bias, padding=weight.shape[1] // 2)
    return out.permute(0, 2, 3, 4, 1)[batch, grid[:, 0], grid[:, 1], grid[:, 2]]
