"""The Mamba (S6) block, parameter-compatible with mamba-ssm v1 ``mamba_ssm.modules.mamba_simple.Mamba``.

Same parameter names, shapes and initialisation, and the same math as mamba-ssm's reference ("slow") path,
so one state_dict runs on every backend: the causal conv and the selective scan go through
``pointmamba.ops``, which picks causal-conv1d / mamba-ssm on CUDA where installed, torch-native ops on
CUDA without them, and our numba engines on the CPU (``pointmamba/ops/backend.py``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pointmamba.ops.conv1d import causal_conv1d
from pointmamba.ops.scan import selective_scan


class _NarrowInputLinear(torch.autograd.Function):
    """``F.linear(x, weight)`` for a narrow x (rows, r) with r = dt_rank (2-16), and a backward whose
    matmuls have the wide operand on the right: torch's default ``grad.t() @ x`` for the weight gradient
    ran at 2-7 GFLOP/s on these shapes (CPU, (256 x 6156) @ (6156 x 8): 2.7 ms) vs ``(x.t() @ grad).t()``
    0.4 ms; likewise for the input gradient. About 0.06 s of a 16k-point training step.

    Under autocast the forward's matmul runs in bf16 while the saved x and weight keep their own dtypes:
    the backward computes in the gradient's dtype, as autocast's own linear does (autograd casts each
    returned gradient to its input's dtype)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(x, weight)
        return F.linear(x, weight)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:  # noqa: ANN001
        x, weight = (t.to(grad.dtype) for t in ctx.saved_tensors)
        grad_x = (weight.t() @ grad.t()).t() if ctx.needs_input_grad[0] else None
        grad_w = (x.t() @ grad).t() if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


class _SplitInProj(torch.autograd.Function):
    """``F.linear(h, weight, bias).chunk(2, -1)`` whose backward writes the two halves' gradients into
    their places instead of concatenating them (autograd's chunk backward): the concatenation of two
    (rows, d_inner) gradients was ~4 ms per Mamba call at 16k points. Under autocast the backward computes
    in the dtype the forward's matmul ran in (see ``_NarrowInputLinear``)."""

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor]:  # noqa: ANN001
        ctx.save_for_backward(h, weight)
        ctx.has_bias = bias is not None
        x, z = F.linear(h, weight, bias).chunk(2, dim=-1)
        ctx.dtype = x.dtype
        return x, z

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gx: Tensor | None, gz: Tensor | None) -> tuple[Tensor | None, ...]:  # noqa: ANN001
        h, weight = (t.to(ctx.dtype) for t in ctx.saved_tensors)
        half = weight.shape[0] // 2
        flat = h.reshape(-1, h.shape[-1])
        grads = [g.reshape(-1, half) if g is not None else None for g in (gx, gz)]
        grad_h = torch.zeros_like(flat) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        grad_b = weight.new_zeros(weight.shape[0]) if ctx.has_bias and ctx.needs_input_grad[2] else None
        for i, g in enumerate(grads):
            if g is None:
                continue
            part = slice(i * half, (i + 1) * half)
            if grad_h is not None:
                grad_h.addmm_(g, weight[part])
            if grad_w is not None:
                torch.mm(g.t(), flat, out=grad_w[part])
            if grad_b is not None:
                torch.sum(g, 0, out=grad_b[part])
        return (grad_h.view_as(h) if grad_h is not None else None), grad_w, grad_b


