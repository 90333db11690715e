"""Mamba block (mamba-ssm v1 layout) and the bidirectional mixer over packed, serialized batches."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pointmamba.models.bimamba import BiMamba
from pointmamba.models.mamba import Mamba
from pointmamba.point.sequence import reverse_index

LENGTHS = [7, 0, 23, 1, 12]


def reference_scan(u, delta, A, B, C, D, z, delta_bias):
    """mamba-ssm's recurrence with softplus, one step at a time, float64; B, C (batch, N, L)."""
    delta = F.softplus(delta + delta_bias[:, None])
    h = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[-1]):
        h = torch.exp(delta[:, :, t, None] * A) * h + (delta[:, :, t] * u[:, :, t])[..., None] * B[:, None, :, t]
        ys.append((h * C[:, None, :, t]).sum(-1))
    return (torch.stack(ys, -1) + u * D[:, None]) * F.silu(z)


def reference_mamba(m: Mamba, hidden, params=None):
    """mamba-ssm's slow path of ``Mamba.forward``, spelled out with plain torch in float64 (with ``params``,
    a float64 copy of the state dict, gradients flow to it)."""
    p = params if params is not None else {k: v.detach().double() for k, v in m.state_dict().items()}
    seqlen = hidden.shape[1]
    xz = (hidden.double() @ p["in_proj.weight"].T).transpose(1, 2)
    x, z = xz.chunk(2, dim=1)
    x = F.silu(F.conv1d(x, p["conv1d.weight"], p["conv1d.bias"], padding=m.d_conv - 1, groups=m.d_inner)[..., :seqlen])
    dt, B, C = torch.split(x.transpose(1, 2) @ p["x_proj.weight"].T, [m.dt_rank, m.d_state, m.d_state], dim=-1)
    dt = (dt @ p["dt_proj.weight"].T).transpose(1, 2)
    y = reference_scan(x, dt, -torch.exp(p["A_log"]), B.transpose(1, 2), C.transpose(1, 2), p["D"], z,
                       p["dt_proj.bias"])
    return y.transpose(1, 2) @ p["out_proj.weight"].T


# mamba_ssm.modules.mamba_simple.Mamba(d_model=32): d_inner 64, dt_rank ceil(32/16)=2, d_state 16, d_conv 4
MAMBA_SSM_KEYS = [
    ("A_log", (64, 16)),
    ("D", (64,)),
    ("in_proj.weight", (128, 32)),
    ("conv1d.weight", (64, 1, 4)),
    ("conv1d.bias", (64,)),
    ("x_proj.weight", (2 + 2 * 16, 64)),
    ("dt_proj.weight", (64, 2)),
    ("dt_proj.bias", (64,)),
    ("out_proj.weight", (32, 64)),
]


def test_state_dict_matches_mamba_ssm_layout():
    m = Mamba(32)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == MAMBA_SSM_KEYS
    with_bias = Mamba(32, bias=True, conv_bias=False)
    keys = {k: tuple(v.shape) for k, v in with_bias.state_dict().items()}
    assert keys["in_proj.bias"] == (128,) and keys["out_proj.bias"] == (32,) and "conv1d.bias" not in keys
    # a checkpoint written with mamba-ssm's names loads strictly
    m.load_state_dict({k: torch.zeros(s) for k, s in MAMBA_SSM_KEYS}, strict=True)


def test_initialisation_matches_mamba_ssm():
    torch.manual_seed(0)
    dt_min, dt_max = 0.002, 0.05
    m = Mamba(48, d_state=8, dt_min=dt_min, dt_max=dt_max)
    assert m.d_inner == 96 and m.dt_rank == 3
    dt = F.softplus(m.dt_proj.bias.detach().double())
    assert dt.min() >= dt_min * (1 - 1e-5) and dt.max() <= dt_max * (1 + 1e-5)
    assert dt.log().std() > 0.2 * (math.log(dt_max) - math.log(dt_min)) / math.sqrt(12)  # log-uniform spread
    bound = m.dt_rank ** -0.5
    assert m.dt_proj.weight.abs().max() <= bound and m.dt_proj.weight.abs().max() > 0.5 * bound
    assert torch.equal(m.A_log.detach(), torch.log(torch.arange(1, 9.0)).repeat(96, 1))
    assert torch.equal(m.D.detach(), torch.ones(96))
    assert m.A_log._no_weight_decay is True and m.D._no_weight_decay is True
    assert not getattr(m.in_proj.weight, "_no_weight_decay", False)
    floored = Mamba(16, dt_min=1e-6, dt_max=1e-5, dt_init_floor=1e-4)
    assert torch.allclose(F.softplus(floored.dt_proj.bias.detach()), torch.full((32,), 1e-4), rtol=1e-4)


