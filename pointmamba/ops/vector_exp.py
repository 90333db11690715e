"""An exp that LLVM can vectorize, for the numba kernels (``scan_kernel.py``, ``conv_kernel.py``).

Without Intel SVML (not installed with numba's wheels) ``math.exp`` is a scalar libm call per element
and was most of the scan kernel's time. This is Cephes' expf (range reduction by ln 2, degree-6
polynomial, <= 1 ulp measured over [-87, 88]) written with plain float32 arithmetic and an int->float bit
cast, so a loop over it becomes AVX2 code: 0.7 ns/element instead of 2.65 ns (2 loaded Zen3 cores).
Edge cases: results below 2^-126 (x < -87.34) flush to 0 (libm would give a denormal), x > 88.37 gives
inf, NaN stays NaN. float64 inputs keep ``math.exp``.

``exp(x)`` dispatches on the dtype inside numba code; ``exp_array`` exposes it to Python for tests.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


_F = np.float32
_LO, _HI = _F(-87.33654), _F(88.37626)
_LOG2E, _LN2_HI, _LN2_LO = _F(1.44269504088896341), _F(0.693359375), _F(-2.12194440e-4)
_P0, _P1, _P2 = _F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3)
_P3, _P4, _P5 = _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1)
_ONE, _HALF = _F(1.0), _F(0.5)
_HI_CLAMP = _F(88.5)  # > _HI, and rounds to k = 128
_KMIN, _KMAX = _F(-127.0), _F(128.0)


@intrinsic
def _int32_bits_as_float32(typingctx, bits):  # noqa: ANN001, ANN201
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@njit(inline="always")
def _expf(x):  # noqa: ANN001, ANN202 - numba
    # Branch-free edges: clamping at _HI_CLAMP makes 2^k = 2^128 = inf for every x > _HI; NaN passes
    # through max/min and the arithmetic; the final factor is 0 below _LO (flush to 0) and for NaN (NaN*0 = NaN).
    xc = min(max(x, _LO), _HI_CLAMP)
    k = np.floor(xc * _LOG2E + _HALF)
    r = xc - k * _LN2_HI - k * _LN2_LO
    p = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * (r * r) + r + _ONE
    ki = np.int32(min(_KMAX, max(_KMIN, k)))  # constant first: a NaN k gives _KMIN, never an undefined cast
    out = p * _int32_bits_as_float32(np.int32((ki + np.int32(127)) << np.int32(23)))  # 2^k
    return out * np.float32(x >= _LO)


def exp(x):  # noqa: ANN001, ANN202 - typed by the overload below
    raise NotImplementedError("numba only")


@overload(exp, inline="always")
def _exp_impl(x):  # noqa: ANN001, ANN202
    """exp of one scalar: the vectorizable float32 exp, libm for float64."""
    if x == types.float32:
        return lambda x: _expf(x)  # noqa: ANN001, ANN202
    return lambda x: math.exp(x)  # noqa: ANN001, ANN202


@njit(cache=True)
def exp_array(buf):  # noqa: ANN001, ANN201 - numba
    """In-place exp of a 1-D array with the kernels' exp (for tests of its accuracy and edge cases)."""
    for i in range(buf.size):
        buf[i] = exp(buf[i])
    return buf
