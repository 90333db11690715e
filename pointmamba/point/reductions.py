"""Segment reductions (per-sample or per-voxel sums, means, maxima) on torch-native ops.

torch-scatter has no CPU wheel on our registry and torch's own ``scatter_reduce`` / ``index_add_`` are
as fast on CPU, so these are the only implementation. Segments are given by an index per row.
"""
from __future__ import annotations

import torch
from torch import Tensor

REDUCTIONS = ("sum", "mean", "max", "min")


def offset2lengths(offset: Tensor) -> Tensor:
    """Cumulative end indices ``offset`` (B,) -> per-sample lengths (B,)."""
    return torch.diff(offset, prepend=offset.new_zeros(1))


def offset2batch(offset: Tensor) -> Tensor:
    """Cumulative end indices (B,) -> batch index per point (N,)."""
    lengths = offset2lengths(offset)
    return torch.repeat_interleave(torch.arange(len(offset), device=offset.device), lengths)


def batch2offset(batch: Tensor, num_samples: int | None = None) -> Tensor:
    """Sorted batch index per point (N,) -> cumulative end indices (B,)."""
    if num_samples is None:
        num_samples = int(batch.max()) + 1 if batch.numel() else 0
    return torch.cumsum(torch.bincount(batch, minlength=num_samples), 0)


def segment_reduce(x: Tensor, index: Tensor, num_segments: int, reduce: str = "mean") -> Tensor:
    """Reduce rows of ``x`` (N, ...) that share ``index`` (N,) into (num_segments, ...).

    Empty segments give 0 for every reduction. ``max``/``min`` propagate gradients to the arg-extremum
    rows (ties share the gradient equally, as torch's ``scatter_reduce`` does).
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"segment_reduce: reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if index.dim() != 1 or index.shape[0] != x.shape[0]:
        raise ValueError(
            f"segment_reduce: index must be 1-D with one entry per row of x, got index {tuple(index.shape)} "
            f"for x {tuple(x.shape)}"
        )
    out_shape = (num_segments,) + tuple(x.shape[1:])
    idx = index.view(-1, *([1] * (x.dim() - 1))).expand_as(x)
    if reduce == "sum":
        return x.new_zeros(out_shape).index_add_(0, index, x)
    if reduce == "mean":
        total = x.new_zeros(out_shape).index_add_(0, index, x)
        count = torch.bincount(index, minlength=num_segments).clamp_min(1).to(x.dtype)
        return total / count.view(-1, *([1] * (x.dim() - 1)))
    torch_reduce = "amax" if reduce == "max" else "amin"
    return x.new_zeros(out_shape).scatter_reduce(0, idx, x, reduce=torch_reduce, include_self=False)