def test_forward_matches_mamba_ssm_slow_path_in_float64():
    torch.manual_seed(1)
    m = Mamba(16, d_state=4)
    with torch.no_grad():  # move away from the init so every parameter matters
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    hidden = torch.randn(2, 19, 16)
    out = m(hidden)
    ref = reference_mamba(m, hidden)
    assert out.shape == (2, 19, 16)
    assert float((out.detach().double() - ref).abs().max() / ref.abs().max()) < 1e-5


def test_gradients_match_mamba_ssm_slow_path_in_float64():
    """Every parameter's and the input's gradient through our kernels (scan with fused D / gate, causal
    conv, the narrow dt projection) against autograd through the float64 reference."""
    torch.manual_seed(3)
    m = Mamba(24, d_state=4)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    hidden = torch.randn(2, 23, 24, requires_grad=True)
    gout = torch.randn(2, 23, 24)
    grads = torch.autograd.grad((m(hidden) * gout).sum(), [hidden, *m.parameters()])
    params = {k: v.detach().double().requires_grad_() for k, v in m.state_dict().items()}
    hidden64 = hidden.detach().double().requires_grad_()
    ref = reference_mamba(m, hidden64, params)
    names = [k for k, _ in m.named_parameters()]
    want = torch.autograd.grad((ref * gout.double()).sum(), [hidden64, *[params[k] for k in names]])
    for name, got, exp in zip(["input", *names], grads, want):
        assert got.shape == exp.shape, name
        assert float((got.double() - exp).abs().max() / exp.abs().max()) < 1e-4, name


def test_right_padding_does_not_change_valid_outputs():
    torch.manual_seed(2)
    m = Mamba(16, d_state=4)
    a, b = torch.randn(1, 13, 16), torch.randn(1, 8, 16)
    garbage = 1e3 * torch.randn(1, 5, 16)
    batch = torch.cat([a, torch.cat([b, garbage], dim=1)]).requires_grad_()
    out = m(batch, lengths=torch.tensor([13, 8]))
    assert torch.allclose(out[0:1], m(a), atol=1e-6)
    assert torch.allclose(out[1:2, :8], m(b), atol=1e-6)
    assert torch.equal(out[1, 8:], torch.zeros(5, 16))
    out.sum().backward()
    assert torch.equal(batch.grad[1, 8:], torch.zeros(5, 16))  # padding gets no gradient
    with pytest.raises(ValueError, match="exceeds"):
        m(batch, lengths=torch.tensor([13, 14]))


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return float((a - b).abs().max()) if a.numel() else 0.0


