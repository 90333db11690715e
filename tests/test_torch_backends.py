"""The torch-native backends (what CUDA runs without mamba-ssm, causal-conv1d or spconv), forced on the CPU:
values and every gradient against the numba engines and float64 references, on packed batches."""
from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

from pointmamba.ops.conv1d import causal_conv1d
from pointmamba.ops.scan import scan_backend, selective_scan
from pointmamba.ops.submconv import sparse_conv
from pointmamba.point.batch import PointBatch
from test_selective_scan import CASES, NAMES, _kwargs, make_inputs, reference_scan, rel_err

scan_torch = importlib.import_module("pointmamba.ops.scan_torch")


@pytest.fixture
def backend(monkeypatch):
    """``backend("torch")`` / ``backend("numba")``: force every op onto it (for the calls that follow)."""
    def force(name: str) -> None:
        monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", name)
        monkeypatch.setenv("POINTMAMBA_BACKEND_CONV1D", name)
    return force


def _scan_and_grads(kw, seed=2):
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    y, last = selective_scan(**{**kw, **leaves}, return_last_state=True)
    g = torch.Generator().manual_seed(seed)
    gy, glast = torch.randn(y.shape, generator=g), torch.randn(last.shape, generator=g)
    loss = (y * gy.to(y.dtype)).sum() + (last * glast.to(last.dtype)).sum()
    return y, last, dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())))), (gy, glast)


