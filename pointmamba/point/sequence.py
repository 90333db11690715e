"""Packed points <-> per-sample padded sequences (B, Lmax, C), as the Mamba mixer needs them.

Packed rows must be grouped by sample (sample 0 first), which holds for a serialized order because the
batch index sits in the high bits of every curve code. Padding is on the right of each sample.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def padded_index(lengths: Tensor, total: int | None = None) -> tuple[Tensor, Tensor, int]:
    """Flat position in a (B*Lmax) grid of every packed row, the (B, Lmax) validity mask, and Lmax.
    ``total``: the number of rows where the caller knows it (on CUDA, reading the sum waits for the queue)."""
    lengths = lengths.long()
    num = len(lengths)
    lmax = int(lengths.max()) if num else 0
    total = int(lengths.sum()) if total is None else total
    starts = torch.cumsum(lengths, 0) - lengths
    batch = torch.repeat_interleave(torch.arange(num, device=lengths.device), lengths, output_size=total)
    pos = torch.arange(total, device=lengths.device) - starts[batch]
    mask = torch.arange(lmax, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
    return batch * lmax + pos, mask, lmax


def pack_to_padded(x: Tensor, lengths: Tensor, pad_value: float = 0.0) -> tuple[Tensor, Tensor]:
    """Packed (N, C) grouped by sample -> padded (B, Lmax, C) and its mask (B, Lmax)."""
    if int(lengths.sum()) != x.shape[0]:
        raise ValueError(f"pack_to_padded: lengths sum to {int(lengths.sum())} but x has {x.shape[0]} rows")
    flat, mask, lmax = padded_index(lengths)
    if len(lengths) * lmax == x.shape[0]:  # equal lengths (e.g. one sample): the padded form is a view
        return x.view(len(lengths), lmax, *x.shape[1:]), mask
    out = x.new_full((len(lengths) * lmax,) + tuple(x.shape[1:]), pad_value)
    out = out.index_copy(0, flat, x)
    return out.view(len(lengths), lmax, *x.shape[1:]), mask


def padded_to_pack(y: Tensor, mask: Tensor) -> Tensor:
    """Padded (B, Lmax, C) -> packed (N, C), keeping only rows where ``mask`` is true."""
    if bool(mask.all()):  # nothing padded: a view
        return y.reshape(-1, *y.shape[2:])
    return y[mask]


def reverse_index(lengths: Tensor, total: int | None = None) -> Tensor:
    """Permutation of packed rows that reverses each sample's valid part (an involution); ``total`` as in
    :func:`padded_index`."""
    lengths = lengths.long()
    total = int(lengths.sum()) if total is None else total
    ends = torch.cumsum(lengths, 0)
    starts = ends - lengths
    batch = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths, output_size=total)
    pos = torch.arange(total, device=lengths.device)
    return starts[batch] + ends[batch] - 1 - pos


@dataclass
class Routes:
    """How rows in row order reach the padded (B, Lmax) layout of the bidirectional mixer and come back,
    for one curve order: a gather each way, no scatter.

    ``into[d]`` (B * Lmax,): the row feeding each padded position in direction d (0: along the curve, 1:
    reversed within each sample); positions in ``pad`` hold no row (their gathered row is zeroed).
    ``back[d]`` (N,): the padded position of each row in direction d.
    """

    into: tuple[Tensor, Tensor]
    back: tuple[Tensor, Tensor]
    pad: Tensor
    batch: int
    lmax: int


def routes(order: Tensor, lengths: Tensor) -> Routes:
    """:class:`Routes` for rows visited in ``order`` (curve position -> row, grouped by sample with
    ``lengths`` rows each)."""
    n = order.numel()  # the rows' count from the shape: no read back (see padded_index)
    flat, mask, lmax = padded_index(lengths, n)
    size = len(lengths) * lmax
    into, back = [], []
    for rows in (order, order[reverse_index(lengths, n)]):  # curve order; reversed within each sample
        src = torch.zeros(size, dtype=torch.long, device=order.device)
        src[flat] = rows
        dst = torch.empty_like(rows)
        dst[rows] = flat
        into.append(src)
        back.append(dst)
    # the padded positions: their count is known, so a static-size nonzero that reads nothing back
    pad = torch.nonzero_static((~mask).reshape(-1), size=size - n).squeeze(1)
    return Routes((into[0], into[1]), (back[0], back[1]), pad, len(lengths), lmax)


class _Route(torch.autograd.Function):
    """``out = x[gather]`` with rows ``zero_out`` zeroed, where every row of x that matters feeds exactly one
    kept row of out, at ``back[row]``: the gradient is then a gather too, ``grad[back]`` (rows
    ``zero_grad`` zeroed), exactly what index_select's scatter-add backward gives, without the scatter."""

    @staticmethod
    def forward(ctx, x: Tensor, gather: Tensor, back: Tensor, zero_out: Tensor | None,  # noqa: ANN001
                zero_grad: Tensor | None) -> Tensor:
        out = x.index_select(0, gather)
        if zero_out is not None and zero_out.numel():
            out.index_fill_(0, zero_out, 0)
        ctx.save_for_backward(back)
        ctx.zero_grad = zero_grad
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, None, None, None, None]:  # noqa: ANN001
        (back,) = ctx.saved_tensors
        out = grad.contiguous().index_select(0, back)
        if ctx.zero_grad is not None and ctx.zero_grad.numel():
            out.index_fill_(0, ctx.zero_grad, 0)
        return out, None, None, None, None


def to_padded(x: Tensor, r: Routes, direction: int) -> Tensor:
    """Rows (N, C) in row order -> (B, Lmax, C) sequences of ``direction``, zero padded on the right."""
    out = _Route.apply(x, r.into[direction], r.back[direction], r.pad, None)
    return out.view(r.batch, r.lmax, *x.shape[1:])


def from_padded(y: Tensor, r: Routes, direction: int) -> Tensor:
    """(B, Lmax, C) outputs of ``direction`` -> rows (N, C) in row order (padded positions dropped)."""
    flat = y.reshape(r.batch * r.lmax, *y.shape[2:])
    return _Route.apply(flat, r.back[direction], r.into[direction], None, r.pad)
