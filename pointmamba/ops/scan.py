"""Selective scan (Mamba's S6 recurrence) behind one function, on whichever backend can run it.

``selective_scan`` has exactly the signature, shapes and semantics of mamba-ssm's ``selective_scan_fn``:

    delta <- softplus(delta + delta_bias)           (each part only if asked)
    h_t    = exp(delta_t * A) * h_{t-1} + delta_t * B_t * u_t
    y_t    = C_t . h_t + D * u_t
    y     <- y * silu(z)                            (if z is given)

The backend is chosen by ``backend.choose("scan", device)`` (see ``backend.py``): mamba-ssm's fused
kernel for CUDA tensors where it imports, else our Triton kernels (``scan_triton.py``) where Triton imports,
else the chunked scan in torch ops (``scan_torch.py``); on the CPU our numba engine (``scan_kernel.py``:
numba forward and hand-written backward). All compute in float32 (float64 for float64 inputs, except
Triton's, which stays float32 as mamba-ssm's does). Models call this function and never branch on the
device themselves.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from . import backend


def scan_backend(tensor: Tensor) -> str:
    """The backend ``selective_scan`` uses for inputs living where ``tensor`` lives: "mamba_ssm", "triton",
    "torch" or "numba" (see ``backend.py``)."""
    return backend.choose("scan", tensor.device)


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                   z: Tensor | None = None, delta_bias: Tensor | None = None, delta_softplus: bool = False,
                   return_last_state: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """mamba-ssm's ``selective_scan_fn``.

    Shapes: u, delta, z (batch, dim, L); A (dim, N) real; B, C (batch, N, L) or grouped (batch, G, N, L)
    with dim divisible by G; D, delta_bias (dim,). Returns y (batch, dim, L) in u's dtype, and with
    ``return_last_state`` also the final state (batch, dim, N) in float32 (float64 for float64 inputs;
    mamba-ssm: its own dtype). Unlike mamba-ssm, our backends honour a gradient flowing into that state.
    """
    chosen = scan_backend(u)
    if chosen == "mamba_ssm":
        return backend.extension("scan")(u, delta, A, B, C, D=D, z=z, delta_bias=delta_bias,
                                          delta_softplus=delta_softplus, return_last_state=return_last_state)
    if chosen == "triton":
        return _selective_scan_triton(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
    if chosen == "torch":
        return _selective_scan_torch(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
    return _selective_scan_cpu(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)


def _check_shapes(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                  z: Tensor | None, delta_bias: Tensor | None) -> int:
    """Validate the inputs of our engines (numba and torch); returns the number of groups of B and C."""
    if u.dim() != 3:
        raise ValueError(f"selective_scan: u must be (batch, dim, L), got shape {tuple(u.shape)}")
    batch, dim, length = u.shape
    if delta.shape != u.shape:
        raise ValueError(f"selective_scan: delta shape {tuple(delta.shape)} != u shape {tuple(u.shape)}")
    if A.is_complex():
        raise ValueError("selective_scan: complex A is not supported by our engines")
    if A.dim() != 2 or A.shape[0] != dim:
        raise ValueError(f"selective_scan: A must be (dim={dim}, N), got shape {tuple(A.shape)}")
    nstate = A.shape[1]
    groups = None
    for name, m in (("B", B), ("C", C)):
        if m.dim() == 2:
            raise ValueError(f"selective_scan: time-invariant {name} of shape {tuple(m.shape)} is not supported "
                             f"by our engines; pass the input-dependent form (batch, N, L)")
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


def _compute_dtype(*tensors: Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def _selective_scan_triton(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                           z: Tensor | None, delta_bias: Tensor | None, delta_softplus: bool,
                           return_last_state: bool) -> Tensor | tuple[Tensor, Tensor]:
    """Our Triton kernels (``scan_triton.py``): float32 math in registers, inputs read in their own dtypes
    and layouts (no copies), y in u's dtype and layout; the last state float32."""
    from .scan_triton import selective_scan_triton  # triton is imported on first use only

    _check_shapes(u, delta, A, B, C, D, z, delta_bias)
    if B.dim() == 3:
        B, C = B.unsqueeze(1), C.unsqueeze(1)
    y, last = selective_scan_triton(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    return (y, last) if return_last_state else y


def _selective_scan_torch(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                          z: Tensor | None, delta_bias: Tensor | None, delta_softplus: bool,
                          return_last_state: bool) -> Tensor | tuple[Tensor, Tensor]:
    """The chunked scan in torch ops (``scan_torch.py``) on the inputs' own device, float32 math (float64
    for float64 inputs) with autocast off, as mamba-ssm computes under AMP."""
    from .scan_torch import chunked_scan

    groups = _check_shapes(u, delta, A, B, C, D, z, delta_bias)
    cdt = _compute_dtype(u, delta, A, B, C)
    batch, dim, length = u.shape
    with torch.autocast(device_type=u.device.type, enabled=False):
        x, dt = u.to(cdt), delta.to(cdt)
        if delta_bias is not None:
            dt = dt + delta_bias.to(cdt).unsqueeze(-1)
        if delta_softplus:
            dt = F.softplus(dt)
        grouped = (batch, groups, A.shape[1], length)
        y, last = chunked_scan(x, dt, A.to(cdt), B.to(cdt).reshape(grouped), C.to(cdt).reshape(grouped))
        if D is not None:
            y = y + x * D.to(cdt).unsqueeze(-1)
        if z is not None:
            y = y * F.silu(z.to(cdt))
    y = y.to(u.dtype)
    return (y, last) if return_last_state else y


def _selective_scan_cpu(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                        z: Tensor | None, delta_bias: Tensor | None, delta_softplus: bool,
                        return_last_state: bool) -> Tensor | tuple[Tensor, Tensor]:
    """Our engine: torch for delta's bias and softplus, the numba kernels for the rest (float32 math;
    float64 when any core input is float64, e.g. for gradcheck). CUDA inputs are computed on the CPU."""
    from .scan_kernel import SelectiveScanCPU  # numba is imported on first use only

    groups = _check_shapes(u, delta, A, B, C, D, z, delta_bias)
    dtype_in, device = u.dtype, u.device
    cdt = _compute_dtype(u, delta, A, B, C)
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
