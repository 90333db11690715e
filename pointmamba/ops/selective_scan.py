"""Selective scan (Mamba's S6 recurrence) behind one function, on whichever backend can run it.

``selective_scan`` has exactly the signature, shapes and semantics of mamba-ssm's ``selective_scan_fn``:

    delta <- softplus(delta + delta_bias)           (each part only if asked)
    h_t    = exp(delta_t * A) * h_{t-1} + delta_t * B_t * u_t
    y_t    = C_t . h_t + D * u_t
    y     <- y * silu(z)                            (if z is given)

CUDA tensors go to mamba-ssm's fused kernel when it imports; everything else to our CPU engine
(``scan_kernel.py``: numba forward and hand-written backward, float32 accumulation). Models call this
function and never branch on the device themselves.
"""
from __future__ import annotations

import logging
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

log = logging.getLogger(__name__)

_UNSET = object()
_mamba_fn: object = _UNSET
_logged: set[str] = set()


def _mamba_selective_scan_fn() -> Callable | None:
    """mamba-ssm's ``selective_scan_fn``, or None where it cannot be imported (no CUDA build, no GPU)."""
    global _mamba_fn
    if _mamba_fn is _UNSET:
        try:
            from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
        except Exception as exc:  # noqa: BLE001 - ImportError, OSError (missing libcudart), RuntimeError ...
            log.debug("mamba_ssm unavailable (%s: %s); CUDA scans fall back to the CPU engine",
                      type(exc).__name__, exc)
            selective_scan_fn = None
        _mamba_fn = selective_scan_fn
    return _mamba_fn  # type: ignore[return-value]


def scan_backend(tensor: Tensor) -> str:
    """The backend ``selective_scan`` uses for inputs living where ``tensor`` lives: "mamba_ssm" or "cpu"."""
    if tensor.is_cuda and _mamba_selective_scan_fn() is not None:
        return "mamba_ssm"
    return "cpu"


def _log_once(backend: str, tensor: Tensor) -> None:
    if backend not in _logged:
        _logged.add(backend)
        log.debug("selective_scan: %s backend (inputs on %s)", backend, tensor.device)


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                   z: Tensor | None = None, delta_bias: Tensor | None = None, delta_softplus: bool = False,
                   return_last_state: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """mamba-ssm's ``selective_scan_fn``.

    Shapes: u, delta, z (batch, dim, L); A (dim, N) real; B, C (batch, N, L) or grouped (batch, G, N, L)
    with dim divisible by G; D, delta_bias (dim,). Returns y (batch, dim, L) in u's dtype, and with
    ``return_last_state`` also the final state (batch, dim, N) in float32 (float64 for float64 inputs on CPU).
    """
    backend = scan_backend(u)
    _log_once(backend, u)
    if backend == "mamba_ssm":
        return _mamba_selective_scan_fn()(u, delta, A, B, C, D=D, z=z, delta_bias=delta_bias,  # type: ignore[misc]
                                          delta_softplus=delta_softplus, return_last_state=return_last_state)
    return _selective_scan_cpu(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)


def _check_shapes(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                  z: Tensor | None, delta_bias: Tensor | None) -> int:
    """Validate the CPU engine's inputs; returns the number of groups of B and C."""
    if u.dim() != 3:
        raise ValueError(f"selective_scan: u must be (batch, dim, L), got shape {tuple(u.shape)}")
    batch, dim, length = u.shape
    if delta.shape != u.shape:
        raise ValueError(f"selective_scan: delta shape {tuple(delta.shape)} != u shape {tuple(u.shape)}")
    if A.is_complex():
        raise ValueError("selective_scan: complex A is not supported by the CPU engine")
    if A.dim() != 2 or A.shape[0] != dim:
        raise ValueError(f"selective_scan: A must be (dim={dim}, N), got shape {tuple(A.shape)}")
    nstate = A.shape[1]
    groups = None
    for name, m in (("B", B), ("C", C)):
        if m.dim() == 2:
            raise ValueError(f"selective_scan: time-invariant {name} of shape {tuple(m.shape)} is not supported "
                             f"by the CPU engine; pass the input-dependent form (batch, N, L)")
        if m.dim() == 3:
            want = (batch, nstate, length)
            g = 1
        elif m.dim() == 4:
            g = m.shape[1]
            want = (batch, g, nstate, length)
        else:
            raise ValueError(f"selective_scan: {name} must be (batch, N, L) or (batch, G, N, L), got {tuple(m.shape)}")
        if tuple(m.shape) != want:
            raise ValueError(f"selective_scan: {name} shape {tuple(m.shape)} does not match u {tuple(u.shape)} "
                             f"and A {tuple(A.shape)} (expected {want})")
        if g < 1 or dim % g != 0:
            raise ValueError(f"selective_scan: dim={dim} is not divisible by the {g} groups of {name}")
        if groups is not None and g != groups:
            raise ValueError(f"selective_scan: B has {groups} groups but C has {g}")
        groups = g
    for name, v in (("D", D), ("delta_bias", delta_bias)):
        if v is not None and tuple(v.shape) != (dim,):
            raise ValueError(f"selective_scan: {name} must be (dim={dim},), got shape {tuple(v.shape)}")
    if z is not None and z.shape != u.shape:
        raise ValueError(f"selective_scan: z shape {tuple(z.shape)} != u shape {tuple(u.shape)}")
    return groups  # type: ignore[return-value]


def _selective_scan_cpu(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                        z: Tensor | None, delta_bias: Tensor | None, delta_softplus: bool,
                        return_last_state: bool) -> Tensor | tuple[Tensor, Tensor]:
    """Our engine: torch for delta's bias and softplus, the numba kernels for the rest (float32 math;
    float64 when any core input is float64, e.g. for gradcheck). CUDA inputs are computed on the CPU."""
    from .scan_kernel import SelectiveScanCPU  # numba is imported on first use only

    groups = _check_shapes(u, delta, A, B, C, D, z, delta_bias)
    dtype_in, device = u.dtype, u.device
    cdt = torch.float64 if torch.float64 in (u.dtype, delta.dtype, A.dtype, B.dtype, C.dtype) else torch.float32
    cpu = torch.device("cpu")

    def prep(t: Tensor) -> Tensor:
        return t.to(device=cpu, dtype=cdt)

    # The kernel is time-major (batch, L, dim); for inputs that are already time-major underneath their
    # (batch, dim, L) shape (as the Mamba block makes them), these transposes are free.
    u_t = prep(u).transpose(1, 2).contiguous()
    dt = prep(delta)
    if delta_bias is not None:
        dt = dt + prep(delta_bias).unsqueeze(-1)
    if delta_softplus:
        dt = F.softplus(dt)
    batch, _, length = u.shape
    grouped = (batch, groups, A.shape[1], length)
    bt = prep(B).reshape(grouped).transpose(-1, -2).contiguous()  # (batch, G, L, N)
    ct = prep(C).reshape(grouped).transpose(-1, -2).contiguous()
    d_c = prep(D).contiguous() if D is not None else None
    z_t = prep(z).transpose(1, 2).contiguous() if z is not None else None
    y, last = SelectiveScanCPU.apply(u_t, dt.transpose(1, 2).contiguous(), prep(A).contiguous(), bt, ct, d_c, z_t)
    y = y.transpose(1, 2)
    y = y.to(device=device, dtype=dtype_in)
    if return_last_state:
        return y, last.to(device)
    return y
