"""CPU selective-scan engine: numba forward, hand-written numba backward, and their autograd.Function.

The core recurrence, per batch element b and channel d, with state h_t of size N:

    a_t = exp(delta_t * A[d])          (elementwise over N)
    h_t = a_t * h_{t-1} + delta_t * u_t * B_t
    y_t = <C_t, h_t>

Layout is time-major: u, delta, y (batch, L, dim), so one time step of a block of channels is contiguous
and every inner loop runs over channels. B and C are (batch, groups, L, N). The D skip and the silu(z)
gate are fused into both kernels (as separate torch ops, with their backward, about 0.1 s of profiled CPU
time per 16k-point training step); delta_bias, softplus and dtype casts stay plain torch in
``scan.py`` (fusing them too was measured: no gain).

Design (2 Zen3 cores, see ``bench/scan.py``):
- a task is (b, block of channels of one B/C group); the state h[n, channel] stays in a task-local array.
  Channels are independent recurrences, so the loops over a block vectorize (8 float32 lanes) with no
  reductions. The earlier design (a task per channel, inner loop over the N states) was latency-bound
  on the time recurrence: 3.1 ns per element and thread; this one 1.2-1.4 ns, most of it the exp.
- the forward keeps, besides y and the last state, the state at the start of every chunk of _CHUNK time
  steps (N/_CHUNK of u's memory). The backward, chunk by chunk backwards in time, recomputes the chunk's
  decays and states from its checkpoint into task-local buffers (O(_CHUNK * N * block) memory), then runs
  the adjoint recursion over it. Never O(L * dim * N).
- dB and dC are sums over channels: each task writes its block's sums into its own slice of a
  (blocks, B, G, L, N) buffer that torch sums afterwards (no races). The sum over a block's channels is
  reassociated (vectorized), so dB and dC depend in the last bits on the block split, which depends on
  the thread count; for a fixed thread count reruns are bit-identical. Everything else is independent of
  the split. dA (a sum over the batch) is written per (b, channel) and summed likewise.
- numerically safe for any delta >= 0 and A <= 0: decays only multiply (never divide), so exp
  underflowing to 0 simply forgets the state; no step can create inf or NaN from finite inputs.
- fastmath is off (except that one lane sum): IEEE semantics (inf/NaN behave) and bit-identical reruns.
- tiny problems run on one thread: waking the pool costs more than it saves (``numba_threads.py``).
- float32 and float64 arrays each compile one signature per kernel (float64 only when asked, e.g. by
  gradcheck); ``cache=True`` stores the machine code in ``pointmamba/ops/__pycache__``.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from . import compile_notice
from .numba_threads import channel_block, channel_blocks, set_threads
from .vector_exp import exp as _exp

compile_notice.install()  # a first run compiles for seconds: say so

_CHUNK = 32  # time steps between forward checkpoints = the backward's recompute window


@njit(fastmath={"reassoc"}, cache=True)
def _block_sum(x, w):  # noqa: ANN001, ANN202 - numba
    """x[0] + ... + x[w-1], reassociated so that it vectorizes (w >= 1)."""
    s = x[0]
    for k in range(1, w):
        s += x[k]
    return s


@njit(inline="always")
def _sizes(u, Bt, A):  # noqa: ANN001, ANN202 - numba
    """(batch, length, groups, states, channels per group) of a scan's arrays."""
    nb, nl, nd = u.shape
    ng = Bt.shape[1]
    return nb, nl, ng, A.shape[1], nd // ng


