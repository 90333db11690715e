"""The z-order (Morton) curve: interleave the bits of x, y, z (x most significant in each octant digit).

Leading zero bits leave the code unchanged, so a point's z-order code does not depend on the depth.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._bits import demorton3, morton3


def z_encode(grid_coord: Tensor, depth: int) -> Tensor:  # noqa: ARG001 - depth-independent by design
    """Z-order codes (N,) int64 of validated int64 grid coordinates (N, 3) in [0, 2^depth)."""
    x, y, z = grid_coord.unbind(1)
    return morton3(x, y, z)


def z_decode(code: Tensor, depth: int) -> Tensor:  # noqa: ARG001
    """Grid coordinates (N, 3) int64 of z-order codes (N,) int64 below 8^depth."""
    return torch.stack(demorton3(code), 1)
