"""Selective scan and causal conv: the CPU engine against a float64 sequential reference written here."""
from __future__ import annotations

import builtins
import importlib
import logging

import pytest
import torch
import torch.nn.functional as F

from pointmamba.ops.conv1d import causal_conv1d
from pointmamba.ops.scan import scan_backend, selective_scan

# the modules themselves (``pointmamba.ops`` re-exports functions of the same names)
conv_mod = importlib.import_module("pointmamba.ops.conv1d")
backend_mod = importlib.import_module("pointmamba.ops.backend")

NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def reference_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False):
    """mamba-ssm's recurrence, one time step at a time, in float64."""
    u, delta, A, B, C = (t.double() for t in (u, delta, A, B, C))
    if delta_bias is not None:
        delta = delta + delta_bias.double()[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    batch, dim, length = u.shape
    if B.dim() == 3:
        B, C = B[:, None], C[:, None]
    B = B.repeat_interleave(dim // B.shape[1], dim=1)  # (batch, dim, N, L): channel d uses group d // (dim/G)
    C = C.repeat_interleave(dim // C.shape[1], dim=1)
    h = u.new_zeros(batch, dim, A.shape[1])
    ys = []
    for t in range(length):
        h = torch.exp(delta[:, :, t, None] * A) * h + (delta[:, :, t] * u[:, :, t])[..., None] * B[..., t]
        ys.append((h * C[..., t]).sum(-1))
    y = torch.stack(ys, dim=-1) if ys else u.new_zeros(batch, dim, 0)
    if D is not None:
        y = y + u * D.double()[:, None]
    if z is not None:
        y = y * F.silu(z.double())
    return (y, h) if return_last_state else y


def make_inputs(batch=2, dim=6, nstate=4, length=29, groups=None, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    bc_shape = (batch, nstate, length) if groups is None else (batch, groups, nstate, length)
    return {
        "u": torch.randn(batch, dim, length, generator=g, dtype=dtype),
        "delta": 0.5 * torch.randn(batch, dim, length, generator=g, dtype=dtype),
        "A": -torch.exp(torch.randn(dim, nstate, generator=g, dtype=dtype)),
        "B": torch.randn(bc_shape, generator=g, dtype=dtype),
        "C": torch.randn(bc_shape, generator=g, dtype=dtype),
        "D": torch.randn(dim, generator=g, dtype=dtype),
        "z": torch.randn(batch, dim, length, generator=g, dtype=dtype),
        "delta_bias": 0.3 * torch.randn(dim, generator=g, dtype=dtype),
    }


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    a, ref = a.detach().double(), ref.detach()
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


# (delta_softplus, use D, use z, use delta_bias, groups)
CASES = [
    (True, True, True, True, None),
    (False, False, False, False, None),
    (True, False, True, False, None),
    (False, True, False, True, None),
    (True, True, True, True, 2),
]


def _kwargs(inputs, softplus, use_d, use_z, use_bias):
    out = {k: inputs[k] for k in ("u", "delta", "A", "B", "C")}
    out.update(D=inputs["D"] if use_d else None, z=inputs["z"] if use_z else None,
               delta_bias=inputs["delta_bias"] if use_bias else None, delta_softplus=softplus)
    if not softplus:  # without softplus delta must still be >= 0
        out["delta"] = out["delta"].abs()
    return out


@pytest.mark.parametrize("softplus,use_d,use_z,use_bias,groups", CASES)
def test_forward_and_last_state_match_float64_reference(softplus, use_d, use_z, use_bias, groups):
    kw = _kwargs(make_inputs(groups=groups), softplus, use_d, use_z, use_bias)
    y, last = selective_scan(**kw, return_last_state=True)
    y_ref, last_ref = reference_scan(**kw, return_last_state=True)
    assert y.dtype == torch.float32 and y.shape == y_ref.shape and last.shape == last_ref.shape
    assert rel_err(y, y_ref) < 1e-5
    assert rel_err(last, last_ref) < 1e-5
    assert torch.equal(selective_scan(**kw), y)


@pytest.mark.parametrize("softplus,use_d,use_z,use_bias,groups", CASES)
def test_gradients_match_float64_reference(softplus, use_d, use_z, use_bias, groups):
    kw = _kwargs(make_inputs(groups=groups, seed=1), softplus, use_d, use_z, use_bias)
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    leaves64 = {k: v.double().clone().requires_grad_() for k, v in leaves.items()}
    g = torch.Generator().manual_seed(2)
    y, last = selective_scan(**{**kw, **leaves}, return_last_state=True)
    gy = torch.randn(y.shape, generator=g)
    glast = torch.randn(last.shape, generator=g)
    grads = torch.autograd.grad((y * gy).sum() + (last * glast).sum(), list(leaves.values()))
    y_ref, last_ref = reference_scan(**{**kw, **leaves64}, return_last_state=True)
    grads_ref = torch.autograd.grad((y_ref * gy.double()).sum() + (last_ref * glast.double()).sum(),
                                    list(leaves64.values()))
    assert len(grads) >= 5
    for name, got, want in zip(leaves, grads, grads_ref):
        assert got.dtype == torch.float32 and got.shape == want.shape, name
        assert rel_err(got, want) < 1e-4, name


def test_gradcheck_float64_engine():
    """The engine runs in float64 when given float64 (one more numba signature), so gradcheck is exact."""
    inputs = make_inputs(batch=2, dim=3, nstate=2, length=5, groups=None, seed=3, dtype=torch.float64)
    leaves = [inputs[k].clone().requires_grad_() for k in NAMES]

    def fn(u, delta, A, B, C, D, z, delta_bias):
        return selective_scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus=True, return_last_state=True)

    assert torch.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-7, rtol=1e-5)
    grouped = make_inputs(batch=1, dim=4, nstate=2, length=4, groups=2, seed=4, dtype=torch.float64)
    leaves = [grouped[k].clone().requires_grad_() for k in ("u", "delta", "A", "B", "C")]
    leaves[1] = leaves[1].detach().abs().requires_grad_()
    assert torch.autograd.gradcheck(lambda *a: selective_scan(*a), leaves, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_extreme_decay_stays_finite():
    """delta * |A| far beyond exp's range: the decay underflows to 0 and nothing becomes inf or NaN."""
    inputs = make_inputs(length=17, seed=5)
    leaves = {k: inputs[k].clone() for k in NAMES}
    leaves["delta"] = torch.full_like(leaves["delta"], 60.0)
    leaves["delta"][:, :, ::3] = 0.0  # and steps with no decay at all
    leaves["A"] = -torch.full_like(leaves["A"], 50.0)  # delta * |A| = 3000
    leaves = {k: v.requires_grad_() for k, v in leaves.items()}
    y, last = selective_scan(**leaves, delta_softplus=False, return_last_state=True)
    y_ref = reference_scan(**{k: v.detach() for k, v in leaves.items()})
    assert torch.isfinite(y).all() and torch.isfinite(last).all()
    assert rel_err(y, y_ref) < 1e-5
    (y.sum() + last.sum()).backward()
    for name, leaf in leaves.items():
        assert torch.isfinite(leaf.grad).all(), name
    # huge pre-softplus delta as well
    big = {k: v.detach().clone().requires_grad_() for k, v in leaves.items()}
    y = selective_scan(big["u"], big["delta"] * 1e4, big["A"], big["B"], big["C"], big["D"], big["z"],
                       big["delta_bias"], delta_softplus=True)
    y.square().sum().backward()
    assert torch.isfinite(y).all() and all(torch.isfinite(v.grad).all() for v in big.values())


@pytest.mark.parametrize("length", [0, 1])
def test_degenerate_lengths(length):
    inputs = {k: v.requires_grad_() for k, v in make_inputs(length=length).items()}
    y, last = selective_scan(**inputs, delta_softplus=True, return_last_state=True)
    y_ref, last_ref = reference_scan(**{k: v.detach() for k, v in inputs.items()}, delta_softplus=True,
                                     return_last_state=True)
    assert y.shape == (2, 6, length) and last.shape == (2, 6, 4)
    assert torch.allclose(y.double(), y_ref, atol=1e-6) and torch.allclose(last.double(), last_ref, atol=1e-6)
    (y.sum() + last.sum()).backward()
    assert all(torch.isfinite(v.grad).all() for v in inputs.values())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_are_upcast(dtype):
    inputs = make_inputs(seed=6)
    low = {k: v.to(dtype) for k, v in inputs.items()}
    u = low["u"].clone().requires_grad_()
    y = selective_scan(u, low["delta"], low["A"], low["B"], low["C"], low["D"], low["z"], low["delta_bias"],
                       delta_softplus=True)
    assert y.dtype == dtype
    y_ref = reference_scan(**{**low, "u": u.detach()}, delta_softplus=True)  # same rounded inputs
    tol = 1e-2 if dtype == torch.float16 else 2e-2  # only the final cast rounds
    assert rel_err(y.float(), y_ref) < tol
    y.float().sum().backward()
    assert u.grad.dtype == dtype and torch.isfinite(u.grad.float()).all()


def test_deterministic_reruns():
    inputs = {k: v.requires_grad_() for k, v in make_inputs(seed=7).items()}
    runs = []
    for _ in range(2):
        y = selective_scan(**inputs, delta_softplus=True)
        grads = torch.autograd.grad(y.square().sum(), list(inputs.values()))
        runs.append((y, grads))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_shape_errors_are_clear():
    inputs = make_inputs()
    with pytest.raises(ValueError, match="time-invariant B"):
        selective_scan(inputs["u"], inputs["delta"], inputs["A"], inputs["B"][0, :, 0].expand(6, 4), inputs["C"])
    with pytest.raises(ValueError, match="C shape"):
        selective_scan(inputs["u"], inputs["delta"], inputs["A"], inputs["B"], inputs["C"][:, :3])
    with pytest.raises(ValueError, match="not divisible"):
        bad = torch.randn(2, 4, 4, 29)
        selective_scan(inputs["u"], inputs["delta"], inputs["A"], bad, bad)
    with pytest.raises(ValueError, match="delta shape"):
        selective_scan(inputs["u"], inputs["delta"][..., :3], inputs["A"], inputs["B"], inputs["C"])


def test_backend_reporting_and_logging(monkeypatch, caplog):
    u = torch.randn(1, 2, 3)
    assert scan_backend(u) == "numba"
    assert conv_mod.conv1d_backend(u) == "numba"
    monkeypatch.setattr(backend_mod, "_logged", set())
    with caplog.at_level(logging.DEBUG, logger="pointmamba.ops.backend"):
        selective_scan(u, u.abs(), -torch.ones(2, 3), torch.randn(1, 3, 3), torch.randn(1, 3, 3))
        selective_scan(u, u.abs(), -torch.ones(2, 3), torch.randn(1, 3, 3), torch.randn(1, 3, 3))
    assert sum("selective_scan: numba backend" in r.getMessage() for r in caplog.records) == 1


def test_unimportable_cuda_packages_fall_back(monkeypatch):
    """mamba-ssm and causal-conv1d raise OSError/ImportError on machines without CUDA: no extension, and the
    reason is kept for the report and the warning."""
    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name.startswith("mamba_ssm"):
            raise OSError("libcudart.so.12: cannot open shared object file")
        if name.startswith("causal_conv1d"):
            raise ImportError("no module")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing_import)
    monkeypatch.setattr(backend_mod, "_imports", {})
    assert backend_mod.extension("scan") is None and backend_mod.extension("conv1d") is None
    assert "libcudart" in backend_mod._imports["scan"][1]


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("length,dim", [(0, 5), (2, 5), (11, 5), (37, 48)])
def test_causal_conv1d_matches_padded_conv(activation, length, dim):
    """Same as mamba-ssm's slow path: nn.Conv1d with padding W-1 on both sides, keep the first L outputs.
    dim=48 splits the channels into several blocks (tasks) of the CPU kernel."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, dim, length, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(dim, 4, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(dim, generator=g, dtype=torch.float64, requires_grad=True)
    out = causal_conv1d(x, weight, bias, activation)
    if length == 0:  # torch's conv1d refuses an empty sequence; ours returns one
        assert out.shape == (2, dim, 0)
        return
    want = F.conv1d(x, weight.unsqueeze(1), bias, padding=3, groups=dim)[..., :length]
    if activation == "silu":
        want = F.silu(want)
    assert out.shape == (2, dim, length)
    assert torch.allclose(out, want, atol=1e-12)
    gout = torch.randn(out.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad((out * gout).sum(), (x, weight, bias))
    expected = torch.autograd.grad((want * gout).sum(), (x, weight, bias))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(got, expected))
    # float32 (the training dtype, with the vectorized exp inside SiLU) against the float64 result
    leaves32 = [t.detach().float().requires_grad_() for t in (x, weight, bias)]
    out32 = causal_conv1d(*leaves32, activation)
    assert out32.dtype == torch.float32 and rel_err(out32, want) < 1e-5
    got32 = torch.autograd.grad((out32 * gout.float()).sum(), leaves32)
    assert all(rel_err(a, b) < 1e-5 for a, b in zip(got32, expected))


def test_causal_conv1d_gradcheck_and_no_bias():
    g = torch.Generator().manual_seed(10)
    x = torch.randn(2, 3, 6, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: causal_conv1d(*a, activation="silu"), (x, w, b))
    assert torch.autograd.gradcheck(lambda *a: causal_conv1d(*a), (x, w))
    assert torch.equal(causal_conv1d(x, w), causal_conv1d(x, w, torch.zeros(3, dtype=torch.float64)))


def test_causal_conv1d_is_causal_and_validates():
    x = torch.randn(1, 3, 10)
    w = torch.randn(3, 4)
    y = causal_conv1d(x, w)
    x2 = x.clone()
    x2[..., 6:] += 1.0
    assert torch.equal(causal_conv1d(x2, w)[..., :6], y[..., :6])
    with pytest.raises(ValueError, match="activation"):
        causal_conv1d(x, w, activation="relu")
    with pytest.raises(ValueError, match="weight"):
        causal_conv1d(x, torch.randn(2, 4))


@pytest.mark.slow
def test_long_sequence_matches_reference():
    kw = _kwargs(make_inputs(batch=1, dim=8, nstate=16, length=1500, seed=9), True, True, True, True)
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    y = selective_scan(**{**kw, **leaves})
    grads = torch.autograd.grad(y.sum(), list(leaves.values()))
    leaves64 = {k: v.detach().double().requires_grad_() for k, v in leaves.items()}
    y_ref = reference_scan(**{**kw, **leaves64})
    grads_ref = torch.autograd.grad(y_ref.sum(), list(leaves64.values()))
    assert rel_err(y, y_ref) < 1e-5
    for name, got, want in zip(leaves, grads, grads_ref):
        assert rel_err(got, want) < 1e-4, name


def test_kernel_exp_accuracy_and_edge_cases():
    """The kernels' vectorizable float32 exp: <= 2 ulp on the normal range, 0 / inf / NaN at the edges."""
    import numpy as np

    from pointmamba.ops.vector_exp import exp_array

    x = np.concatenate([np.linspace(-87.3, 88.3, 400_001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30], dtype=np.float32)])
    got = exp_array(x.copy()).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 2 * np.finfo(np.float32).eps
    edges = np.array([-87.5, -1e4, -np.inf, 88.5, 1e4, np.inf, np.nan], dtype=np.float32)
    out = exp_array(edges.copy())
    assert np.array_equal(out[:3], np.zeros(3, np.float32))
    assert np.isposinf(out[3:6]).all() and np.isnan(out[6])
    x64 = np.array([-800.0, -1.0, 0.0, 1.0], dtype=np.float64)  # float64 keeps libm exp
    assert np.array_equal(exp_array(x64.copy()), np.exp(x64))


def _scan_grads(kw, gy_seed=11):
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    y, last = selective_scan(**{**kw, **leaves}, return_last_state=True)
    g = torch.Generator().manual_seed(gy_seed)
    loss = (y * torch.randn(y.shape, generator=g)).sum() + (last * torch.randn(last.shape, generator=g)).sum()
    return y, last, dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))


