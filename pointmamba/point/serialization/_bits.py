"""Bit helpers shared by the curves: 3-way bit interleaving (Morton codes) on int64 tensors.

A Morton code holds, for every level i, the octant digit ``x_i << 2 | y_i << 1 | z_i`` at bits
``3i .. 3i+2`` (x most significant, as Pointcept's z-order). Coordinates have at most 16 bits
(``MAX_DEPTH``), so spreading is one lookup in a table of all 2^16 spread values (512 KiB, built once per
device by magic-number spreading): one op where the bit tricks took thirteen, which on CUDA are thirteen
kernel launches, and the recipe's step is bound by launches (``docs/results/gpu/README.md``).
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


SPREAD_BITS = 16  # bits per coordinate that :func:`spread3` takes
_spread_tables: dict[torch.device, Tensor] = {}


def spread3(x: Tensor) -> Tensor:
    """Insert two zero bits between the bits of ``x`` (int64, values in [0, 2^16), as the serialization
    checks): bit i -> bit 3i. A value outside that range is an IndexError (CPU) or a device assert (CUDA)."""
    table = _spread_tables.get(x.device)
    if table is None:
        table = _spread_tables[x.device] = _spread_bits(torch.arange(1 << SPREAD_BITS, dtype=torch.int64)).to(x.device)
    return table.index_select(0, x.reshape(-1)).view(x.shape)


def _spread_bits(x: Tensor) -> Tensor:
    """:func:`spread3` by magic numbers (valid up to 21 bits): how its table is built."""
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
