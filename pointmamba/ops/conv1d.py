"""Causal depthwise conv1d behind one function. The backend is chosen by ``backend.choose("conv1d",
device)``: causal-conv1d's CUDA kernel where it imports, else our Triton kernels (``conv1d_triton.py``)
where Triton imports, else ``F.conv1d`` with left padding (torch, any device); on the CPU our numba kernel
(``conv_kernel.py``). All compute in float32 (float64 for float64 inputs, except Triton's) and return x's
dtype.

Output position t sees inputs t-W+1 .. t of its own channel only (zero history before t = 0).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from . import backend

_ACTIVATIONS = (None, "silu", "swish")


def conv1d_backend(tensor: Tensor) -> str:
    """The backend ``causal_conv1d`` uses for inputs living where ``tensor`` lives: "causal_conv1d",
    "triton", "torch" or "numba" (see ``backend.py``)."""
    return backend.choose("conv1d", tensor.device)


def causal_conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    """Depthwise causal conv: x (batch, dim, L), weight (dim, W), bias (dim,), activation None or "silu"."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"causal_conv1d: activation must be None, 'silu' or 'swish', got {activation!r}")
    if x.dim() != 3 or weight.dim() != 2 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"causal_conv1d: expected x (batch, dim, L) and weight (dim, W), got x {tuple(x.shape)} "
                         f"and weight {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"causal_conv1d: bias must be (dim={x.shape[1]},), got {tuple(bias.shape)}")
    chosen = conv1d_backend(x)
    if chosen == "causal_conv1d":
        # The Mamba block passes a channel-last view; causal-conv1d would take it on its channel-last path,
        # which no machine here could test. A copy to its standard (batch, dim, L) layout is cheap on a GPU.
        # activation by keyword: causal_conv1d_fn's 4th parameter is seq_idx (since causal-conv1d 1.2).
        return backend.extension("conv1d")(x.contiguous(), weight, bias, activation=activation)
    if chosen == "triton":
        from .conv1d_triton import causal_conv1d_triton  # triton is imported on first use only

        # float32 math in registers; x's dtype and layout kept (Triton's math stays float32 for float64)
        return causal_conv1d_triton(x, weight, bias, activation is not None)
    if chosen == "torch":
        return _causal_conv1d_torch(x, weight, bias, activation is not None)
    return _causal_conv1d_cpu(x, weight, bias, activation is not None)


def _compute_dtype(x: Tensor, weight: Tensor) -> torch.dtype:
    return torch.float64 if torch.float64 in (x.dtype, weight.dtype) else torch.float32


def _causal_conv1d_torch(x: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:
    """``F.conv1d`` with W-1 zeros on the left and one group per channel, on x's device (autocast off)."""
    cdt = _compute_dtype(x, weight)
    with torch.autocast(device_type=x.device.type, enabled=False):
        xc = x.to(cdt)
        if x.shape[-1] == 0:  # F.conv1d refuses an empty sequence
            return x.new_empty(x.shape)
        out = F.conv1d(F.pad(xc, (weight.shape[1] - 1, 0)), weight.to(cdt).unsqueeze(1),
                       bias.to(cdt) if bias is not None else None, groups=x.shape[1])
        if silu:
            out = F.silu(out)
    return out.to(x.dtype)


def _causal_conv1d_cpu(x: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:
    """Our numba kernel (``conv_kernel.py``), time-major: the result is a (batch, dim, L) view of
    (batch, L, dim) memory, which the Mamba block's projections and the scan kernel read without copies.
    float32 math (float64 when x or weight is float64); CUDA inputs are computed on the CPU."""
    from .conv_kernel import CausalConv1dCPU  # numba is imported on first use only

    cdt = _compute_dtype(x, weight)
    cpu = torch.device("cpu")
    x_t = x.to(device=cpu, dtype=cdt).transpose(1, 2).contiguous()
    w = weight.to(device=cpu, dtype=cdt).contiguous()
    b = bias.to(device=cpu, dtype=cdt) if bias is not None else w.new_zeros(w.shape[0])
    out = CausalConv1dCPU.apply(x_t, w, b.contiguous(), silu)
    return out.transpose(1, 2).to(device=x.device, dtype=x.dtype)
