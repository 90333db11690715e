"""Packed points <-> per-sample padded sequences (B, Lmax, C), as the Mamba mixer needs them.

Packed rows must be grouped by sample (sample 0 first), which holds for a serialized order because the
batch index sits in the high bits of every curve code. Padding is on the right of each sample.
"""
from __future__ import annotations

import torch
from torch import Tensor


def padded_index(lengths: Tensor) -> tuple[Tensor, Tensor, int]:
    """Flat position in a (B*Lmax) grid of every packed row, the (B, Lmax) validity mask, and Lmax."""
    lengths = lengths.long()
    num = len(lengths)
    lmax = int(lengths.max()) if num else 0
    starts = torch.cumsum(lengths, 0) - lengths
    batch = torch.repeat_interleave(torch.arange(num, device=lengths.device), lengths)
    pos = torch.arange(int(lengths.sum()), device=lengths.device) - starts[batch]
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


def reverse_index(lengths: Tensor) -> Tensor:
    """Permutation of packed rows that reverses each sample's valid part (an involution)."""
    lengths = lengths.long()
    ends = torch.cumsum(lengths, 0)
    starts = ends - lengths
    batch = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
    pos = torch.arange(int(lengths.sum()), device=lengths.device)
    return starts[batch] + ends[batch] - 1 - pos
