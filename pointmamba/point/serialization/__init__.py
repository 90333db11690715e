"""Space-filling-curve serialization of voxel grid coordinates (z-order, Hilbert, and "-trans" variants).

``code = batch << (3 * depth) | curve_code``: the batch index sits in the high bits, so sorting the codes
keeps every sample's points together. ``-trans`` orders swap x and y before encoding (and back in
``decode``). Both curves are depth consistent: a point's curve code does not depend on ``depth`` (only the
batch shift does), so a scan's point order is the same whatever depth its batch needed.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..curve_orders import ORDERS
from ._bits import morton3
from .hilbert import hilbert_decode, hilbert_from_morton
from .zorder import z_decode

MAX_DEPTH = 16
CODE_BITS = 63  # int64 without the sign bit

_DECODERS = {"z": z_decode, "hilbert": hilbert_decode}
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64)

__all__ = ["ORDERS", "MAX_DEPTH", "encode", "encode_orders", "decode", "adaptive_depth"]


def _check_order(order: str) -> tuple[str, bool]:
    if order not in ORDERS:
        raise ValueError(f"serialization: unknown order {order!r}; valid orders: {ORDERS}")
    trans = order.endswith("-trans")
    return order.removesuffix("-trans"), trans


def _check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise ValueError(f"serialization: depth must be an int in [1, {MAX_DEPTH}], got {depth!r}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"serialization: depth must be in [1, {MAX_DEPTH}] (3 bits per level in int64), got {depth}")
    return depth


def _as_int_tensor(x: object, name: str) -> Tensor:
    x = torch.as_tensor(x)
    if x.dtype not in _INT_DTYPES:
        raise ValueError(f"serialization: {name} must have an integer dtype, got {x.dtype}")
    return x.long()


def adaptive_depth(grid_coord: Tensor) -> int:
    """Smallest depth (>= 1) whose 2^depth cells hold the largest grid coordinate."""
    return _depth_for(int(grid_coord.max()) if grid_coord.numel() else 0)


def _depth_for(top: int) -> int:
    depth = max(1, top.bit_length())
    if depth > MAX_DEPTH:
        raise ValueError(
            f"serialization: largest grid coordinate {top} needs depth {depth} > {MAX_DEPTH}; use a coarser grid "
            f"(the points span {top + 1} cells where at most {2 ** MAX_DEPTH} fit: a scan in the wrong units?)"
        )
    return depth


def _check_batch_bits(batch_max: int, depth: int) -> None:
    bits = 3 * depth + batch_max.bit_length()
    if bits > CODE_BITS:
        raise ValueError(
            f"serialization: code needs {bits} bits (3 * depth {depth} + {batch_max.bit_length()} for batch "
            f"index {batch_max}) but int64 holds {CODE_BITS}; use a smaller depth or fewer samples"
        )


def _checked(grid_coord: Tensor, batch: Tensor | None, depth: int | None,
             num_samples: int | None) -> tuple[Tensor, Tensor | None, int]:
    """(grid_coord and batch as int64 on one device, the depth): every check of :func:`encode`, the values
    they need read back from the device once (on CUDA each read waits for every kernel queued before it)."""
    grid_coord = _as_int_tensor(grid_coord, "grid_coord")
    if grid_coord.dim() != 2 or grid_coord.shape[1] != 3:
        raise ValueError(f"serialization: grid_coord must be (N, 3), got {tuple(grid_coord.shape)}")
    n = grid_coord.shape[0]
    if batch is not None:
        batch = _as_int_tensor(batch, "batch").to(grid_coord.device)
        if batch.shape != (n,):
            raise ValueError(f"serialization: batch must be (N={n},), got {tuple(batch.shape)}")
    if n == 0:
        return grid_coord, batch, _check_depth(1 if depth is None else depth)
    ranges = [*torch.aminmax(grid_coord)]
    if batch is not None and num_samples is None:
        ranges += torch.aminmax(batch)
    lo, hi, *batch_range = torch.stack(ranges).tolist()
    b_lo, b_hi = batch_range or (0, (num_samples or 1) - 1)
    if lo < 0:
        rows = int((grid_coord < 0).any(1).sum())
        raise ValueError(
            f"serialization: grid_coord has {rows} row(s) with negative coordinates (min {lo}); "
            "grid coordinates must be >= 0 (PointBatch computes them from each sample's minimum corner)"
        )
    depth = _check_depth(_depth_for(hi) if depth is None else depth)
    if hi >= 1 << depth:
        raise ValueError(
            f"serialization: largest grid coordinate {hi} does not fit depth {depth} (must be < 2^{depth} = {1 << depth})"
        )
    if batch is not None:
        if b_lo < 0:
            raise ValueError(f"serialization: batch indices must be >= 0, got min {b_lo}")
        _check_batch_bits(b_hi, depth)
    return grid_coord, batch, depth


def _curve_codes(grid_coord: Tensor, batch: Tensor | None, depth: int, orders: Sequence[str]) -> list[Tensor]:
    """The codes of checked inputs, one per order. An order and its Hilbert or z-order sibling share one
    Morton code (z-order is the Morton code itself, Hilbert walks its digits), so the bits of a batch are
    interleaved at most twice, once per axis layout, however many orders it takes."""
    x, y, z = grid_coord.unbind(1)
    mortons: dict[bool, Tensor] = {}
    high = batch << (3 * depth) if batch is not None else None
    codes = []
    for order in orders:
        curve, trans = _check_order(order)
        if trans not in mortons:
            mortons[trans] = morton3(y, x, z) if trans else morton3(x, y, z)
        code = mortons[trans] if curve == "z" else hilbert_from_morton(mortons[trans], depth)
        codes.append(code if high is None else code | high)  # never in place: the Morton code is shared
    return codes


def encode(grid_coord: Tensor, batch: Tensor | None = None, depth: int | None = None, order: str = "z") -> Tensor:
    """Curve codes (N,) int64 of integer grid coordinates (N, 3) >= 0, with ``batch`` (N,) in the high bits.

    ``depth`` None picks the smallest depth holding the largest coordinate (see :func:`adaptive_depth`).
    """
    _check_order(order)
    grid_coord, batch, depth = _checked(grid_coord, batch, depth, None)
    return _curve_codes(grid_coord, batch, depth, (order,))[0]


def encode_orders(grid_coord: Tensor, batch: Tensor | None, orders: Sequence[str], depth: int | None = None,
                  num_samples: int | None = None) -> tuple[list[Tensor], int]:
    """(codes of each order, the depth used): :func:`encode` for several orders of one batch, checked once.
    ``num_samples``: the batch's sample count where the caller knows it (``PointBatch``: every sample
    non-empty, indices 0..num_samples - 1), so the batch's range needs no read.

    Why: a batch's four orders at four levels, each checked by :func:`encode`, read the device 16 times a
    forward pass; here once a level.
    """
    for order in orders:
        _check_order(order)
    grid_coord, batch, depth = _checked(grid_coord, batch, depth, num_samples)
    return _curve_codes(grid_coord, batch, depth, orders), depth


def decode(code: Tensor, depth: int, order: str = "z") -> tuple[Tensor, Tensor]:
    """Inverse of :func:`encode`: (grid_coord (N, 3) int64, batch (N,) int64) from codes (N,)."""
    curve, trans = _check_order(order)
    depth = _check_depth(depth)
    code = _as_int_tensor(code, "code")
    if code.dim() != 1:
        raise ValueError(f"serialization: code must be 1-D (N,), got {tuple(code.shape)}")
    if code.numel() and int(code.min()) < 0:
        raise ValueError("serialization: codes must be >= 0")
    curve_bits = 3 * depth
    batch = code >> curve_bits
    grid_coord = _DECODERS[curve](code & ((1 << curve_bits) - 1), depth)
    if trans:
        grid_coord = grid_coord[:, [1, 0, 2]]
    return grid_coord, batch