@njit(parallel=True, fastmath=False, cache=True)
def _scan_fwd_kernel(u, delta, A, Bt, Ct, Dv, z, has_d, has_z, y, ypre, last, cps, nblk, zero, one):  # pragma: no cover
    """y[b, t, d] = (<C_t, h_t> + D[d] u_t) * silu(z_t) (each part only if has_d / has_z); ypre: y before the
    gate (written only with has_z); last[b, d] = h_{L-1}; cps[b, c, n, d] = h_{c * _CHUNK - 1} (0 for c = 0).

    ``zero`` and ``one`` are 0 and 1 of the compute dtype.
    """
    nb, nl, ng, ns, dpg = _sizes(u, Bt, A)
    for task in prange(nb * ng * nblk):
        b, g, j, lo, hi = channel_block(task, nblk, ng, dpg)
        w = hi - lo
        h = np.empty(ns * w, u.dtype)  # h[n * w + k]: state n of channel lo + k
        at = np.empty(ns * w, u.dtype)
        dtu = np.empty(w, u.dtype)
        for n in range(ns):
            for k in range(w):
                h[n * w + k] = zero
                at[n * w + k] = A[lo + k, n]
        for t in range(nl):
            if t % _CHUNK == 0:
                c = t // _CHUNK
                for n in range(ns):
                    cps[b, c, n, lo:hi] = h[n * w:(n + 1) * w]
            dr = delta[b, t, lo:hi]
            ur = u[b, t, lo:hi]
            yr = y[b, t, lo:hi]
            for k in range(w):
                dtu[k] = dr[k] * ur[k]
                yr[k] = zero
            for n in range(ns):
                bn = Bt[b, g, t, n]
                cn = Ct[b, g, t, n]
                hn = h[n * w:(n + 1) * w]
                an = at[n * w:(n + 1) * w]
                for k in range(w):
                    hv = _exp(dr[k] * an[k]) * hn[k] + dtu[k] * bn
                    hn[k] = hv
                    yr[k] += hv * cn
            if has_d:
                dv = Dv[lo:hi]
                for k in range(w):
                    yr[k] += dv[k] * ur[k]
            if has_z:
                zr = z[b, t, lo:hi]
                pr = ypre[b, t, lo:hi]
                for k in range(w):
                    pr[k] = yr[k]
                    yr[k] = yr[k] * (zr[k] / (one + _exp(-zr[k])))
        for n in range(ns):
            for k in range(w):
                last[b, lo + k, n] = h[n * w + k]