def _packed(seed: int, lengths=LENGTHS, dim: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths_t = torch.tensor(lengths)
    return torch.randn(int(lengths_t.sum()), dim, generator=g), lengths_t


def _bimamba(share: bool, combine: str, seed: int = 3) -> BiMamba:
    torch.manual_seed(seed)
    return BiMamba(12, d_state=4, combine=combine, share_params=share).eval()


@pytest.mark.parametrize("combine", ["sum", "concat"])
@pytest.mark.parametrize("share", [False, True])
def test_bimamba_batch_invariance(share, combine):
    """Every scan's output inside a batch of uneven scans equals its output alone, in both directions."""
    m = _bimamba(share, combine)
    x, lengths = _packed(4)
    with torch.no_grad():
        full = m(x, lengths)
        fwd, bwd = m.directions(x, lengths)
        fwd_only, bwd_only = m.forward_direction(x, lengths), m.backward_direction(x, lengths)
    assert full.shape == x.shape
    assert torch.allclose(fwd, fwd_only, atol=1e-6) and torch.allclose(bwd, bwd_only, atol=1e-6)
    start = 0
    for n in LENGTHS:
        xi, li = x[start:start + n], torch.tensor([n])
        with torch.no_grad():
            alone = m(xi, li)
            alone_fwd, alone_bwd = m.forward_direction(xi, li), m.backward_direction(xi, li)
        rows = slice(start, start + n)
        assert max_abs_diff(full[rows], alone) <= 1e-6
        assert max_abs_diff(fwd[rows], alone_fwd) <= 1e-6
        assert max_abs_diff(bwd[rows], alone_bwd) <= 1e-6
        start += n


@pytest.mark.parametrize("direction", ["forward_direction", "backward_direction"])
def test_no_state_crosses_a_sample_boundary(direction):
    """Changing one scan changes no other scan's output, in either direction."""
    m = _bimamba(False, "sum")
    x, lengths = _packed(5)
    x2 = x.clone()
    x2[7:30] += 3.0  # sample 2 (sample 1 is empty)
    with torch.no_grad():
        y, y2 = getattr(m, direction)(x, lengths), getattr(m, direction)(x2, lengths)
    others = torch.ones(len(x), dtype=torch.bool)
    others[7:30] = False
    assert torch.allclose(y[others], y2[others], atol=1e-6)
    assert not torch.allclose(y[~others], y2[~others], atol=1e-3)


def test_backward_direction_is_forward_over_reversed_sequence():
    x, lengths = _packed(6)
    rev = reverse_index(lengths)
    shared = _bimamba(True, "sum")
    separate = _bimamba(False, "sum")
    separate.mamba_bwd.load_state_dict(separate.mamba_fwd.state_dict())
    with torch.no_grad():
        for m in (shared, separate):
            reversed_fwd = m.forward_direction(x[rev], lengths)[rev]
            assert torch.allclose(m.backward_direction(x, lengths), reversed_fwd, atol=1e-6)
        # and it really is a different direction: a causal forward pass differs from the backward one
        fwd, bwd = shared.forward_direction(x, lengths), shared.backward_direction(x, lengths)
        assert not torch.allclose(fwd, bwd, atol=1e-3)


@pytest.mark.parametrize("share", [False, True])
def test_bimamba_parameters_and_gradients(share):
    m = _bimamba(share, "concat")
    keys = m.state_dict().keys()
    assert any(k.startswith("mamba_fwd.") for k in keys) and "proj.weight" in keys
    assert any(k.startswith("mamba_bwd.") for k in keys) != share
    x, lengths = _packed(7, lengths=[5, 0, 9])
    x.requires_grad_()
    m.train()
    m(x, lengths).square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name.endswith(("A_log", "x_proj.weight", "out_proj.weight")):
            assert p.grad.abs().sum() > 0, name


def test_bimamba_degenerate_batches():
    m = _bimamba(True, "sum")
    for lengths in ([0], [0, 0], [], [1], [0, 1, 0]):
        x, lengths_t = _packed(8, lengths=lengths)
        out = m(x, lengths_t)
        assert out.shape == x.shape and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="rows"):
        m(torch.randn(4, 12), torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="combine"):
        BiMamba(12, combine="mean")


@pytest.mark.parametrize("use_bias,use_z", [(False, True), (True, True), (True, False)])
def test_split_in_projection_gradients(use_bias, use_z):
    """The in-projection with its place-writing backward equals F.linear + chunk, also when only x is used."""
    from pointmamba.models.mamba import _SplitInProj

    g = torch.Generator().manual_seed(4)
    h = torch.randn(2, 7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(12, 5, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(12, generator=g, dtype=torch.float64, requires_grad=True) if use_bias else None
    leaves = [h, w] + ([b] if use_bias else [])

    def loss(x, z):
        return (x.sin() * 1.5).sum() + ((z * z).sum() if use_z else 0.0)

    got = torch.autograd.grad(loss(*_SplitInProj.apply(h, w, b)), leaves)
    want = torch.autograd.grad(loss(*F.linear(h, w, b).chunk(2, dim=-1)), leaves)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lengths", [[5, 3, 7], [4, 4]])
def test_routes_reach_every_row_and_read_back_only_the_longest_sample(lengths):
    """The mixer's routes: each row lands at its padded position and comes back, in both directions, the
    padding listed; on CUDA every value read back waits for the queue (issue 45), so only Lmax is read."""
    from pointmamba.point.sequence import padded_index, routes
    from pointmamba.utils.op_count import OpCount

    lens = torch.tensor(lengths)
    n = int(lens.sum())
    order = torch.randperm(n, generator=torch.Generator().manual_seed(len(lengths)))
    with OpCount() as count:
        r = routes(order, lens)
    assert count.host_waits <= 1, count.ops
    flat, mask, lmax = padded_index(lens)
    assert r.lmax == max(lengths) and torch.equal(r.pad, (~mask).reshape(-1).nonzero().squeeze(1))
    for d, rows in enumerate((order, order[reverse_index(lens)])):
        assert torch.equal(r.into[d][flat], rows) and torch.equal(r.back[d][rows], flat)
