"""Bit helpers shared by the curves: 3-way bit interleaving (Morton codes) on int64 tensors.

A Morton code holds, for every level i, the octant digit ``x_i << 2 | y_i << 1 | z_i`` at bits
``3i .. 3i+2`` (x most significant, as Pointcept's z-order). Magic-number spreading handles up to 21 bits
per axis; we use at most 16.
"""
from __future__ import annotations

import torch
from torch import Tensor

# masks of the classic "part1by2" spreading for 21-bit inputs (the << 32 step is skipped: inputs < 2^16
# have no bits that it would move).
_M16 = 0x001F0000FF0000FF
_M8 = 0x100F00F00F00F00F
_M4 = 0x10C30C30C30C30C3
_M2 = 0x1249249249249249
_M32 = 0x001F00000000FFFF
_LOW21 = 0x1FFFFF


def spread3(x: Tensor) -> Tensor:
    """Insert two zero bits between the bits of ``x`` (int64, values < 2^16): bit i -> bit 3i."""
    # in place on two buffers: on CPU these ops are memory bound, fresh outputs would double the traffic
    y = x << 16
    y |= x
    y &= _M16
    t = torch.empty_like(y)
    for shift, mask in ((8, _M8), (4, _M4), (2, _M2)):
        torch.bitwise_left_shift(y, shift, out=t)
        y |= t
        y &= mask
    return y


def compact3(m: Tensor) -> Tensor:
    """Inverse of :func:`spread3`: gather bits 0, 3, 6, ... of ``m`` (int64) into consecutive bits."""
    x = m & _M2
    t = torch.empty_like(x)
    for shift, mask in ((2, _M4), (4, _M8), (8, _M16), (16, _M32), (32, _LOW21)):
        torch.bitwise_right_shift(x, shift, out=t)
        x |= t
        x &= mask
    return x


def morton3(x: Tensor, y: Tensor, z: Tensor) -> Tensor:
    """Interleave three int64 coordinate tensors (each < 2^16) into one Morton code, x most significant."""
    m = spread3(x)
    m <<= 1
    m |= spread3(y)
    m <<= 1
    m |= spread3(z)
    return m


def demorton3(m: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Split a Morton code back into its (x, y, z) coordinates."""
    return compact3(m >> 2), compact3(m >> 1), compact3(m)
