"""The z-order (Morton) curve: interleave the bits of x, y, z (x most significant in each octant digit).

A point's z-order code is its Morton code (``_bits.morton3``, which the serialization computes once for
z-order and Hilbert alike). Leading zero bits leave the code unchanged, so a point's z-order code does not
depend on the depth.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._bits import demorton3


def z_decode(code: Tensor, depth: int) -> Tensor:  # noqa: ARG001
    """Grid coordinates (N, 3) int64 of z-order codes (N,) int64 below 8^depth."""
    return torch.stack(demorton3(code), 1)
