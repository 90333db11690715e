"""CPU selective-scan engine: numba forward, hand-written numba backward, and their autograd.Function.

The core recurrence, per batch element b and channel d, with state h_t of size N:

    a_t = exp(delta_t * A[d])          (elementwise over N)
    h_t = a_t * h_{t-1} + delta_t * u_t * B_t
    y_t = <C_t, h_t>

B and C are input-dependent and shared by the channels of a group: (batch, groups, L, N) here (time-major
so that the inner loop over N reads contiguous memory). Everything around the core (delta_bias, softplus,
the D skip, the silu(z) gate, dtype casts) is plain torch in ``selective_scan.py``.

Design (measured on 2 Zen3 cores shared with other jobs, B=1, D=256, N=16; see ``bench/scan.py``):
- forward: one parallel task per (b, d); only the running state (N floats) is kept, nothing is stored
  for backward. The decays of 64 time steps are computed in one flat, vectorized exp sweep (below).
- backward: per task, each channel first recomputes its forward states h_t and decays a_t into
  (L+1)*N and L*N buffers local to the task (O(L*N) memory per thread, never O(L*D*N)), then runs the
  adjoint recursion backwards in time. Storing a_t costs 4*L*N bytes but saves one exp per element
  (with libm exp: 0.19 s instead of 0.32 s backward at L=16384). dB and dC are sums over channels: each
  task accumulates into its own slice of a (chunks, B, G, L, N) buffer summed afterwards (no races);
  dA is a sum over the batch, written per (b, d) and summed likewise. Per element, single thread:
  forward 2.7-3.1 ns (4.1 ns with libm exp), backward 6.1-6.9 ns (6.9-8.9 ns with libm exp).
- numerically safe for any delta >= 0 and A <= 0: decays only multiply (never divide), so exp
  underflowing to 0 simply forgets the state; no step can create inf or NaN from finite inputs.
- fastmath is off: IEEE semantics (inf/NaN behave) and bit-identical reruns. Tried: fastmath
  reassoc/contract made no measurable difference once exp was vectorized, nor did 4-way unrolled sums.
- tiny problems run on one thread: waking the pool costs more than it saves (see ``_GRAIN``).
- float32 and float64 arrays each compile one signature per kernel (float64 only when asked, e.g. by
  gradcheck); ``cache=True`` stores the machine code in ``pointmamba/ops/__pycache__`` (first compile of
  both float32 kernels ~9 s on a loaded 2-core machine, the same again for float64; a cached load <1 s).
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


_CHUNK = 64  # forward: time steps whose decays are computed in one vectorized sweep


@njit(parallel=True, fastmath=False, cache=True)
def _scan_fwd_kernel(u, delta, A, Bt, Ct, y, last, zero):  # pragma: no cover - numba
    """y[b, d, t] = <C_t, h_t>; last[b, d] = h_{L-1}. ``zero`` is a 0 of the compute dtype."""
    nb, nd, nl = u.shape
    ng = Bt.shape[1]
    ns = A.shape[1]
    dpg = nd // ng
    for task in prange(nb * nd):
        b = task // nd
        d = task % nd
        g = d // dpg
        h = np.empty(ns, u.dtype)
        ea = np.empty(_CHUNK * ns, u.dtype)  # decays of one chunk of time steps, flat
        for n in range(ns):
            h[n] = zero
        for t0 in range(0, nl, _CHUNK):
            t1 = min(nl, t0 + _CHUNK)
            for t in range(t0, t1):
                dt = delta[b, d, t]
                for n in range(ns):
                    ea[(t - t0) * ns + n] = dt * A[d, n]
            _exp_inplace(ea, (t1 - t0) * ns)
            for t in range(t0, t1):
                dtu = delta[b, d, t] * u[b, d, t]
                acc = zero
                for n in range(ns):
                    hn = ea[(t - t0) * ns + n] * h[n] + dtu * Bt[b, g, t, n]
                    h[n] = hn
                    acc += hn * Ct[b, g, t, n]
                y[b, d, t] = acc
        for n in range(ns):
            last[b, d, n] = h[n]


@njit(parallel=True, fastmath=False, cache=True)
def _scan_bwd_kernel(u, delta, A, Bt, Ct, gy, glast, du, ddelta, dA_b, dB_c, dC_c, nch, zero):  # pragma: no cover
    """Gradients of the core scan given dL/dy (gy) and dL/dlast (glast).

    Task = (b, chunk of channels). du, ddelta: (B, D, L); dA_b: per-batch dA (B, D, N); dB_c, dC_c:
    per-chunk partial sums (nch, B, G, L, N), zero-initialised by the caller.
    """
    nb, nd, nl = u.shape
    ng = Bt.shape[1]
    ns = A.shape[1]
    dpg = nd // ng
    for task in prange(nb * nch):
        b = task // nch
        c = task % nch
        d0 = c * nd // nch
        d1 = (c + 1) * nd // nch
        hs = np.empty((nl + 1) * ns, u.dtype)  # hs[(t + 1) * ns + n] = h_t[n]; hs[:ns] = h_{-1} = 0
        ea = np.empty(nl * ns, u.dtype)  # ea[t * ns + n] = exp(delta_t * A[d, n])
        gh = np.empty(ns, u.dtype)
        dal = np.empty(ns, u.dtype)
        for d in range(d0, d1):
            g = d // dpg
            for t in range(nl):
                dt = delta[b, d, t]
                for n in range(ns):
                    ea[t * ns + n] = dt * A[d, n]
            _exp_inplace(ea, nl * ns)
            for n in range(ns):
                hs[n] = zero
            for t in range(nl):
                dtu = delta[b, d, t] * u[b, d, t]
                for n in range(ns):
                    hs[(t + 1) * ns + n] = ea[t * ns + n] * hs[t * ns + n] + dtu * Bt[b, g, t, n]
            for n in range(ns):
                gh[n] = glast[b, d, n]  # adjoint of h_t carried from t+1 (times a_{t+1})
                dal[n] = zero
            for t in range(nl - 1, -1, -1):
                dt = delta[b, d, t]
                ut = u[b, d, t]
                dtu = dt * ut
                gyt = gy[b, d, t]
                s_b = zero
                s_a = zero
                for n in range(ns):
                    an = A[d, n]
                    a = ea[t * ns + n]
                    ghn = gh[n] + gyt * Ct[b, g, t, n]  # total adjoint of h_t
                    dC_c[c, b, g, t, n] += gyt * hs[(t + 1) * ns + n]
                    dB_c[c, b, g, t, n] += ghn * dtu
                    s_b += ghn * Bt[b, g, t, n]
                    q = ghn * hs[t * ns + n] * a  # adjoint of (delta_t * A[d, n])
                    s_a += q * an
                    dal[n] += q * dt
                    gh[n] = a * ghn
                du[b, d, t] = dt * s_b
                ddelta[b, d, t] = ut * s_b + s_a
            for n in range(ns):
                dA_b[b, d, n] = dal[n]


# Elements (batch * dim * L * N) per thread below which extra threads cost more than they bring: waking
# numba's thread pool costs ~0.1 ms on an idle machine but tens of ms on a loaded one (measured: a tiny
# fwd+bwd took 4-30 ms on 2 threads under load vs 0.65 ms on 1). ~2^18 elements is ~1 ms of kernel work.
_GRAIN = 1 << 18


def _set_threads(work: int) -> None:
    """Use as many numba threads as torch does (``torch.set_num_threads`` governs both), fewer for small work."""
    want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS, -(-work // _GRAIN)))
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)


def _num_chunks(batch: int, dim: int) -> int:
    """Channel chunks per batch element in the backward: enough tasks to feed every thread evenly."""
    threads = numba.get_num_threads()
    return max(1, min(dim, threads // math.gcd(max(batch, 1), threads)))


def scan_forward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor) -> tuple[Tensor, Tensor]:
    """Core scan on contiguous CPU tensors of one float dtype. Returns y (B, D, L) and h_{L-1} (B, D, N)."""
    nb, nd, nl = u.shape
    y = torch.empty((nb, nd, nl), dtype=u.dtype)
    last = torch.empty((nb, nd, A.shape[1]), dtype=u.dtype)
    _set_threads(nb * nd * nl * A.shape[1])
    zero = np.zeros((), dtype=u.numpy().dtype)[()]
    _scan_fwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(), y.numpy(), last.numpy(), zero)
    return y, last


def scan_backward(u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor, gy: Tensor,
                  glast: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients (du, ddelta, dA, dBt, dCt) of the core scan; same layouts as the inputs."""
    nb, nd, nl = u.shape
    ng, ns = Bt.shape[1], A.shape[1]
    _set_threads(nb * nd * nl * ns)
    nch = _num_chunks(nb, nd)
    du = torch.empty_like(u)
    ddelta = torch.empty_like(u)
    dA_b = torch.empty((nb, nd, ns), dtype=u.dtype)
    dB_c = torch.zeros((nch, nb, ng, nl, ns), dtype=u.dtype)
    dC_c = torch.zeros((nch, nb, ng, nl, ns), dtype=u.dtype)
    zero = np.zeros((), dtype=u.numpy().dtype)[()]
    _scan_bwd_kernel(u.numpy(), delta.numpy(), A.numpy(), Bt.numpy(), Ct.numpy(), gy.numpy(), glast.numpy(),
                     du.numpy(), ddelta.numpy(), dA_b.numpy(), dB_c.numpy(), dC_c.numpy(), nch, zero)
    return du, ddelta, dA_b.sum(0), dB_c.sum(0), dC_c.sum(0)


class SelectiveScanCPU(torch.autograd.Function):
    """Autograd wrapper of the core scan. Inputs: u, delta (B, D, L); A (D, N); Bt, Ct (B, G, L, N), all
    contiguous CPU tensors of the same float dtype (float32 or float64). Outputs y (B, D, L), last (B, D, N).
    Unlike mamba-ssm, a gradient flowing into ``last`` is honoured."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, Bt: Tensor, Ct: Tensor):  # noqa: ANN205
        y, last = scan_forward(u, delta, A, Bt, Ct)
        ctx.save_for_backward(u, delta, A, Bt, Ct)
        return y, last

    @staticmethod
    def backward(ctx, gy: Tensor, glast: Tensor):  # noqa: ANN205
        u, delta, A, Bt, Ct = ctx.saved_tensors
        return scan_backward(u, delta, A, Bt, Ct, gy.contiguous(), glast.contiguous())
