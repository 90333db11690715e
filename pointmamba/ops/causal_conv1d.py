"""Causal depthwise conv1d behind one function: causal-conv1d's CUDA kernel where it imports, our numba
kernel (``conv_kernel.py``) elsewhere.

Output position t sees inputs t-W+1 .. t of its own channel only (zero history before t = 0).
"""
from __future__ import annotations

import logging
from typing import Callable

import torch
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
            log.debug("causal_conv1d unavailable (%s: %s); using the CPU kernel", type(exc).__name__, exc)
            causal_conv1d_fn = None
        _cuda_fn = causal_conv1d_fn
    return _cuda_fn  # type: ignore[return-value]


def conv_backend(tensor: Tensor) -> str:
    """The backend ``causal_conv1d`` uses for inputs living where ``tensor`` lives: "causal_conv1d" or "cpu"."""
    if tensor.is_cuda and _causal_conv1d_cuda_fn() is not None:
        return "causal_conv1d"
    return "cpu"


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
        # The Mamba block passes a channel-last view; causal-conv1d would take it on its channel-last path,
        # which no machine here could test. A copy to its standard (batch, dim, L) layout is cheap on a GPU.
        return _causal_conv1d_cuda_fn()(x.contiguous(), weight, bias, activation)  # type: ignore[misc]
    return _causal_conv1d_cpu(x, weight, bias, activation is not None)


def _causal_conv1d_cpu(x: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:
    """Our numba kernel (``conv_kernel.py``), time-major: the result is a (batch, dim, L) view of
    (batch, L, dim) memory, which the Mamba block's projections and the scan kernel read without copies.
    float32 math (float64 when x or weight is float64); CUDA inputs are computed on the CPU."""
    from .conv_kernel import CausalConv1dCPU  # numba is imported on first use only

    cdt = torch.float64 if torch.float64 in (x.dtype, weight.dtype) else torch.float32
    cpu = torch.device("cpu")
    x_t = x.to(device=cpu, dtype=cdt).transpose(1, 2).contiguous()
    w = weight.to(device=cpu, dtype=cdt).contiguous()
    b = bias.to(device=cpu, dtype=cdt) if bias is not None else w.new_zeros(w.shape[0])
    out = CausalConv1dCPU.apply(x_t, w, b.contiguous(), silu)
    return out.transpose(1, 2).to(device=x.device, dtype=x.dtype)
