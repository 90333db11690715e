"""CPU selective-scan engine: numba forward, hand-written numba backward, and their autograd.Function.

The core recurrence, per batch element b and channel d, with state h_t of size N:

    a_t = exp(delta_t * A[d])          (elementwise over N)
    h_t = a_t * h_{t-1} + delta_t * u_t * B_t
    y_t = <C_t, h_t>

Layout is time-major: u, delta, y (batch, L, dim), so one time step of a block of channels is contiguous
and every inner loop runs over channels. B and C are (batch, groups, L, N). Everything around the core
(delta_bias, softplus, the D skip, the silu(z) gate, dtype casts) is plain torch in ``selective_scan.py``.

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
- tiny problems run on one thread: waking the pool costs more than it saves (see ``_GRAIN``).
- float32 and float64 arrays each compile one signature per kernel (float64 only when asked, e.g. by
  gradcheck); ``cache=True`` stores the machine code in ``pointmamba/ops/__pycache__``.
"""
from __future__ import annotations

import math
import os

import numba
import numpy as np
import torch
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload
from torch import Tensor

# numba's OpenMP layer shares libgomp with torch; once the scan had run, small torch ops were measured
# 10-40x slower (thread pools fighting). The workqueue layer has no such interaction.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

# --- exp that LLVM can vectorize --------------------------------------------------------------------
# Without Intel SVML (not installed with numba's wheels) ``math.exp`` is a scalar libm call per element
# and was most of the kernels' time. This is Cephes' expf (range reduction by ln 2, degree-6 polynomial,
# <= 1 ulp measured over [-87, 88]) written with plain float32 arithmetic and an int->float bit cast,
# so a flat loop over it becomes AVX2 code: 0.7 ns/element instead of 2.65 ns (2 loaded Zen3 cores).
# Edge cases: results below 2^-126 (x < -87.34) flush to 0 (libm would give a denormal), x > 88.37 gives
# inf, NaN stays NaN. float64 inputs keep ``math.exp``.
_F = np.float32
_LO, _HI = _F(-87.33654), _F(88.37626)
_LOG2E, _LN2_HI, _LN2_LO = _F(1.44269504088896341), _F(0.693359375), _F(-2.12194440e-4)
_P0, _P1, _P2 = _F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3)
_P3, _P4, _P5 = _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1)
_ONE, _HALF, _ZERO, _INF = _F(1.0), _F(0.5), _F(0.0), _F(np.inf)


@intrinsic
def _int32_bits_as_float32(typingctx, bits):  # noqa: ANN001, ANN201
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@njit(inline="always")
def _expf(x):  # noqa: ANN001, ANN202 - numba
    xc = min(max(x, _LO), _HI)
    k = np.floor(xc * _LOG2E + _HALF)
    r = xc - k * _LN2_HI - k * _LN2_LO
    p = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * (r * r) + r + _ONE
    out = p * _int32_bits_as_float32(np.int32((np.int32(k) + np.int32(127)) << np.int32(23)))  # 2^k
    out = _ZERO if x < _LO else out
    out = _INF if x > _HI else out
    return x if x != x else out


def _exp_inplace(buf, size):  # noqa: ANN001, ANN202 - typed by the overload below
    raise NotImplementedError("numba only")


@overload(_exp_inplace, inline="always")
def _exp_inplace_impl(buf, size):  # noqa: ANN001, ANN202
    """buf[:size] = exp(buf[:size]); vectorized float32, libm float64."""
    if buf.dtype == types.float32:
        def impl(buf, size):  # noqa: ANN001, ANN202
            for i in range(size):
                buf[i] = _expf(buf[i])
    else:
        def impl(buf, size):  # noqa: ANN001, ANN202
            for i in range(size):
                buf[i] = math.exp(buf[i])
    return impl


@njit(cache=True)
def exp_array(buf):  # noqa: ANN001, ANN201 - numba
    """In-place exp of a 1-D array with the kernels' exp (for tests of its accuracy and edge cases)."""
    _exp_inplace(buf, buf.size)
    return buf


_CHUNK = 32  # time steps between forward checkpoints = the backward's recompute window


def _exp(x):  # noqa: ANN001, ANN202 - typed by the overload below
    raise NotImplementedError("numba only")


@overload(_exp, inline="always")
def _exp_impl(x):  # noqa: ANN001, ANN202
    """exp of one scalar: the vectorizable float32 exp, libm for float64."""
    if x == types.float32:
        return lambda x: _expf(x)  # noqa: ANN001, ANN202
    return lambda x: math.exp(x)  # noqa: ANN001, ANN202


@njit(fastmath={"reassoc"}, cache=True)
def _block_sum(x, w):  # noqa: ANN001, ANN202 - numba
    """x[0] + ... + x[w-1], reassociated so that it vectorizes (w >= 1)."""
    s = x[0]
    for k in range(1, w):
        s += x[k]
    return s


