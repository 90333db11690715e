"""Causal depthwise conv1d behind one function: causal-conv1d's CUDA kernel where it imports, torch elsewhere.

Output position t sees inputs t-W+1 .. t of its own channel only (zero history before t = 0).
"""
from __future__ import annotations

import logging
from typing import Callable

import torch.nn.functional as F
from torch import Tensor

log = logging.getLogger(__name__)

_UNSET = object()
_cuda_fn: object = _UNSET
_logged: set[str] = set()
_ACTIVATIONS = (None, "silu", "swish")


def _causal_conv1d_cuda_fn() -> Callable | None:
    """causal-conv1d's ``causal_conv1d_fn``, or None where it cannot be imported (no CUDA build, no GPU)."""
    global _cuda_fn
    if _cuda_fn is _UNSET:
        try:
            from causal_conv1d import causal_conv1d_fn
        except Exception as exc:  # noqa: BLE001 - ImportError, OSError (missing libcudart), RuntimeError ...
            log.debug("causal_conv1d unavailable (%s: %s); using torch's conv1d", type(exc).__name__, exc)
            causal_conv1d_fn = None
        _cuda_fn = causal_conv1d_fn
    return _cuda_fn  # type: ignore[return-value]


def conv_backend(tensor: Tensor) -> str:
    """The backend ``causal_conv1d`` uses for inputs living where ``tensor`` lives: "causal_conv1d" or "torch"."""
    if tensor.is_cuda and _causal_conv1d_cuda_fn() is not None:
        return "causal_conv1d"
    return "torch"


def causal_conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    """Depthwise causal conv: x (batch, dim, L), weight (dim, W), bias (dim,), activation None or "silu"."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"causal_conv1d: activation must be None, 'silu' or 'swish', got {activation!r}")
    if x.dim() != 3 or weight.dim() != 2 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"causal_conv1d: expected x (batch, dim, L) and weight (dim, W), got x {tuple(x.shape)} "
                         f"and weight {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"causal_conv1d: bias must be (dim={x.shape[1]},), got {tuple(bias.shape)}")
    backend = conv_backend(x)
    if backend not in _logged:
        _logged.add(backend)
        log.debug("causal_conv1d: %s backend (inputs on %s)", backend, x.device)
    if backend == "causal_conv1d":
        return _causal_conv1d_cuda_fn()(x, weight, bias, activation)  # type: ignore[misc]
    dim, width = weight.shape
    if x.shape[-1] == 0:  # conv1d refuses an input shorter than its kernel; keep the graph connected
        return x * weight[:, :1]
    # Shifted multiply-adds instead of a grouped F.conv1d: torch's CPU backward of depthwise conv1d took
    # 0.35 s at (1, 128, 16k), a third of a training step; these elementwise terms cost a fraction of that.
    # Computed channel-last: the result is a (batch, dim, L) view of time-major memory, which is what the
    # Mamba block's projections and the CPU scan kernel read without copies.
    length = x.shape[-1]
    padded = F.pad(x.transpose(1, 2), (0, 0, width - 1, 0))  # (batch, W - 1 + L, dim)
    out = padded[:, :length] * weight[:, 0]
    for k in range(1, width):
        out = out + padded[:, k:k + length] * weight[:, k]
    if bias is not None:
        out = out + bias
    out = out.transpose(1, 2)
    return F.silu(out) if activation is not None else out
