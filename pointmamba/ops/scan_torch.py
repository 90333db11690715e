"""Selective scan in plain torch ops, forward and hand-written backward: runs wherever torch runs (CUDA
without mamba-ssm; the CPU too, where the tests check it against the numba engine).

The core recurrence, per batch element, channel d and state n (``a = delta * A <= 0`` for A <= 0 and
delta >= 0, which is what a model produces):

    h_t = exp(a_t) * h_{t-1} + delta_t * u_t * B_t,        y_t = <C_t, h_t>

Chunked, so that a call runs about 20 T + 4 log2(L / T) torch ops one after another, not 20 L (T = CHUNK):
1. the end state of every chunk started from zero, E_c = sum_s exp(A * r_s) * delta_s u_s B_s with
   r_s = delta_{s+1} + ... + delta_{T-1} (the chunk's later deltas), and the chunk's total decay
   P_c = exp(A * sum_chunk delta) are one vectorized expression over all chunks at once;
2. the chunks' start states follow from H_{c+1} = P_c H_c + E_c by a log-depth (Hillis-Steele) scan over
   chunks that combines (P, E) pairs;
3. a loop over the T positions of a chunk, for all chunks at once, runs the recurrence from those start
   states and reads y_t = <C_t, h_t>.
The backward is the same three steps on the adjoint, backwards in time, after recomputing the chunks'
states from the start states kept by the forward (B * dim * N * L / T numbers), so nothing of size
B * dim * N * L outlives a call.

Numerics: every exponent is A times a cumulative sum of deltas (sums, never differences of sums, so no
cancellation) and is <= 0 for A <= 0, delta >= 0; decays only multiply, never divide, and products of
numbers in [0, 1] stay there, so exp underflowing to 0 (delta * A of -50 or -3000 per step) simply
forgets the state. Math in float32 (float64 for float64 inputs) with autocast off, whatever the input dtype.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


CHUNK = 16  # T. The loops run ~20 T sequential ops per fwd+bwd; larger T only saves log-depth chunk work
# (fwd+bwd at L=16384, d_inner 256, N 16 on 2 loaded CPU cores: T=8 12.0 s, 16 8.7 s, 32 10.2 s)


def chunked_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, chunk: int | None = None
                 ) -> tuple[Tensor, Tensor]:
    """The core recurrence: u, delta (batch, dim, L); A (dim, N); B, C (batch, G, N, L) with G dividing dim;
    all of one float dtype on one device. Returns y (batch, dim, L) and the last state (batch, dim, N).
    Differentiable in every input (not twice)."""
    return _ChunkedScan.apply(u, delta, A, B, C, chunk or CHUNK)


class _Layout:
    """Step-major views of one call's tensors: (T, batch, G, nc, ...), so that one position of every chunk
    is a contiguous slice; L is padded to nc * T with zeros (delta = 0: decay 1 and no input, so the
    state passes through the padding unchanged, and zero gradients come back from it)."""

    def __init__(self, u: Tensor, A: Tensor, B: Tensor, chunk: int) -> None:
        self.batch, self.dim, self.length = u.shape
        self.groups, self.nstate = B.shape[1], A.shape[1]
        self.dpg = self.dim // self.groups
        self.T = chunk
        self.nc = max(1, -(-self.length // chunk))
        self.pad = self.nc * chunk - self.length

    def steps(self, x: Tensor) -> Tensor:
        """(batch, dim, L) -> (T, batch, G, nc, dpg)."""
        x = F.pad(x, (0, self.pad)) if self.pad else x
        return x.reshape(self.batch, self.groups, self.dpg, self.nc, self.T).permute(4, 0, 1, 3, 2).contiguous()

    def unsteps(self, x: Tensor) -> Tensor:
        """(T, batch, G, nc, dpg) -> (batch, dim, L)."""
        return x.permute(1, 2, 4, 3, 0).reshape(self.batch, self.dim, self.nc * self.T)[..., :self.length]

    def steps_bc(self, x: Tensor) -> Tensor:
        """(batch, G, N, L) -> (T, batch, G, nc, N)."""
        x = F.pad(x, (0, self.pad)) if self.pad else x
        return x.reshape(self.batch, self.groups, self.nstate, self.nc, self.T).permute(4, 0, 1, 3, 2).contiguous()

    def unsteps_bc(self, x: Tensor) -> Tensor:
        """(T, batch, G, nc, N) -> (batch, G, N, L)."""
        out = x.permute(1, 2, 4, 3, 0).reshape(self.batch, self.groups, self.nstate, self.nc * self.T)
        return out[..., :self.length]

    def decay(self, A: Tensor) -> Tensor:
        """A as (G, 1, dpg, N): broadcasts against states (..., G, nc, dpg, N)."""
        return A.reshape(self.groups, 1, self.dpg, self.nstate)


def _chunk_scan(P: Tensor, X: Tensor) -> Tensor:
    """Inclusive scan X_c <- P_c * X_{c-1} + X_c along dim 2 (chunks), log2(nc) vectorized steps."""
    stride = 1
    nc = X.shape[2]
    while stride < nc:
        X = torch.cat([X[:, :, :stride], torch.addcmul(X[:, :, stride:], P[:, :, stride:], X[:, :, :-stride])], 2)
        if 2 * stride < nc:
            P = torch.cat([P[:, :, :stride], P[:, :, stride:] * P[:, :, :-stride]], 2)
        stride *= 2
    return X


def _weighted_sum(sums: Tensor, a: Tensor, v: Tensor, w: Tensor) -> Tensor:
    """sum over the T positions of exp(sums * A) * v x w: sums, v (T, batch, G, nc, dpg), w (T, batch, G, nc, N)
    -> (batch, G, nc, dpg, N); one temporary of T times that size, updated in place."""
    x = sums.unsqueeze(-1) * a
    x.exp_().mul_(v.unsqueeze(-1)).mul_(w.unsqueeze(-2))
    return x.sum(0)


def _outer(v: Tensor, w: Tensor) -> Tensor:
    """v (..., dpg) x w (..., N) -> (..., dpg, N)."""
    return v.unsqueeze(-1) * w.unsqueeze(-2)


class _ChunkedScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, chunk: int  # noqa: ANN001, ANN205
                ) -> tuple[Tensor, Tensor]:
        lay = _Layout(u, A, B, chunk)
        a = lay.decay(A)
        dt_s, dtu_s = lay.steps(delta), lay.steps(delta * u)
        b_s, c_s = lay.steps_bc(B), lay.steps_bc(C)
        # 1. each chunk from a zero state: its end state and its total decay
        later = torch.cat([dt_s[1:].flip(0).cumsum(0).flip(0), torch.zeros_like(dt_s[:1])])
        E = _weighted_sum(later, a, dtu_s, b_s)  # (batch, G, nc, dpg, N)
        P = torch.exp(dt_s.sum(0).unsqueeze(-1) * a)
        # 2. end states of the chunks, then start states
        ends = _chunk_scan(P, E)
        starts = torch.cat([torch.zeros_like(ends[:, :, :1]), ends[:, :, :-1]], 2)
        # 3. the recurrence inside the chunks, all chunks at once
        h = starts
        y_s = dt_s.new_empty(dt_s.shape)
        for t in range(lay.T):
            h = torch.addcmul(_outer(dtu_s[t], b_s[t]), torch.exp(dt_s[t].unsqueeze(-1) * a), h)
            y_s[t] = torch.einsum("bgcdn,bgcn->bgcd", h, c_s[t])
        ctx.save_for_backward(u, delta, A, B, C, starts)
        ctx.chunk = chunk
        last = ends[:, :, -1].reshape(lay.batch, lay.dim, lay.nstate)
        return lay.unsteps(y_s), last

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy: Tensor, glast: Tensor):  # noqa: ANN001, ANN205
        u, delta, A, B, C, starts = ctx.saved_tensors
        lay = _Layout(u, A, B, ctx.chunk)
        a = lay.decay(A)
        dt_s, dtu_s = lay.steps(delta), lay.steps(delta * u)
        b_s, c_s = lay.steps_bc(B), lay.steps_bc(C)
        gy_s = lay.steps(gy.to(u.dtype))
        # adjoint arriving at each chunk's end state from later chunks: mu_{c-1} = P_c mu_c + F_c with
        # F_c = sum_s exp(A * (delta_0 + ... + delta_s)) * C_s gy_s, and mu_{nc-1} = dL/d(last state)
        upto = dt_s.cumsum(0)
        Fc = _weighted_sum(upto, a, gy_s, c_s)  # (batch, G, nc, dpg, N)
        P = torch.exp(upto[-1].unsqueeze(-1) * a)
        gl = glast.to(u.dtype).reshape(lay.batch, lay.groups, 1, lay.dpg, lay.nstate)
        Fc[:, :, -1:].addcmul_(P[:, :, -1:], gl)  # the last chunk's term carries the last state's gradient
        mu_before = _chunk_scan(P.flip(2), Fc.flip(2)).flip(2)  # [c]: adjoint into chunk c-1's end state
        lam = torch.cat([mu_before[:, :, 1:], gl], 2)  # adjoint into chunk c's end state from the future
        # the chunks' states and step decays again, from the start states
        hs, es = [], []
        h = starts
        for t in range(lay.T):
            e = torch.exp(dt_s[t].unsqueeze(-1) * a)
            h = torch.addcmul(_outer(dtu_s[t], b_s[t]), e, h)
            hs.append(h)
            es.append(e)
        # the adjoint backwards through the chunks' positions, all chunks at once
        g_dtu = torch.empty_like(dt_s)
        g_dt = torch.empty_like(dt_s)
        g_b = torch.empty_like(b_s)
        g_c = torch.empty_like(c_s)
        g_a = torch.zeros_like(starts)
        for t in range(lay.T - 1, -1, -1):
            h = hs[t]
            h_prev = hs[t - 1] if t > 0 else starts
            lam = torch.addcmul(lam, gy_s[t].unsqueeze(-1), c_s[t].unsqueeze(-2))  # total adjoint of h_t
            g_c[t] = torch.einsum("bgcdn,bgcd->bgcn", h, gy_s[t])
            g_b[t] = torch.einsum("bgcdn,bgcd->bgcn", lam, dtu_s[t])
            g_dtu[t] = torch.einsum("bgcdn,bgcn->bgcd", lam, b_s[t])
            lam = lam * es[t]  # adjoint passed on to h_{t-1}
            q = lam * h_prev  # adjoint of delta_t * A
            g_dt[t] = (q * a).sum(-1)
            g_a.addcmul_(q, dt_s[t].unsqueeze(-1))
        g_dtu = lay.unsteps(g_dtu)
        du = g_dtu * delta
        ddelta = g_dtu * u + lay.unsteps(g_dt)
        dA = g_a.sum((0, 2)).reshape(lay.dim, lay.nstate)
        return du, ddelta, dA, lay.unsteps_bc(g_b), lay.unsteps_bc(g_c), None