@njit(inline="always")
def _block(task, nblk, ng, dpg):  # noqa: ANN001, ANN202 - numba
    """(b, g, block index, first channel, last channel + 1) of a task; blocks never straddle a B/C group."""
    b = task // (ng * nblk)
    g = (task // nblk) % ng
    j = task % nblk
    return b, g, j, g * dpg + j * dpg // nblk, g * dpg + (j + 1) * dpg // nblk


@njit(parallel=True, fastmath=False, cache=True)
def _scan_fwd_kernel(u, delta, A, Bt, Ct, y, last, cps, nblk, zero):  # pragma: no cover - numba
    """y[b, t, d] = <C_t, h_t>; last[b, d] = h_{L-1}; cps[b, c, n, d] = h_{c * _CHUNK - 1} (0 for c = 0).

    ``zero`` is a 0 of the compute dtype.
    """
    nb, nl, nd = u.shape
    ng = Bt.shape[1]
    ns = A.shape[1]
    dpg = nd // ng
    for task in prange(nb * ng * nblk):
        b, g, j, lo, hi = _block(task, nblk, ng, dpg)
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
        for n in range(ns):
            for k in range(w):
                last[b, lo + k, n] = h[n * w + k]


@njit(parallel=True, fastmath=False, cache=True)
def _scan_bwd_kernel(u, delta, A, Bt, Ct, cps, gy, glast, du, ddelta, dA_b, dB_j, dC_j, nblk, zero):  # pragma: no cover
    """Gradients of the core scan given dL/dy (gy) and dL/dlast (glast).

    du, ddelta: (B, L, D); dA_b: per-batch dA (B, D, N); dB_j, dC_j: per-block partial sums (nblk, B, G, L, N),
    every entry written here.
    """
    nb, nl, nd = u.shape
    ng = Bt.shape[1]
    ns = A.shape[1]
    dpg = nd // ng
    for task in prange(nb * ng * nblk):
        b, g, j, lo, hi = _block(task, nblk, ng, dpg)
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
                gr = gy[b, t, lo:hi]
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
        for n in range(ns):
            for k in range(w):
                dA_b[b, lo + k, n] = dal[n * w + k]


# Elements (batch * dim * L * N) per thread below which extra threads cost more than they bring: waking
# numba's thread pool costs ~0.1 ms on an idle machine but tens of ms on a loaded one (measured: a tiny
# fwd+bwd took 4-30 ms on 2 threads under load vs 0.65 ms on 1). ~2^18 elements is ~1 ms of kernel work.
_GRAIN = 1 << 18
_MAX_BLOCK = 128  # channels per task at most: the backward's buffers stay in L2 (~270 KB at N = 16)
_MIN_BLOCK = 16  # narrower blocks spend more on per-row overhead than a second thread brings


def _set_threads(work: int) -> None:
    """Use as many numba threads as torch does (``torch.set_num_threads`` governs both), fewer for small work."""
    want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS, -(-work // _GRAIN)))
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)


def _num_blocks(batch: int, dim: int, groups: int) -> int:
    """Channel blocks per (batch element, B/C group): enough tasks for every thread, none too wide or narrow."""
    dpg = dim // groups
    threads = numba.get_num_threads()
    per_group = -(-threads // max(1, batch * groups))  # blocks each (b, g) needs to feed every thread
    want = max(per_group, -(-dpg // _MAX_BLOCK))
    return max(1, min(want, dpg // _MIN_BLOCK if dpg >= 2 * _MIN_BLOCK else 1))


def scan_forward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Core scan on contiguous time-major CPU tensors of one float dtype: u, delta (B, L, D); A (D, N);
    Bt, Ct (B, G, L, N). Returns y (B, L, D), h_{L-1} (B, D, N) and the chunk checkpoints for the backward."""
    nb, nl, nd = u.shape
    ng, ns = Bt.shape[1], A.shape[1]
    y = torch.empty((nb, nl, nd), dtype=u.dtype)
    last = torch.empty((nb, nd, ns), dtype=u.dtype)
    cps = torch.empty((nb, -(-nl // _CHUNK), ns, nd), dtype=u.dtype)
    _set_threads(nb * nd * nl * ns)
    zero = np.zeros((), dtype=u.numpy().dtype)[()]
    _scan_fwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(), y.numpy(), last.numpy(),
                     cps.numpy(), _num_blocks(nb, nd, ng), zero)
    return y, last, cps


def scan_backward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor, cps: Tensor, gy: Tensor,
                  glast: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients (du, ddelta, dA, dBt, dCt) of the core scan; same layouts as the inputs."""
    nb, nl, nd = u.shape
    ng, ns = Bt.shape[1], A.shape[1]
    _set_threads(nb * nd * nl * ns)
    nblk = _num_blocks(nb, nd, ng)
    du = torch.empty_like(u)
    ddelta = torch.empty_like(u)
    dA_b = torch.empty((nb, nd, ns), dtype=u.dtype)
    dB_j = torch.empty((nblk, nb, ng, nl, ns), dtype=u.dtype)
    dC_j = torch.empty((nblk, nb, ng, nl, ns), dtype=u.dtype)
    zero = np.zeros((), dtype=u.numpy().dtype)[()]
    _scan_bwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(), cps.numpy(), gy.numpy(),
                     glast.numpy(), du.numpy(), ddelta.numpy(), dA_b.numpy(), dB_j.numpy(), dC_j.numpy(), nblk, zero)
    return du, ddelta, dA_b.sum(0), dB_j.sum(0), dC_j.sum(0)


class SelectiveScanCPU(torch.autograd.Function):
    """Autograd wrapper of the core scan. Inputs: u, delta (B, L, D) time-major; A (D, N); Bt, Ct (B, G, L, N),
    all contiguous CPU tensors of the same float dtype (float32 or float64). Outputs y (B, L, D), last (B, D, N).
    Unlike mamba-ssm, a gradient flowing into ``last`` is honoured."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor):  # noqa: ANN205
        y, last, cps = scan_forward(u, delta, A, Bt, Ct)
        ctx.save_for_backward(u, delta, A, Bt, Ct, cps)
        return y, last

    @staticmethod
    def backward(ctx, gy: Tensor, glast: Tensor):  # noqa: ANN205
        u, delta, A, Bt, Ct, cps = ctx.saved_tensors
        return scan_backward(u, delta, A, Bt, Ct, cps, gy.contiguous(), glast.contiguous())
