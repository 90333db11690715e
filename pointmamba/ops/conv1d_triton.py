"""Causal depthwise conv1d in Triton, forward and backward (causal-conv1d's op, nothing to compile at
install time):

    pre[b, d, t] = bias[d] + sum_k weight[d, k] * x[b, d, t - (W - 1) + k]      (x = 0 before t = 0)
    out = silu(pre) if activation else pre

Three kernels over tiles of (BLOCK_D channels, BLOCK_L time steps), the W taps unrolled:
- forward: out;
- backward 1: gpre = dL/dpre (the silu's slope from pre recomputed, no saved activation) and, per tile,
  its sums for dweight and dbias (summed over the tiles in torch: deterministic, no atomics);
- backward 2: dx[t] = sum_k weight[d, k] * gpre[t + (W - 1) - k].
float32 math whatever the dtype; outputs in x's dtype and layout (a time-major x gives a time-major out).
Runs CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1`` (the tests).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK_D = 16
BLOCK_L = 64
FMA = True  # fused multiply-adds, as nvcc builds causal-conv1d; explicit: Triton 3.10 turns its default off


@triton.jit
def _pre(x_ptr, w_ptr, bias_ptr, offs_d, t, mask_d, length, s_xd, s_xl,
         HAS_BIAS: tl.constexpr, WIDTH: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    """pre (BLOCK_D, BLOCK_L) in float32 for the batch element x_ptr points at."""
    acc = tl.zeros((BLOCK_D, BLOCK_L), tl.float32)
    for k in tl.static_range(WIDTH):
        src = t - (WIDTH - 1) + k
        m = mask_d[:, None] & ((src >= 0) & (src < length))[None, :]
        xv = tl.load(x_ptr + offs_d[:, None] * s_xd + src[None, :] * s_xl, mask=m, other=0.0).to(tl.float32)
        wk = tl.load(w_ptr + offs_d * WIDTH + k, mask=mask_d, other=0.0).to(tl.float32)
        acc += wk[:, None] * xv
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)[:, None]
    return acc


@triton.jit
def _conv_fwd_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, dim, length, s_xb, s_xd, s_xl, s_ob, s_od, s_ol,
                     HAS_BIAS: tl.constexpr, SILU: tl.constexpr, WIDTH: tl.constexpr,
                     BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    t = tl.program_id(2) * BLOCK_L + tl.arange(0, BLOCK_L)
    mask_d = offs_d < dim
    pre = _pre(x_ptr + b * s_xb, w_ptr, bias_ptr, offs_d, t, mask_d, length, s_xd, s_xl, HAS_BIAS, WIDTH,
               BLOCK_D, BLOCK_L)
    if SILU:
        pre = pre / (1.0 + tl.exp(-pre))
    mask = mask_d[:, None] & (t < length)[None, :]
    tl.store(out_ptr + b * s_ob + offs_d[:, None] * s_od + t[None, :] * s_ol, pre.to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _conv_bwd_pre_kernel(x_ptr, w_ptr, bias_ptr, gout_ptr, gpre_ptr, dw_ptr, db_ptr, dim, length, n_tiles,
                         s_xb, s_xd, s_xl, s_gb, s_gd, s_gl,
                         HAS_BIAS: tl.constexpr, SILU: tl.constexpr, WIDTH: tl.constexpr,
                         BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    """gpre (B, dim, L) contiguous float32; dw (B, n_tiles, dim, W) and db (B, n_tiles, dim): tile sums."""
    b = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    tile = tl.program_id(2)
    t = tile * BLOCK_L + tl.arange(0, BLOCK_L)
    mask_d = offs_d < dim
    mask = mask_d[:, None] & (t < length)[None, :]
    g = tl.load(gout_ptr + b * s_gb + offs_d[:, None] * s_gd + t[None, :] * s_gl, mask=mask, other=0.0)
    g = g.to(tl.float32)
    if SILU:
        pre = _pre(x_ptr + b * s_xb, w_ptr, bias_ptr, offs_d, t, mask_d, length, s_xd, s_xl, HAS_BIAS, WIDTH,
               BLOCK_D, BLOCK_L)
        sig = 1.0 / (1.0 + tl.exp(-pre))
        g = g * sig * (1.0 + pre * (1.0 - sig))
    tl.store(gpre_ptr + (b * dim + offs_d[:, None]) * length + t[None, :], g, mask=mask)
    part = (b * n_tiles + tile) * dim + offs_d
    for k in tl.static_range(WIDTH):
        src = t - (WIDTH - 1) + k
        m = mask_d[:, None] & ((src >= 0) & (src < length))[None, :]
        xv = tl.load(x_ptr + b * s_xb + offs_d[:, None] * s_xd + src[None, :] * s_xl, mask=m, other=0.0)
        tl.store(dw_ptr + part * WIDTH + k, tl.sum(g * xv.to(tl.float32), 1), mask=mask_d)
    tl.store(db_ptr + part, tl.sum(g, 1), mask=mask_d)


@triton.jit
def _conv_bwd_dx_kernel(gpre_ptr, w_ptr, dx_ptr, dim, length, s_ob, s_od, s_ol,
                        WIDTH: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    t = tl.program_id(2) * BLOCK_L + tl.arange(0, BLOCK_L)
    mask_d = offs_d < dim
    acc = tl.zeros((BLOCK_D, BLOCK_L), tl.float32)
    for k in tl.static_range(WIDTH):
        dst = t + (WIDTH - 1) - k  # the output that tap k reads x[t] into
        m = mask_d[:, None] & (dst < length)[None, :]
        gv = tl.load(gpre_ptr + (b * dim + offs_d[:, None]) * length + dst[None, :], mask=m, other=0.0)
        wk = tl.load(w_ptr + offs_d * WIDTH + k, mask=mask_d, other=0.0).to(tl.float32)
        acc += wk[:, None] * gv
    mask = mask_d[:, None] & (t < length)[None, :]
    tl.store(dx_ptr + b * s_ob + offs_d[:, None] * s_od + t[None, :] * s_ol, acc.to(dx_ptr.dtype.element_ty),
             mask=mask)


def _grid(x: Tensor) -> tuple[int, int, int]:
    batch, dim, length = x.shape
    return batch, triton.cdiv(dim, BLOCK_D), triton.cdiv(length, BLOCK_L)


class CausalConv1dTriton(torch.autograd.Function):
    """x (B, dim, L) any strides; weight (dim, W); bias (dim,) or None; silu: bool. Returns x's dtype and
    layout. On CUDA, or on the CPU under TRITON_INTERPRET=1."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:  # noqa: ANN001
        weight = weight.contiguous()
        out = torch.empty_like(x)
        if x.numel():
            _conv_fwd_kernel[_grid(x)](x, weight, bias if bias is not None else weight, out, x.shape[1], x.shape[2],
                                       *x.stride(), *out.stride(), HAS_BIAS=bias is not None, SILU=silu,
                                       WIDTH=weight.shape[1], BLOCK_D=BLOCK_D, BLOCK_L=BLOCK_L, enable_fp_fusion=FMA)
        ctx.save_for_backward(x, weight, bias)
        ctx.silu = silu
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gout: Tensor):  # noqa: ANN001, ANN205
        x, weight, bias = ctx.saved_tensors
        batch, dim, length = x.shape
        width = weight.shape[1]
        grid = _grid(x)
        gpre = x.new_empty((batch, dim, length), dtype=torch.float32)
        dw = x.new_zeros((batch, grid[2], dim, width), dtype=torch.float32)
        db = x.new_zeros((batch, grid[2], dim), dtype=torch.float32)
        dx = torch.empty_like(x)
        if x.numel():
            _conv_bwd_pre_kernel[grid](x, weight, bias if bias is not None else weight, gout, gpre, dw, db, dim,
                                       length, grid[2], *x.stride(), *gout.stride(), HAS_BIAS=bias is not None,
                                       SILU=ctx.silu, WIDTH=width, BLOCK_D=BLOCK_D, BLOCK_L=BLOCK_L,
                                       enable_fp_fusion=FMA)
            _conv_bwd_dx_kernel[grid](gpre, weight, dx, dim, length, *dx.stride(), WIDTH=width,
                                      BLOCK_D=BLOCK_D, BLOCK_L=BLOCK_L, enable_fp_fusion=FMA)
        else:
            dx.zero_()
        return (dx, dw.sum((0, 1)).to(weight.dtype), db.sum((0, 1)).to(bias.dtype) if bias is not None else None,
                None)


def causal_conv1d_triton(x: Tensor, weight: Tensor, bias: Tensor | None = None, silu: bool = False) -> Tensor:
    """``conv1d.causal_conv1d`` on Triton kernels (inputs already validated)."""
    return CausalConv1dTriton.apply(x, weight, bias, silu)