@pytest.mark.parametrize("groups", [None, 2])
def test_channel_blocks_do_not_change_results(monkeypatch, groups):
    """The kernels split channels into blocks (one per task; how many depends on the thread count). Every
    output is per channel, so the split cannot change it, except dB and dC: sums over channels, added
    block by block (reassociated), so equal to rounding. Forced 1 vs 3 blocks of uneven widths."""
    kernel = importlib.import_module("pointmamba.ops.scan_kernel")
    kw = _kwargs(make_inputs(batch=2, dim=70 if groups is None else 68, nstate=5, length=75, groups=groups, seed=12),
                 True, True, True, True)
    runs = []
    for blocks in (1, 3):
        monkeypatch.setattr(kernel, "_num_blocks", lambda batch, dim, g, n=blocks: n)
        runs.append(_scan_grads(kw))
    (y1, last1, g1), (y3, last3, g3) = runs
    assert torch.equal(y1, y3) and torch.equal(last1, last3)
    for name in g1:
        if name in ("B", "C"):
            assert rel_err(g3[name], g1[name].double()) < 1e-6, name
        else:
            assert torch.equal(g1[name], g3[name]), name
    # and the multi-block run is right, against the float64 reference
    y_ref = reference_scan(**kw)
    assert rel_err(y3, y_ref) < 1e-5