@pytest.mark.parametrize("chunk", [4, 16])
@pytest.mark.parametrize("softplus,use_d,use_z,use_bias,groups", CASES)
def test_scan_matches_numba_and_float64(monkeypatch, backend, chunk, softplus, use_d, use_z, use_bias, groups):
    """3 samples, L = 29 (several chunks and a ragged last one for chunk 4; one padded chunk for 16)."""
    monkeypatch.setattr(scan_torch, "CHUNK", chunk)
    kw = _kwargs(make_inputs(batch=3, groups=groups, seed=20), softplus, use_d, use_z, use_bias)
    backend("torch")
    assert scan_backend(kw["u"]) == "torch"
    y, last, grads, (gy, glast) = _scan_and_grads(kw)
    backend("numba")
    y_nb, last_nb, grads_nb, _ = _scan_and_grads(kw)
    kw64 = {k: (v.double().requires_grad_() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    y_ref, last_ref = reference_scan(**kw64, return_last_state=True)
    leaves64 = [v for v in kw64.values() if isinstance(v, torch.Tensor)]
    grads_ref = torch.autograd.grad((y_ref * gy.double()).sum() + (last_ref * glast.double()).sum(), leaves64)
    assert y.dtype == torch.float32 and last.dtype == torch.float32
    assert rel_err(y, y_ref) < 1e-5 and rel_err(last, last_ref) < 1e-5
    assert rel_err(y, y_nb.double()) < 1e-5 and rel_err(last, last_nb.double()) < 1e-5
    for (name, got), want in zip(grads.items(), grads_ref):
        assert got.dtype == torch.float32 and got.shape == want.shape, name
        assert rel_err(got, want) < 1e-4, name
        assert rel_err(got, grads_nb[name].double()) < 1e-4, name


def test_scan_gradcheck_float64(monkeypatch, backend):
    monkeypatch.setattr(scan_torch, "CHUNK", 2)
    backend("torch")
    inputs = make_inputs(batch=2, dim=4, nstate=2, length=5, groups=2, seed=21, dtype=torch.float64)
    leaves = [inputs[k].clone().requires_grad_() for k in NAMES]

    def fn(u, delta, A, B, C, D, z, delta_bias):
        return selective_scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus=True, return_last_state=True)

    assert torch.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_scan_samples_do_not_share_state(monkeypatch, backend):
    """Each sample of a batch scanned alone gives the same rows, and changing one sample changes neither
    another's output nor the gradients of another's inputs."""
    monkeypatch.setattr(scan_torch, "CHUNK", 4)
    backend("torch")
    kw = _kwargs(make_inputs(batch=3, length=23, seed=22), True, True, True, True)
    y, last, grads, _ = _scan_and_grads(kw)
    for b in range(3):
        alone = {k: (v[b:b + 1] if k in ("u", "delta", "B", "C", "z") else v) for k, v in kw.items()}
        y_b, last_b = selective_scan(**alone, return_last_state=True)
        assert rel_err(y[b:b + 1], y_b.double()) < 1e-6 and rel_err(last[b:b + 1], last_b.double()) < 1e-6
    changed = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    changed["u"][1] += 5.0
    changed["delta"][1] *= 3.0
    y2, last2, grads2, _ = _scan_and_grads(changed)
    for b in (0, 2):
        assert torch.equal(y2[b], y[b]) and torch.equal(last2[b], last[b])
        for name in ("u", "delta", "B", "C", "z"):
            assert torch.equal(grads2[name][b], grads[name][b]), name
    assert not torch.allclose(y2[1], y[1], atol=1e-3)


@pytest.mark.parametrize("step_decay", [-50.0, -3000.0])
def test_scan_large_decays_stay_finite_and_right(monkeypatch, backend, step_decay):
    """delta * A of -50 or -3000 per step on some channels, beside slow channels, and steps with no decay:
    a trained model's range; every exponent the torch scan takes is <= 0, so nothing overflows."""
    monkeypatch.setattr(scan_torch, "CHUNK", 8)
    backend("torch")
    kw = _kwargs(make_inputs(batch=2, length=40, seed=23), False, True, True, False)
    kw["A"] = kw["A"].clone()
    kw["A"][:3] = step_decay  # with delta in [0, 1.5]: down to 1.5 * step_decay per step
    kw["delta"] = kw["delta"].clone()
    kw["delta"][:, :, ::5] = 0.0
    kw["delta"][:, 3:, 7:9] = 30.0  # long jumps on the slow channels
    y, last, grads, (gy, glast) = _scan_and_grads(kw)
    kw64 = {k: (v.double().requires_grad_() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    y_ref, last_ref = reference_scan(**kw64, return_last_state=True)
    leaves64 = [v for v in kw64.values() if isinstance(v, torch.Tensor)]
    grads_ref = torch.autograd.grad((y_ref * gy.double()).sum() + (last_ref * glast.double()).sum(), leaves64)
    assert torch.isfinite(y).all() and torch.isfinite(last).all()
    assert rel_err(y, y_ref) < 1e-5 and rel_err(last, last_ref) < 1e-5
    for (name, got), want in zip(grads.items(), grads_ref):
        assert torch.isfinite(got).all(), name
        assert rel_err(got, want) < 1e-4, name


def test_scan_under_autocast_and_half_inputs(backend):
    """Under autocast (bfloat16 here, CPU) the torch scan still computes in float32; bfloat16 inputs give a
    bfloat16 y computed from the rounded inputs in float32."""
    backend("torch")
    kw = _kwargs(make_inputs(seed=24), True, True, True, True)
    y32 = selective_scan(**kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_amp = selective_scan(**kw)
    assert y_amp.dtype == torch.float32 and torch.equal(y_amp, y32)
    low = {k: (v.to(torch.bfloat16) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    y_low = selective_scan(**low)
    assert y_low.dtype == torch.bfloat16
    assert rel_err(y_low.float(), reference_scan(**low)) < 2e-2  # only the final cast rounds


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("length", [0, 1, 3, 37])
def test_causal_conv1d_torch_matches_numba_and_float64(backend, activation, length):
    g = torch.Generator().manual_seed(25)
    x = torch.randn(3, 8, length, generator=g, requires_grad=True)
    w = torch.randn(8, 4, generator=g, requires_grad=True)
    b = torch.randn(8, generator=g, requires_grad=True)
    gout = torch.randn(3, 8, length, generator=g)
    runs = {}
    for name in ("torch", "numba"):
        backend(name)
        out = causal_conv1d(x, w, b, activation)
        assert out.shape == x.shape and out.dtype == torch.float32
        grads = torch.autograd.grad((out * gout).sum(), (x, w, b), allow_unused=True) if length else None
        runs[name] = (out, grads)
    if not length:
        return
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = F.conv1d(F.pad(x64, (3, 0)), w64.unsqueeze(1), b64, groups=8)
    ref = F.silu(ref) if activation else ref
    grads_ref = torch.autograd.grad((ref * gout.double()).sum(), (x64, w64, b64))
    for out, grads in runs.values():
        assert rel_err(out, ref) < 1e-6
        assert all(rel_err(a, r) < 1e-6 for a, r in zip(grads, grads_ref))
    backend("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):  # float32 math under autocast too
        assert torch.equal(causal_conv1d(x, w, b, activation), runs["torch"][0])


def test_causal_conv1d_torch_gradcheck(backend):
    backend("torch")
    g = torch.Generator().manual_seed(26)
    x = torch.randn(2, 3, 6, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: causal_conv1d(*a, activation="silu"), (x, w, bias))


def test_sparse_conv_builds_everything_in_torch(monkeypatch):
    """The rulebook conv (the spconv fallback) never leaves torch: no numpy round trip in the neighbour
    search, the rulebook or the conv, so on CUDA it all runs on the GPU. Under autocast it computes in
    float32 and gives the same result."""
    gen = torch.Generator().manual_seed(27)
    grid = torch.randint(0, 6, (80, 3), generator=gen)
    batch = torch.cat([torch.zeros(40), torch.ones(40)]).long()
    feat = torch.randn(80, 3, generator=gen, requires_grad=True)
    weight = torch.randn(4, 3, 3, 3, 3, generator=gen, requires_grad=True)
    bias = torch.randn(4, generator=gen)

    def no_numpy(*args, **kwargs):
        raise AssertionError("sparse_conv went through numpy")

    monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)
    out = sparse_conv(feat, PointBatch(grid.float(), batch=batch, grid_coord=grid), weight, bias)
    out.square().sum().backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        amp = sparse_conv(feat, PointBatch(grid.float(), batch=batch, grid_coord=grid), weight, bias)
    assert amp.dtype == torch.float32 and torch.equal(amp, out)


def test_mamba_model_on_torch_backends_matches_numba(monkeypatch, backend):
    """The whole bidirectional mixer on a packed batch of uneven samples: outputs and every parameter's
    gradient agree between the torch backends and the numba engines, and no state crosses samples."""
    from pointmamba.models.bimamba import BiMamba

    monkeypatch.setattr(scan_torch, "CHUNK", 4)
    torch.manual_seed(28)
    model = BiMamba(12, d_state=4, combine="concat")
    lengths = torch.tensor([7, 0, 23, 1, 12])
    x = torch.randn(int(lengths.sum()), 12, generator=torch.Generator().manual_seed(29))
    runs = {}
    for name in ("torch", "numba"):
        backend(name)
        model.zero_grad()
        out = model(x, lengths)
        out.square().sum().backward()
        runs[name] = (out.detach(), {k: p.grad.clone() for k, p in model.named_parameters()})
    assert rel_err(runs["torch"][0], runs["numba"][0].double()) < 1e-5
    for k, grad in runs["torch"][1].items():
        assert rel_err(grad, runs["numba"][1][k].double()) < 1e-4, k
    backend("torch")
    x2 = x.clone()
    x2[7:30] += 3.0  # the third sample (the second is empty)
    with torch.no_grad():
        y2 = model(x2, lengths)
    others = torch.ones(len(x), dtype=torch.bool)
    others[7:30] = False
    assert torch.allclose(y2[others], runs["torch"][0][others], atol=1e-6)
    assert not torch.allclose(y2[~others], runs["torch"][0][~others], atol=1e-3)