class Mamba(nn.Module):
    """(batch, L, d_model) -> (batch, L, d_model), causal along L."""

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: float = 2,
                 dt_rank: int | str = "auto", dt_min: float = 0.001, dt_max: float = 0.1, dt_init: str = "random",
                 dt_scale: float = 1.0, dt_init_floor: float = 1e-4, conv_bias: bool = True, bias: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if dt_init not in ("random", "constant"):
            raise ValueError(f"Mamba: dt_init must be 'random' or 'constant', got {dt_init!r}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"Mamba: need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        factory = {"device": device, "dtype": dtype}
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.expand = expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else int(dt_rank)
        self.activation = "silu"

        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=bias, **factory)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, kernel_size=d_conv, groups=self.d_inner,
                                padding=d_conv - 1, bias=conv_bias, **factory)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False, **factory)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True, **factory)

        # dt_proj: weight ~ U(+-dt_rank^-0.5 * dt_scale); bias = softplus^-1(dt), dt log-uniform in
        # [dt_min, dt_max], so that softplus(dt_proj(.)) starts in that range.
        dt_init_std = self.dt_rank ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, dt_init_std)
        else:
            nn.init.uniform_(self.dt_proj.weight, -dt_init_std, dt_init_std)
        dt = torch.exp(torch.rand(self.d_inner, **factory) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        inv_dt = dt + torch.log(-torch.expm1(-dt))  # inverse of softplus
        with torch.no_grad():
            self.dt_proj.bias.copy_(inv_dt)
        self.dt_proj.bias._no_reinit = True  # type: ignore[attr-defined]

        # S4D-real initialisation: A[d, n] = -(n + 1), stored as its log.
        a = torch.arange(1, d_state + 1, dtype=torch.float32, device=device).repeat(self.d_inner, 1).contiguous()
        self.A_log = nn.Parameter(torch.log(a))
        self.A_log._no_weight_decay = True  # type: ignore[attr-defined]
        self.D = nn.Parameter(torch.ones(self.d_inner, device=device))
        self.D._no_weight_decay = True  # type: ignore[attr-defined]

        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **factory)

    def forward(self, hidden_states: Tensor, lengths: Tensor | None = None) -> Tensor:
        """hidden_states (batch, L, d_model); ``lengths`` (batch,) for right-padded batches.

        Padding on the right cannot reach valid positions of a causal model, so ``lengths`` only zeroes
        the padded output rows (their values would depend on the padding).
        """
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != self.d_model:
            raise ValueError(f"Mamba: expected (batch, L, d_model={self.d_model}), got {tuple(hidden_states.shape)}")
        batch, seqlen, _ = hidden_states.shape
        # Every (batch, dim, L) tensor below is a transposed view of time-major (batch, L, dim) memory:
        # the projections then need no copies, and the CPU kernels are time-major. On CUDA, mamba-ssm makes
        # its inputs contiguous itself and ``causal_conv1d`` copies to causal-conv1d's standard layout.
        x, z = _SplitInProj.apply(hidden_states, self.in_proj.weight, self.in_proj.bias)  # (b, L, di) each
        x, z = x.transpose(1, 2), z.transpose(1, 2)
        A = -torch.exp(self.A_log.float())  # (d_inner, d_state)
        x = causal_conv1d(x, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation=self.activation)
        x_dbl = self.x_proj(x.transpose(1, 2).reshape(batch * seqlen, self.d_inner))  # (b * L, dt_rank + 2 n)
        dt, B, C = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        # dt_proj's bias goes in as delta_bias (softplus inside the scan), as in mamba-ssm
        dt = _NarrowInputLinear.apply(dt, self.dt_proj.weight).view(batch, seqlen, self.d_inner).transpose(1, 2)
        B = B.view(batch, seqlen, self.d_state).transpose(1, 2)  # (batch, d_state, L)
        C = C.view(batch, seqlen, self.d_state).transpose(1, 2)
        y = selective_scan(x, dt, A, B, C, self.D.float(), z=z, delta_bias=self.dt_proj.bias.float(),
                           delta_softplus=True)
        out = self.out_proj(y.transpose(1, 2))
        if lengths is not None:
            if lengths.shape != (batch,):
                raise ValueError(f"Mamba: lengths must be ({batch},), got {tuple(lengths.shape)}")
            if batch and int(lengths.max()) > seqlen:
                raise ValueError(f"Mamba: a length {int(lengths.max())} exceeds the padded length {seqlen}")
            if batch and int(lengths.min()) < seqlen:
                valid = torch.arange(seqlen, device=out.device) < lengths.to(out.device).unsqueeze(1)
                out = out.masked_fill(~valid.unsqueeze(-1), 0.0)
        return out