def test_time_major_inputs_are_read_in_place():
    """The Mamba block hands the scan (batch, dim, L) views of time-major memory; strided inputs give the
    same result as contiguous ones."""
    kw = _kwargs(make_inputs(batch=2, dim=8, nstate=4, length=40, seed=13), True, True, True, True)
    tm = {k: (v.transpose(1, 2).contiguous().transpose(1, 2) if k in ("u", "delta", "z", "B", "C") else v)
          for k, v in kw.items()}
    assert tm["u"].stride(1) == 1 and torch.equal(tm["u"], kw["u"])
    assert torch.equal(selective_scan(**tm), selective_scan(**kw))


def test_causal_conv1d_channel_blocks(monkeypatch):
    conv_kernel = importlib.import_module("pointmamba.ops.conv_kernel")
    g = torch.Generator().manual_seed(14)
    x = torch.randn(2, 50, 30, generator=g, requires_grad=True)
    w = torch.randn(50, 4, generator=g, requires_grad=True)
    b = torch.randn(50, generator=g, requires_grad=True)
    runs = []
    for blocks in (1, 3):
        monkeypatch.setattr(conv_kernel, "_num_blocks", lambda batch, dim, n=blocks: n)
        out = causal_conv1d(x, w, b, "silu")
        runs.append((out, torch.autograd.grad(out.square().sum(), (x, w, b))))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, c) for a, c in zip(runs[0][1], runs[1][1]))
