"""Selective scan in Triton, forward and hand-written backward: mamba-ssm's CUDA kernel design, nothing to
compile at install time (Triton ships with every CUDA build of torch and compiles on first call).

The recurrence (``scan.py`` states the whole op), per batch element b, channel d, state n:

    a_t = exp(delta_t * A[d, n]),     h_t = a_t * h_{t-1} + delta_t * u_t * B_t[n],     y_t = <C_t, h_t>

Design:
- one program runs the whole sequence for (b, a block of BLOCK_D channels of one B/C group); the state
  (BLOCK_D, N) stays in registers from chunk to chunk. A chunk of CHUNK time steps is one tile
  (BLOCK_D, CHUNK, N) whose states come from a parallel associative scan over time (pairs (a, x) with
  (a1, x1) o (a2, x2) = (a1 a2, a2 x1 + x2)), the chunk's start state folded into its first x.
  delta's bias and softplus, the D skip and the silu(z) gate are fused into both kernels.
- the forward stores y, the last state and the state at the start of every chunk (checkpoints,
  B * dim * N * L / CHUNK floats). The backward runs over the chunks in reverse: it recomputes the chunk's
  states from its checkpoint (the same scan), then the adjoint lam_t = C_t g_t + a_{t+1} lam_{t+1} by a
  reverse scan of the same pairs, and carries a_{t0} lam_{t0} (N numbers per channel) into the chunk
  before. Nothing of size B * dim * N * L is ever stored.
- dA, dD and d(delta_bias) are summed per (b, channel) in registers and written once (summed over the
  batch in torch: deterministic). dB and dC are sums over the channels of a group: each program sums its
  block's channels and adds that with atomics into a float32 (B, G, L, N) buffer (as mamba-ssm does), so
  their last bits depend on the order the programs finish in.
- all math in float32 whatever the inputs' dtype (bf16 inputs are read as is and upcast in registers;
  outputs are written in the inputs' dtypes), as mamba-ssm computes. Every exponent is delta * A <= 0 for
  A <= 0 and delta >= 0 and decays only multiply, so underflow to 0 just forgets the state.
- ``a_t h_{t-1}``, needed for dA and d(delta), is read as ``h_t - delta_t u_t B_t`` from the recomputed
  states, as mamba-ssm's backward kernel does: an absolute error of float32 eps times |delta u B|, the size
  of dB's terms. Where every state forgets at once (delta * A of -50 and below) dA is itself that small
  and keeps no relative accuracy (the numba and torch backends multiply directly and keep it).

Runs CUDA tensors; with ``TRITON_INTERPRET=1`` set before triton is imported it runs CPU tensors in
Triton's interpreter (how the tests check it on machines without a GPU).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

# The tile: CHUNK time steps x BLOCK_D channels x d_state, run by NUM_WARPS warps. Not yet timed on a GPU
# (``python bench/scan_backends.py --devices cuda --triton-sweep`` times the candidates): small enough that
# batch 1 at d_inner 256 makes 128 programs, and compiled for sm_90 here (no GPU) the forward takes 106
# registers a thread and the backward 255, with nothing spilled to local memory.
CHUNK = 64
BLOCK_D = 2
NUM_WARPS = 4
FMA = True  # fused multiply-adds, as nvcc builds mamba-ssm; explicit: Triton 3.10 turns its default off


@triton.jit
def _combine(a1, x1, a2, x2):
    """(a1, x1) then (a2, x2): h -> a2 (a1 h + x1) + x2."""
    return a1 * a2, a2 * x1 + x2


@triton.jit
def _delta(delta_ptr, bias_ptr, offs_d, t, mask, s_dd, s_dl, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr):
    """delta (BLOCK_D, CHUNK) after bias and softplus in float32, 0 where masked (decay 1, no input), and
    d(delta)/d(raw delta) (the softplus' slope, 1 without it)."""
    raw = tl.load(delta_ptr + offs_d[:, None] * s_dd + t[None, :] * s_dl, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        raw += tl.load(bias_ptr + offs_d).to(tl.float32)[:, None]  # offs_d: valid channels only
    if SOFTPLUS:
        # log(1 + exp(x)) in a form that cannot overflow; as mamba-ssm, x > 20 passes through
        soft = tl.maximum(raw, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(raw)))
        dt = tl.where(raw <= 20.0, soft, raw)
        slope = tl.where(raw <= 20.0, 1.0 / (1.0 + tl.exp(-raw)), 1.0)
    else:
        dt = raw
        slope = tl.full(raw.shape, 1.0, tl.float32)
    return tl.where(mask, dt, 0.0), slope


@triton.jit
def _program(A_ptr, D_ptr, dpg, nstate, nblk, HAS_D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's share, as both kernels split the work: batch element b = program_id(0), group g and
    channels g * dpg + j * BLOCK_D + [0, BLOCK_D) with (g, j) = divmod(program_id(1), nblk). Returns b, g,
    the channels' offsets (clamped to valid channels) and mask, the states' offsets and mask, their joint
    mask, and A (BLOCK_D, BLOCK_N) and D (BLOCK_D,) in float32 (0 where masked; D 0 without it)."""
    b = tl.program_id(0)
    g = tl.program_id(1) // nblk
    local = (tl.program_id(1) % nblk) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_d = local < dpg
    offs_d = tl.where(mask_d, g * dpg + local, 0)
    offs_n = tl.arange(0, BLOCK_N)
    mask_n = offs_n < nstate
    dn_mask = mask_d[:, None] & mask_n[None, :]
    A = tl.load(A_ptr + offs_d[:, None] * nstate + offs_n[None, :], mask=dn_mask, other=0.0).to(tl.float32)
    if HAS_D:
        Dv = tl.load(D_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    else:
        Dv = tl.zeros((BLOCK_D,), tl.float32)
    return b, g, offs_d, mask_d, offs_n, mask_n, dn_mask, A, Dv


@triton.jit
def _scan_fwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, y_ptr, last_ptr, cps_ptr,
                     length, dim, dpg, nstate, n_chunks, nblk,
                     s_ub, s_ud, s_ul, s_db, s_dd, s_dl, s_zb, s_zd, s_zl, s_yb, s_yd, s_yl,
                     s_Bb, s_Bg, s_Bn, s_Bl, s_Cb, s_Cg, s_Cn, s_Cl,
                     HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr,
                     BLOCK_D: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program's channels (``_program``) over the whole sequence. Writes y, last (B, dim, N) and cps
    (B, n_chunks, dim, N)."""
    b, g, offs_d, mask_d, offs_n, mask_n, dn_mask, A, Dv = _program(A_ptr, D_ptr, dpg, nstate, nblk, HAS_D, BLOCK_D,
                                                                    BLOCK_N)
    steps = tl.arange(0, CHUNK)
    u_ptr += b * s_ub
    delta_ptr += b * s_db
    z_ptr += b * s_zb
    y_ptr += b * s_yb
    B_ptr += b * s_Bb + g * s_Bg
    C_ptr += b * s_Cb + g * s_Cg
    h = tl.zeros((BLOCK_D, BLOCK_N), tl.float32)
    for c in range(n_chunks):
        tl.store(cps_ptr + ((b * n_chunks + c) * dim + offs_d[:, None]) * nstate + offs_n[None, :], h, mask=dn_mask)
        t = c * CHUNK + steps
        mask_t = t < length
        mask = mask_d[:, None] & mask_t[None, :]
        tn_mask = mask_t[:, None] & mask_n[None, :]
        dt, _ = _delta(delta_ptr, bias_ptr, offs_d, t, mask, s_dd, s_dl, HAS_BIAS, SOFTPLUS)
        u = tl.load(u_ptr + offs_d[:, None] * s_ud + t[None, :] * s_ul, mask=mask, other=0.0).to(tl.float32)
        Bt = tl.load(B_ptr + offs_n[None, :] * s_Bn + t[:, None] * s_Bl, mask=tn_mask, other=0.0).to(tl.float32)
        Ct = tl.load(C_ptr + offs_n[None, :] * s_Cn + t[:, None] * s_Cl, mask=tn_mask, other=0.0).to(tl.float32)
        a = tl.exp(dt[:, :, None] * A[:, None, :])  # (BLOCK_D, CHUNK, BLOCK_N)
        x = (dt * u)[:, :, None] * Bt[None, :, :]
        x += tl.where(steps[None, :, None] == 0, a * h[:, None, :], 0.0)  # the chunk's start state
        _, hs = tl.associative_scan((a, x), 1, _combine)
        y = tl.sum(hs * Ct[None, :, :], 2)
        if HAS_D:
            y += Dv[:, None] * u
        if HAS_Z:
            zz = tl.load(z_ptr + offs_d[:, None] * s_zd + t[None, :] * s_zl, mask=mask, other=0.0).to(tl.float32)
            y = y * zz / (1.0 + tl.exp(-zz))
        tl.store(y_ptr + offs_d[:, None] * s_yd + t[None, :] * s_yl, y.to(y_ptr.dtype.element_ty), mask=mask)
        h = tl.sum(tl.where(steps[None, :, None] == CHUNK - 1, hs, 0.0), 1)  # padding steps keep h as is
    tl.store(last_ptr + (b * dim + offs_d[:, None]) * nstate + offs_n[None, :], h, mask=dn_mask)


@triton.jit
def _scan_bwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, cps_ptr, gy_ptr, glast_ptr,
                     du_ptr, ddelta_ptr, dz_ptr, dA_ptr, dD_ptr, dbias_ptr, dB_ptr, dC_ptr,
                     length, dim, dpg, nstate, n_chunks, nblk,
                     s_ub, s_ud, s_ul, s_db, s_dd, s_dl, s_zb, s_zd, s_zl, s_gb, s_gd, s_gl, s_ob, s_od, s_ol,
                     s_Bb, s_Bg, s_Bn, s_Bl, s_Cb, s_Cg, s_Cn, s_Cl,
                     HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr,
                     HAS_GLAST: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """Gradients of one program's channels (the forward's split). du, ddelta, dz share one layout (strides
    s_o*); dA (B, dim, N), dD and dbias (B, dim) per batch element; dB, dC (B, G, L, N) float32 sums."""
    b, g, offs_d, mask_d, offs_n, mask_n, dn_mask, A, Dv = _program(A_ptr, D_ptr, dpg, nstate, nblk, HAS_D, BLOCK_D,
                                                                    BLOCK_N)
    steps = tl.arange(0, CHUNK)
    u_ptr += b * s_ub
    du_ptr += b * s_ob
    delta_ptr += b * s_db
    ddelta_ptr += b * s_ob
    z_ptr += b * s_zb
    dz_ptr += b * s_ob
    gy_ptr += b * s_gb
    B_ptr += b * s_Bb + g * s_Bg
    C_ptr += b * s_Cb + g * s_Cg
    bc_out = (b * (dim // dpg) + g) * length * nstate  # dB, dC: contiguous (B, G, L, N)
    if HAS_GLAST:
        carry = tl.load(glast_ptr + (b * dim + offs_d[:, None]) * nstate + offs_n[None, :], mask=dn_mask,
                        other=0.0).to(tl.float32)
    else:
        carry = tl.zeros((BLOCK_D, BLOCK_N), tl.float32)
    dA = tl.zeros((BLOCK_D, BLOCK_N), tl.float32)
    dD = tl.zeros((BLOCK_D,), tl.float32)
    dbias = tl.zeros((BLOCK_D,), tl.float32)
    for i in range(n_chunks):
        c = n_chunks - 1 - i
        t = c * CHUNK + steps
        mask_t = t < length
        mask = mask_d[:, None] & mask_t[None, :]
        tn_mask = mask_t[:, None] & mask_n[None, :]
        dt, slope = _delta(delta_ptr, bias_ptr, offs_d, t, mask, s_dd, s_dl, HAS_BIAS, SOFTPLUS)
        # the next step's delta inside the chunk (the last step's successor comes in through ``carry``)
        nxt = mask & (steps[None, :] < CHUNK - 1) & (t[None, :] + 1 < length)
        dt_next, _ = _delta(delta_ptr, bias_ptr, offs_d, t + 1, nxt, s_dd, s_dl, HAS_BIAS, SOFTPLUS)
        u = tl.load(u_ptr + offs_d[:, None] * s_ud + t[None, :] * s_ul, mask=mask, other=0.0).to(tl.float32)
        Bt = tl.load(B_ptr + offs_n[None, :] * s_Bn + t[:, None] * s_Bl, mask=tn_mask, other=0.0).to(tl.float32)
        Ct = tl.load(C_ptr + offs_n[None, :] * s_Cn + t[:, None] * s_Cl, mask=tn_mask, other=0.0).to(tl.float32)
        gy = tl.load(gy_ptr + offs_d[:, None] * s_gd + t[None, :] * s_gl, mask=mask, other=0.0).to(tl.float32)
        # 1. the chunk's states again, from its checkpoint
        h0 = tl.load(cps_ptr + ((b * n_chunks + c) * dim + offs_d[:, None]) * nstate + offs_n[None, :],
                     mask=dn_mask, other=0.0)
        a = tl.exp(dt[:, :, None] * A[:, None, :])
        xin = (dt * u)[:, :, None] * Bt[None, :, :]
        x = xin + tl.where(steps[None, :, None] == 0, a * h0[:, None, :], 0.0)
        _, hs = tl.associative_scan((a, x), 1, _combine)
        # 2. dL/d(<C_t, h_t> + D u_t): through the gate, whose own gradient needs that value
        if HAS_Z:
            zz = tl.load(z_ptr + offs_d[:, None] * s_zd + t[None, :] * s_zl, mask=mask, other=0.0).to(tl.float32)
            sig = 1.0 / (1.0 + tl.exp(-zz))
            pre = tl.sum(hs * Ct[None, :, :], 2)
            if HAS_D:
                pre += Dv[:, None] * u
            tl.store(dz_ptr + offs_d[:, None] * s_od + t[None, :] * s_ol,
                     (gy * pre * sig * (1.0 + zz * (1.0 - sig))).to(dz_ptr.dtype.element_ty), mask=mask)
            gy = gy * zz * sig
        # 3. the adjoint of the states, backwards through the chunk
        a_next = tl.exp(dt_next[:, :, None] * A[:, None, :])
        lam_in = gy[:, :, None] * Ct[None, :, :]
        lam_in += tl.where(steps[None, :, None] == CHUNK - 1, carry[:, None, :], 0.0)
        _, lam = tl.associative_scan((a_next, lam_in), 1, _combine, reverse=True)
        carry = tl.sum(tl.where(steps[None, :, None] == 0, a * lam, 0.0), 1)
        # 4. the inputs' gradients
        q = lam * (hs - xin)  # adjoint of delta_t * A, since a_t h_{t-1} = h_t - xin_t
        dA += tl.sum(q * dt[:, :, None], 1)
        lb = tl.sum(lam * Bt[None, :, :], 2)
        ddt = tl.sum(q * A[:, None, :], 2) + u * lb
        du = dt * lb
        if HAS_D:
            du += Dv[:, None] * gy
            dD += tl.sum(gy * u, 1)
        ddt = tl.where(mask, ddt * slope, 0.0)
        dbias += tl.sum(ddt, 1)
        tl.store(du_ptr + offs_d[:, None] * s_od + t[None, :] * s_ol, du.to(du_ptr.dtype.element_ty), mask=mask)
        tl.store(ddelta_ptr + offs_d[:, None] * s_od + t[None, :] * s_ol, ddt.to(ddelta_ptr.dtype.element_ty),
                 mask=mask)
        dB = tl.sum(lam * (dt * u)[:, :, None], 0)  # (CHUNK, BLOCK_N), this block's channels summed
        dC = tl.sum(hs * gy[:, :, None], 0)
        bc = bc_out + t[:, None] * nstate + offs_n[None, :]  # neighbouring lanes add to neighbouring states
        tl.atomic_add(dB_ptr + bc, dB, mask=tn_mask, sem="relaxed")  # a sum: no ordering needed
        tl.atomic_add(dC_ptr + bc, dC, mask=tn_mask, sem="relaxed")
    tl.store(dA_ptr + (b * dim + offs_d[:, None]) * nstate + offs_n[None, :], dA, mask=dn_mask)
    if HAS_D:
        tl.store(dD_ptr + b * dim + offs_d, dD, mask=mask_d)
    if HAS_BIAS:
        tl.store(dbias_ptr + b * dim + offs_d, dbias, mask=mask_d)


def _launch_shape(dim: int, groups: int, block_d: int) -> tuple[int, int]:
    """(channels per group, channel blocks per group)."""
    dpg = dim // groups
    return dpg, triton.cdiv(dpg, block_d)


class SelectiveScanTriton(torch.autograd.Function):
    """Inputs: u, delta, z (B, dim, L) any strides; A (dim, N); B, C (B, G, N, L) any strides; D,
    delta_bias (dim,) or None; all on one device (CUDA, or CPU under TRITON_INTERPRET=1). Outputs y laid out
    as u, in u's dtype, and the last state (B, dim, N) float32, whose gradient is honoured."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,  # noqa: ANN001
                z: Tensor | None, delta_bias: Tensor | None, softplus: bool, chunk: int, block_d: int,
                num_warps: int) -> tuple[Tensor, Tensor]:
        batch, dim, length = u.shape
        groups, nstate = B.shape[1], A.shape[1]
        A, D, delta_bias = (t.contiguous() if t is not None else None for t in (A, D, delta_bias))
        y = torch.empty_like(u)  # u's layout: a time-major u gives a time-major y
        n_chunks = triton.cdiv(length, chunk)
        last = u.new_zeros((batch, dim, nstate), dtype=torch.float32)
        cps = u.new_empty((batch, n_chunks, dim, nstate), dtype=torch.float32)
        dpg, nblk = _launch_shape(dim, groups, block_d)
        if batch * dim:
            zz = z if z is not None else u
            _scan_fwd_kernel[(batch, groups * nblk)](
                u, delta, A, B, C, D if D is not None else A, zz, delta_bias if delta_bias is not None else A,
                y, last, cps, length, dim, dpg, nstate, n_chunks, nblk,
                *u.stride(), *delta.stride(), *zz.stride(), *y.stride(), *B.stride(), *C.stride(),
                HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None, SOFTPLUS=softplus,
                BLOCK_D=block_d, CHUNK=chunk, BLOCK_N=triton.next_power_of_2(nstate), num_warps=num_warps,
                enable_fp_fusion=FMA)
        ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, cps)
        ctx.softplus, ctx.chunk, ctx.block_d, ctx.num_warps = softplus, chunk, block_d, num_warps
        ctx.set_materialize_grads(False)
        return y, last

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy: Tensor | None, glast: Tensor | None):  # noqa: ANN001, ANN205
        u, delta, A, B, C, D, z, delta_bias, cps = ctx.saved_tensors
        batch, dim, length = u.shape
        groups, nstate = B.shape[1], A.shape[1]
        if gy is None:
            gy = torch.zeros_like(u)
        glast = glast.contiguous() if glast is not None else None
        f32 = torch.float32
        du = torch.empty_like(u)  # u's layout, and one layout for du, ddelta, dz: the kernel shares their strides
        ddelta = torch.empty_like(du, dtype=delta.dtype)
        dz = torch.empty_like(du, dtype=z.dtype) if z is not None else None
        dA = u.new_zeros((batch, dim, nstate), dtype=f32)
        dD = u.new_zeros((batch, dim), dtype=f32) if D is not None else None
        dbias = u.new_zeros((batch, dim), dtype=f32) if delta_bias is not None else None
        # (B, G, L, N): the atomics of one time step's states are contiguous (coalesced; mamba-ssm reorders
        # its own for the same reason), and time-major is the layout of the model's x_proj output
        dB = u.new_zeros((batch, groups, length, nstate), dtype=f32)
        dC = u.new_zeros((batch, groups, length, nstate), dtype=f32)
        dpg, nblk = _launch_shape(dim, groups, ctx.block_d)
        if batch * dim:
            zz = z if z is not None else u
            _scan_bwd_kernel[(batch, groups * nblk)](
                u, delta, A, B, C, D if D is not None else A, zz, delta_bias if delta_bias is not None else A,
                cps, gy, glast if glast is not None else A, du, ddelta, dz if dz is not None else du, dA,
                dD if dD is not None else dA, dbias if dbias is not None else dA, dB, dC,
                length, dim, dpg, nstate, cps.shape[1], nblk,
                *u.stride(), *delta.stride(), *zz.stride(), *gy.stride(), *du.stride(), *B.stride(), *C.stride(),
                HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None, SOFTPLUS=ctx.softplus,
                HAS_GLAST=glast is not None, BLOCK_D=ctx.block_d, CHUNK=ctx.chunk,
                BLOCK_N=triton.next_power_of_2(nstate), num_warps=ctx.num_warps, enable_fp_fusion=FMA)
        else:
            du.zero_(), ddelta.zero_()
            if dz is not None:
                dz.zero_()
        return (du, ddelta, dA.sum(0).to(A.dtype), dB.transpose(2, 3).to(B.dtype), dC.transpose(2, 3).to(C.dtype),
                dD.sum(0).to(D.dtype) if dD is not None else None, dz,
                dbias.sum(0).to(delta_bias.dtype) if dbias is not None else None, None, None, None, None)


def selective_scan_triton(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                          z: Tensor | None = None, delta_bias: Tensor | None = None, delta_softplus: bool = False,
                          chunk: int | None = None, block_d: int | None = None, num_warps: int | None = None
                          ) -> tuple[Tensor, Tensor]:
    """The scan (shapes as ``scan.selective_scan``, B and C already (B, G, N, L)): (y, last state float32).
    ``chunk`` and ``block_d`` (powers of 2) are the tile's time steps and channels; they and ``num_warps``
    default to the module's CHUNK, BLOCK_D and NUM_WARPS, read at each call."""
    return SelectiveScanTriton.apply(u, delta, A, B, C, D, z, delta_bias, delta_softplus, chunk or CHUNK,
                                     block_d or BLOCK_D, num_warps or NUM_WARPS)