@njit(parallel=True, fastmath=False, cache=True)
def _scan_bwd_kernel(u, delta, A, Bt, Ct, Dv, z, ypre, has_d, has_z, cps, gout, glast, du, ddelta, dz, dA_b, dD_b,
                     dB_j, dC_j, nblk, zero, one):  # pragma: no cover
    """Gradients given dL/dy (gout) and dL/dlast (glast).

    du, ddelta, dz: (B, L, D); dA_b, dD_b: per-batch dA (B, D, N) and dD (B, D); dB_j, dC_j: per-block
    partial sums (nblk, B, G, L, N). Every entry is written here (dz and dD_b only with has_z / has_d).
    """
    nb, nl, ng, ns, dpg = _sizes(u, Bt, A)
    for task in prange(nb * ng * nblk):
        b, g, j, lo, hi = channel_block(task, nblk, ng, dpg)
        w = hi - lo
        sw = ns * w
        at = np.empty(sw, u.dtype)
        hs = np.empty((_CHUNK + 1) * sw, u.dtype)  # hs[(tt + 1) * sw + n * w + k] = h_{t0 + tt}
        ea = np.empty(_CHUNK * sw, u.dtype)  # ea[tt * sw + n * w + k] = a_{t0 + tt}
        gh = np.empty(sw, u.dtype)  # adjoint of h_t carried from t + 1 (times a_{t+1})
        dal = np.empty(sw, u.dtype)
        dtu = np.empty(w, u.dtype)
        pb = np.empty(w, u.dtype)
        pc = np.empty(w, u.dtype)
        sb = np.empty(w, u.dtype)
        sa = np.empty(w, u.dtype)
        gr = np.empty(w, u.dtype)  # dL/d(<C_t, h_t>) of step t
        dd = np.empty(w, u.dtype)
        for k in range(w):
            dd[k] = zero
        for n in range(ns):
            for k in range(w):
                at[n * w + k] = A[lo + k, n]
                gh[n * w + k] = glast[b, lo + k, n]
                dal[n * w + k] = zero
        for c in range((nl + _CHUNK - 1) // _CHUNK - 1, -1, -1):
            t0 = c * _CHUNK
            t1 = min(nl, t0 + _CHUNK)
            for n in range(ns):
                hs[n * w:(n + 1) * w] = cps[b, c, n, lo:hi]
            for t in range(t0, t1):  # recompute the chunk's decays and states
                o = (t - t0) * sw
                dr = delta[b, t, lo:hi]
                ur = u[b, t, lo:hi]
                for k in range(w):
                    dtu[k] = dr[k] * ur[k]
                for n in range(ns):
                    bn = Bt[b, g, t, n]
                    an = at[n * w:(n + 1) * w]
                    e = ea[o + n * w:o + (n + 1) * w]
                    hp = hs[o + n * w:o + (n + 1) * w]
                    hc = hs[o + sw + n * w:o + sw + (n + 1) * w]
                    for k in range(w):
                        a = _exp(dr[k] * an[k])
                        e[k] = a
                        hc[k] = a * hp[k] + dtu[k] * bn
            for t in range(t1 - 1, t0 - 1, -1):  # adjoint, backwards in time
                o = (t - t0) * sw
                dr = delta[b, t, lo:hi]
                ur = u[b, t, lo:hi]
                go = gout[b, t, lo:hi]
                if has_z:
                    zr = z[b, t, lo:hi]
                    pr = ypre[b, t, lo:hi]
                    dzr = dz[b, t, lo:hi]
                    for k in range(w):
                        sg = one / (one + _exp(-zr[k]))
                        gr[k] = go[k] * (zr[k] * sg)
                        dzr[k] = go[k] * pr[k] * sg * (one + zr[k] * (one - sg))
                else:
                    for k in range(w):
                        gr[k] = go[k]
                if has_d:
                    for k in range(w):
                        dd[k] += gr[k] * ur[k]
                for k in range(w):
                    dtu[k] = dr[k] * ur[k]
                    sb[k] = zero
                    sa[k] = zero
                for n in range(ns):
                    bn = Bt[b, g, t, n]
                    cn = Ct[b, g, t, n]
                    an = at[n * w:(n + 1) * w]
                    e = ea[o + n * w:o + (n + 1) * w]
                    hp = hs[o + n * w:o + (n + 1) * w]
                    hc = hs[o + sw + n * w:o + sw + (n + 1) * w]
                    ghr = gh[n * w:(n + 1) * w]
                    dar = dal[n * w:(n + 1) * w]
                    for k in range(w):
                        a = e[k]
                        ghn = ghr[k] + gr[k] * cn  # total adjoint of h_t
                        pc[k] = gr[k] * hc[k]
                        pb[k] = ghn * dtu[k]
                        sb[k] += ghn * bn
                        q = ghn * hp[k] * a  # adjoint of (delta_t * A[d, n])
                        sa[k] += q * an[k]
                        dar[k] += q * dr[k]
                        ghr[k] = a * ghn
                    dB_j[j, b, g, t, n] = _block_sum(pb, w)
                    dC_j[j, b, g, t, n] = _block_sum(pc, w)
                dur = du[b, t, lo:hi]
                ddr = ddelta[b, t, lo:hi]
                for k in range(w):
                    dur[k] = dr[k] * sb[k]
                    ddr[k] = ur[k] * sb[k] + sa[k]
                if has_d:
                    dv = Dv[lo:hi]
                    for k in range(w):
                        dur[k] += gr[k] * dv[k]
        for n in range(ns):
            for k in range(w):
                dA_b[b, lo + k, n] = dal[n * w + k]
        if has_d:
            for k in range(w):
                dD_b[b, lo + k] = dd[k]


_MAX_BLOCK = 128  # channels per task at most: the backward's buffers stay in L2 (~270 KB at N = 16)
# Channels per task at least. LLVM keeps the channel loops vectorized only for ~48+ channels, yet at
# (1, 16000, 64) two 32-wide blocks on 2 threads still beat one 64-wide block on 1 (forward 7.0 vs 10.3 ms,
# backward about equal), so blocks may go down to 16 channels.
_MIN_BLOCK = 16


def _num_blocks(batch: int, dim: int, groups: int) -> int:
    return channel_blocks(batch, dim, groups, _MIN_BLOCK, _MAX_BLOCK)


def _zero_one(t: Tensor) -> tuple[np.generic, np.generic]:
    dt = t.numpy().dtype
    return np.zeros((), dtype=dt)[()], np.ones((), dtype=dt)[()]


def scan_forward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor, D: Tensor | None = None,
                 z: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """The scan on contiguous time-major CPU tensors of one float dtype: u, delta, z (B, L, D); A (D, N);
    Bt, Ct (B, G, L, N); D (D,). Returns y (B, L, D), h_{L-1} (B, D, N), y before the silu(z) gate (None
    without z) and the chunk checkpoints, the last two for the backward."""
    nb, nl, nd = u.shape
    ng, ns = Bt.shape[1], A.shape[1]
    y = torch.empty((nb, nl, nd), dtype=u.dtype)
    ypre = torch.empty_like(y) if z is not None else None
    last = torch.empty((nb, nd, ns), dtype=u.dtype)
    cps = torch.empty((nb, -(-nl // _CHUNK), ns, nd), dtype=u.dtype)
    dummy = u.new_empty((1, 1, 1))
    set_threads(nb * nd * nl * ns)
    _scan_fwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(),
                     (D if D is not None else u.new_empty(1)).numpy(), (z if z is not None else dummy).numpy(),
                     D is not None, z is not None, y.numpy(), (ypre if ypre is not None else dummy).numpy(),
                     last.numpy(), cps.numpy(), _num_blocks(nb, nd, ng), *_zero_one(u))
    return y, last, ypre, cps


def scan_backward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor, D: Tensor | None, z: Tensor | None,
                  ypre: Tensor | None, cps: Tensor, gy: Tensor, glast: Tensor) -> tuple[Tensor, ...]:
    """Gradients (du, ddelta, dA, dBt, dCt, dD or None, dz or None); same layouts as the inputs."""
    nb, nl, nd = u.shape
    ng, ns = Bt.shape[1], A.shape[1]
    set_threads(nb * nd * nl * ns)
    nblk = _num_blocks(nb, nd, ng)
    du = torch.empty_like(u)
    ddelta = torch.empty_like(u)
    dz = torch.empty_like(u) if z is not None else None
    dA_b = torch.empty((nb, nd, ns), dtype=u.dtype)
    dD_b = torch.empty((nb, nd), dtype=u.dtype) if D is not None else None
    dB_j = torch.empty((nblk, nb, ng, nl, ns), dtype=u.dtype)
    dC_j = torch.empty((nblk, nb, ng, nl, ns), dtype=u.dtype)
    dummy = u.new_empty((1, 1, 1))
    _scan_bwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(),
                     (D if D is not None else u.new_empty(1)).numpy(), (z if z is not None else dummy).numpy(),
                     (ypre if ypre is not None else dummy).numpy(), D is not None, z is not None, cps.numpy(),
                     gy.numpy(), glast.numpy(), du.numpy(), ddelta.numpy(), (dz if dz is not None else dummy).numpy(),
                     dA_b.numpy(), (dD_b if dD_b is not None else u.new_empty((1, 1))).numpy(), dB_j.numpy(),
                     dC_j.numpy(), nblk, *_zero_one(u))
    return (du, ddelta, dA_b.sum(0), dB_j.sum(0), dC_j.sum(0), dD_b.sum(0) if dD_b is not None else None, dz)


class SelectiveScanCPU(torch.autograd.Function):
    """Autograd wrapper of the scan. Inputs: u, delta (B, L, D) time-major; A (D, N); Bt, Ct (B, G, L, N);
    D (D,) or None; z (B, L, D) or None; all contiguous CPU tensors of the same float dtype (float32 or
    float64). Outputs y (B, L, D), last (B, D, N). Unlike mamba-ssm, a gradient flowing into ``last`` is
    honoured."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor, D: Tensor | None,  # noqa: ANN205
                z: Tensor | None):
        y, last, ypre, cps = scan_forward(u, delta, A, Bt, Ct, D, z)
        ctx.save_for_backward(u, delta, A, Bt, Ct, D, z, ypre, cps)
        return y, last

    @staticmethod
    def backward(ctx, gy: Tensor, glast: Tensor):  # noqa: ANN205
        u, delta, A, Bt, Ct, D, z, ypre, cps = ctx.saved_tensors
        return scan_backward(u, delta, A, Bt, Ct, D, z, ypre, cps, gy.contiguous(), glast.contiguous())
