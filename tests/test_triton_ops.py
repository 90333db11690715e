"""The Triton backend (``scan_triton.py``, ``conv1d_triton.py``) run by Triton's interpreter on CPU tensors,
against float64 references: outputs and every gradient.

The interpreter has to be on (``TRITON_INTERPRET=1``) when triton itself is imported, and in a test run
something may have imported triton before this module (the backend choice does, for CUDA devices). So
``test_kernels_under_the_interpreter`` runs this module again in a child pytest with the variable set from
the start, and the checks below run there only (here they are skipped, saying so). Running
``TRITON_INTERPRET=1 pytest tests/test_triton_ops.py`` runs them directly. What the interpreter cannot
check, that the GPU compiler lowers every kernel, ``test_kernels_compile_for_sm90`` checks in this process.

Tolerances, as a fraction of the reference's largest magnitude (``rel_err``):
- float32 inputs: 1e-5 for outputs, 1e-4 for gradients (float32 math, eps 6e-8, over sums of up to
  ~100 terms; measured 1e-7 to 3e-7, as tests/test_selective_scan.py's numba engine);
- bf16 inputs: the reference runs on the same bf16-rounded inputs, so only the float32 math and the final
  rounding of outputs and gradients to bf16 (8 significant bits, relative 2^-9 = 0.2 % of an element)
  differ: 1e-2.
Skipped where triton is not installed (the ``test`` extra installs it).
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from test_selective_scan import make_inputs, reference_scan, rel_err

triton = pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[test]' brings it)")

IN_CHILD = os.environ.get("TRITON_INTERPRET") == "1"  # then triton was imported under the interpreter
interpreted = pytest.mark.skipif(not IN_CHILD, reason="runs in test_kernels_under_the_interpreter's child "
                                                      "process (TRITON_INTERPRET=1 before triton is imported)")
NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
scan_triton = importlib.import_module("pointmamba.ops.scan_triton") if IN_CHILD else None
conv1d_triton = importlib.import_module("pointmamba.ops.conv1d_triton") if IN_CHILD else None


def _child(marks: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    for var in ("POINTMAMBA_BACKEND_SCAN", "POINTMAMBA_BACKEND_CONV1D"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marks,
                           "-k", "not under_the_interpreter and not gpu_check and not sm90", __file__],
                          cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
                          timeout=900)


def _check_child(marks: str) -> None:
    proc = _child(marks)
    tail = (proc.stdout[-6000:] + proc.stderr[-3000:])
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, tail


@pytest.mark.skipif(IN_CHILD, reason="this is the child process")
def test_kernels_under_the_interpreter():
    """Every fast check below, in a child process under the interpreter: about 10 s on 2 quiet cores, 25 s
    with other jobs on them."""
    _check_child("not slow")


@pytest.mark.slow
@pytest.mark.skipif(IN_CHILD, reason="this is the child process")
def test_slow_kernels_under_the_interpreter():
    """The slow checks below (the BiMamba model on both backends), in a child process: about 30 s."""
    _check_child("slow")


def _scan_and_grads(x: dict, kw: dict, seed: int = 11) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Our Triton scan on leaves ``x`` (None entries are left out) with the last state's gradient, and the
    float64 reference's; returns ([y, last, grads...], [same from the reference]) in NAMES order."""
    names = [k for k in NAMES if x.get(k) is not None]
    leaves = {k: x[k].detach().clone().requires_grad_() for k in names}
    leaves64 = {k: x[k].detach().double().requires_grad_() for k in names}
    args = {k: leaves.get(k) for k in NAMES}
    bc4 = {k: args[k] if args[k].dim() == 4 else args[k].unsqueeze(1) for k in ("B", "C")}
    y, last = scan_triton.selective_scan_triton(**{**args, **bc4}, delta_softplus=kw["softplus"],
                                                chunk=kw.get("chunk", 8), block_d=kw.get("block_d", 2))
    g = torch.Generator().manual_seed(seed)
    gy = torch.randn(y.shape, generator=g)
    glast = torch.randn(last.shape, generator=g)
    grads = torch.autograd.grad((y.float() * gy).sum() + (last * glast).sum(), list(leaves.values()))
    y_ref, last_ref = reference_scan(**{k: leaves64.get(k) for k in NAMES}, delta_softplus=kw["softplus"],
                                     return_last_state=True)
    grads_ref = torch.autograd.grad((y_ref * gy.double()).sum() + (last_ref * glast.double()).sum(),
                                    list(leaves64.values()))
    for name, got in zip(names, grads):
        assert got.dtype == leaves[name].dtype and got.shape == leaves[name].shape, name
    return [y, last, *grads], [y_ref, last_ref, *grads_ref]


# (softplus, D, z, delta_bias, groups, length, nstate, chunk, block_d): every option on and off, grouped
# B/C, lengths within one chunk, a multiple of the chunk and not, channels per group not a multiple of the
# block, a state size that is not a power of 2
SCAN_CASES = [
    (True, True, True, True, 2, 29, 3, 8, 2),
    (False, False, False, False, None, 16, 4, 8, 4),
    (True, False, True, False, None, 1, 4, 8, 2),
    (False, True, False, True, 3, 40, 2, 16, 1),
]


@interpreted
@pytest.mark.parametrize("softplus,use_d,use_z,use_bias,groups,length,nstate,chunk,block_d", SCAN_CASES)
def test_scan_matches_float64_reference(softplus, use_d, use_z, use_bias, groups, length, nstate, chunk, block_d):
    inputs = make_inputs(batch=2, dim=6, nstate=nstate, length=length, groups=groups, seed=length)
    for name, used in (("D", use_d), ("z", use_z), ("delta_bias", use_bias)):
        if not used:
            inputs[name] = None
    got, want = _scan_and_grads(inputs, {"softplus": softplus, "chunk": chunk, "block_d": block_d})
    assert got[0].dtype == torch.float32 and got[1].dtype == torch.float32
    labels = ["y", "last"] + [k for k in NAMES if inputs.get(k) is not None]
    for label, g, w in zip(labels, got, want):
        assert rel_err(g, w) < (1e-5 if label in ("y", "last") else 1e-4), label


@interpreted
def test_scan_bf16_inputs():
    """bf16 u, delta, B, C, z (as under autocast) with float32 A, D, delta_bias: y and their gradients in bf16."""
    inputs = make_inputs(batch=2, dim=6, nstate=4, length=37, groups=None, seed=5)
    for name in ("u", "delta", "B", "C", "z"):
        inputs[name] = inputs[name].to(torch.bfloat16)
    got, want = _scan_and_grads(inputs, {"softplus": True, "chunk": 16, "block_d": 4})
    assert got[0].dtype == torch.bfloat16
    for label, g, w in zip(["y", "last"] + list(NAMES), got, want):
        assert rel_err(g.float(), w) < 1e-2, label


@interpreted
def test_scan_large_decays():
    """A trained model's deltas (delta * A down to about -100 per step, so exp underflows): nothing is inf or
    NaN and everything but dA holds the float32 tolerances. dA reads a_t h_{t-1} as h_t - delta_t u_t B_t,
    as mamba-ssm's backward kernel does, so its error is float32 eps times the size of lam * delta u B (the
    terms of dB), not of dA, which here is itself ~1e-7 (every state forgets): measured 1e-7 absolute
    against a max |dB| of 54; bound 1e-7 of max |dB|. (The numba and torch backends multiply a_t h_{t-1}
    directly and keep dA's own relative accuracy.)"""
    inputs = make_inputs(batch=1, dim=4, nstate=4, length=45, groups=None, seed=12)
    inputs["delta"] = inputs["delta"] + 4.0  # softplus(raw + bias) around 4
    inputs["A"] = -torch.arange(1, 5, dtype=torch.float32).repeat(4, 1) * 6.0  # delta * A to about -100
    got, want = _scan_and_grads(inputs, {"softplus": True, "chunk": 16, "block_d": 2})
    labels = ["y", "last"] + list(NAMES)
    for label, g, w in zip(labels, got, want):
        assert torch.isfinite(g).all(), label
        if label != "A":
            assert rel_err(g, w) < (1e-5 if label in ("y", "last") else 1e-4), label
    dA, dA_ref, dB_ref = got[labels.index("A")], want[labels.index("A")], want[labels.index("B")]
    assert float((dA.double() - dA_ref).abs().max()) < 1e-7 * float(dB_ref.abs().max())


@interpreted
def test_empty_sequences():
    """L = 0 (no chunk to run): empty outputs, a zero last state and zero parameter gradients."""
    x = {k: v.requires_grad_() for k, v in make_inputs(batch=2, dim=6, nstate=4, length=0).items()}
    y, last = scan_triton.selective_scan_triton(x["u"], x["delta"], x["A"], x["B"].unsqueeze(1),
                                                x["C"].unsqueeze(1), x["D"], x["z"], x["delta_bias"], True)
    assert y.shape == (2, 6, 0) and not last.any()
    (y.sum() + last.sum()).backward()
    assert all(not v.grad.any() for v in x.values())
    xc, w = torch.randn(2, 3, 0, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    out = conv1d_triton.causal_conv1d_triton(xc, w, None, True)
    out.sum().backward()
    assert out.shape == (2, 3, 0) and not w.grad.any()


def _padded(samples: list[torch.Tensor], lmax: int) -> torch.Tensor:
    """(dim, L_i) samples -> (batch, dim, lmax), zeros on the right."""
    return torch.stack([F.pad(s, (0, lmax - s.shape[-1])) for s in samples])


@interpreted
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_padded_variable_lengths_both_directions(reverse):
    """The model's packing (``BiMamba``): samples of different lengths padded on the right into one batch,
    the backward direction scanning each sample reversed. Each sample's outputs and gradients equal the
    reference scan of that sample alone, and nothing flows into the padding."""
    lengths = [5, 21, 13]
    lmax, dim, nstate = max(lengths), 4, 3
    g = torch.Generator().manual_seed(7)
    per = [make_inputs(batch=1, dim=dim, nstate=nstate, length=n, seed=n) for n in lengths]

    def batch_of(name: str) -> torch.Tensor:
        rows = [p[name][0] for p in per]
        return _padded([r.flip(-1) if reverse else r for r in rows], lmax)

    shared = {k: per[0][k] for k in ("A", "D", "delta_bias")}
    leaves = {k: batch_of(k).requires_grad_() for k in ("u", "delta", "B", "C", "z")}
    y, _ = scan_triton.selective_scan_triton(leaves["u"], leaves["delta"], shared["A"], leaves["B"].unsqueeze(1),
                                             leaves["C"].unsqueeze(1), shared["D"], leaves["z"],
                                             shared["delta_bias"], True, chunk=8, block_d=2)
    valid = torch.arange(lmax) < torch.tensor(lengths)[:, None]  # (batch, lmax)
    gy = torch.randn(y.shape, generator=g) * valid[:, None]  # the model drops the padded outputs
    (y * gy).sum().backward()
    for i, n in enumerate(lengths):
        one = {k: per[i][k][0] for k in ("u", "delta", "B", "C", "z")}
        ref_in = {k: (v.flip(-1) if reverse else v).double()[None].requires_grad_() for k, v in one.items()}
        y_ref = reference_scan(**ref_in, **{k: v.double() for k, v in shared.items()}, delta_softplus=True)
        assert rel_err(y[i, :, :n], y_ref[0]) < 1e-5
        (y_ref * gy[i:i + 1, :, :n].double()).sum().backward()
        for k, leaf in leaves.items():
            assert rel_err(leaf.grad[i, ..., :n], ref_in[k].grad[0]) < 1e-4, (k, i)
            assert not leaf.grad[i, ..., n:].any(), (k, i)  # padding gets no gradient


def _backend(mp: pytest.MonkeyPatch, name: str) -> None:
    mp.setenv("POINTMAMBA_BACKEND_SCAN", name)
    mp.setenv("POINTMAMBA_BACKEND_CONV1D", name)


@interpreted
def test_scan_dispatch_matches_the_numba_backend(monkeypatch):
    """Forced ``triton`` on CPU tensors (the interpreter) through ``selective_scan``, default tiles, with the
    last state: the numba backend's results."""
    from pointmamba.ops.scan import scan_backend, selective_scan

    kw = make_inputs(batch=2, dim=6, nstate=4, length=70, groups=None, seed=9)
    results = {}
    for name in ("numba", "triton"):
        _backend(monkeypatch, name)
        assert scan_backend(kw["u"]) == name
        results[name] = selective_scan(**kw, delta_softplus=True, return_last_state=True)
    for a, b in zip(results["triton"], results["numba"]):
        assert rel_err(a, b.double()) < 1e-5


@interpreted
@pytest.mark.slow
def test_bimamba_matches_the_numba_backend(monkeypatch):
    """The model's BiMamba over packed samples of different lengths (the conv and the scan on transposed
    time-major views, both directions) on the triton backend: output and every parameter gradient equal
    the numba backend's. Slow: about 15 s in the interpreter."""
    from pointmamba.models.bimamba import BiMamba

    torch.manual_seed(0)
    layer = BiMamba(8, d_state=4)
    lengths = torch.tensor([30, 70, 1])
    x = torch.randn(int(lengths.sum()), 8)
    results = {}
    for name in ("numba", "triton"):
        _backend(monkeypatch, name)
        layer.zero_grad()
        out = layer(x, lengths)
        out.square().sum().backward()
        results[name] = [out] + [p.grad.clone() for p in layer.parameters()]
    for i, (a, b) in enumerate(zip(results["triton"], results["numba"])):
        assert rel_err(a, b.double()) < (1e-5 if i == 0 else 1e-4), i


@interpreted
@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("length,dim,width", [(1, 3, 4), (70, 18, 4), (64, 16, 2)])
def test_causal_conv1d_matches_float64_reference(activation, use_bias, length, dim, width):
    """Lengths and channel counts on and off the tiles' edges (64 steps, 16 channels); x time-major as the
    Mamba block passes it."""
    g = torch.Generator().manual_seed(length + dim)
    x = torch.randn(2, length, dim, generator=g).transpose(1, 2)
    w = torch.randn(dim, width, generator=g)
    b = torch.randn(dim, generator=g) if use_bias else None
    leaves = [t.clone().requires_grad_() for t in (x, w, b) if t is not None]
    leaves64 = [t.double().requires_grad_() for t in leaves]
    out = conv1d_triton.causal_conv1d_triton(leaves[0], leaves[1], leaves[2] if use_bias else None,
                                             activation == "silu")
    assert out.stride() == x.stride()  # x's layout is kept
    ref = F.conv1d(F.pad(leaves64[0], (width - 1, 0)), leaves64[1].unsqueeze(1),
                   leaves64[2] if use_bias else None, groups=dim)
    ref = F.silu(ref) if activation else ref
    assert rel_err(out, ref) < 1e-5
    gout = torch.randn(out.shape, generator=g)
    grads = torch.autograd.grad((out * gout).sum(), leaves)
    grads_ref = torch.autograd.grad((ref * gout.double()).sum(), leaves64)
    for got, want in zip(grads, grads_ref):
        assert got.shape == want.shape and rel_err(got, want) < 1e-4


@interpreted
def test_causal_conv1d_bf16_and_dispatch(monkeypatch):
    """bf16 x (weight and bias float32, as under autocast): bf16 out and dx within bf16 rounding; and the
    forced ``triton`` backend of ``causal_conv1d`` runs these kernels."""
    from pointmamba.ops.conv1d import causal_conv1d, conv1d_backend

    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 24, 77, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(24, 4, generator=g).requires_grad_()
    b = torch.randn(24, generator=g).requires_grad_()
    _backend(monkeypatch, "triton")
    assert conv1d_backend(x) == "triton"
    out = causal_conv1d(x, w, b, activation="silu")
    assert out.dtype == torch.bfloat16
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = F.silu(F.conv1d(F.pad(x64, (3, 0)), w64.unsqueeze(1), b64, groups=24))
    assert rel_err(out.float(), ref) < 1e-2
    gout = torch.randn(out.shape, generator=g)
    grads = torch.autograd.grad((out.float() * gout).sum(), [x, w, b])
    grads_ref = torch.autograd.grad((ref * gout.double()).sum(), [x64, w64, b64])
    assert grads[0].dtype == torch.bfloat16
    for got, want in zip(grads, grads_ref):
        assert rel_err(got.float(), want) < 1e-2


def _compile_for_sm90(fn, constexprs: dict, pointer_dtype: str, num_warps: int = 4):  # noqa: ANN001, ANN202
    """Triton's own compiler, TTIR to a cubin for an H100/H200 (sm_90), with the wheel's ptxas: no GPU needed."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    low = ("u_ptr", "delta_ptr", "B_ptr", "C_ptr", "z_ptr", "y_ptr", "du_ptr", "ddelta_ptr", "dz_ptr", "gy_ptr",
           "x_ptr", "out_ptr", "gout_ptr", "dx_ptr")  # the tensors that may be bf16 under autocast
    signature = {name: "constexpr" if name in constexprs else
                 (f"*{pointer_dtype}" if name in low else "*fp32") if name.endswith("_ptr") else "i32"
                 for name in fn.arg_names}
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "enable_fp_fusion": True})


@pytest.mark.skipif(IN_CHILD, reason="the interpreter's kernels cannot be compiled: the parent process runs it")
@pytest.mark.parametrize("flags,dtype", [(True, "bf16"), (False, "fp32")])
def test_kernels_compile_for_sm90(flags, dtype):
    """Every kernel goes through Triton's GPU compiler down to a cubin for sm_90 (what a lent H100/H200
    runs), every optional input on and off: the lowering (the 3D associative scans, reverse included, the
    atomics) is checked on machines without a GPU, where the interpreter cannot check it."""
    scan = importlib.import_module("pointmamba.ops.scan_triton")
    conv = importlib.import_module("pointmamba.ops.conv1d_triton")
    if not isinstance(scan._scan_fwd_kernel, triton.runtime.jit.JITFunction):
        pytest.skip("triton was imported under TRITON_INTERPRET=1 in this process")
    options = dict(HAS_D=flags, HAS_Z=flags, HAS_BIAS=flags, SOFTPLUS=flags, BLOCK_D=scan.BLOCK_D,
                   CHUNK=scan.CHUNK, BLOCK_N=16)
    kernels = [_compile_for_sm90(scan._scan_fwd_kernel, options, dtype, scan.NUM_WARPS),
               _compile_for_sm90(scan._scan_bwd_kernel, dict(options, HAS_GLAST=flags), dtype, scan.NUM_WARPS)]
    tile = dict(WIDTH=4, BLOCK_D=conv.BLOCK_D, BLOCK_L=conv.BLOCK_L)
    kernels += [_compile_for_sm90(conv._conv_fwd_kernel, dict(tile, HAS_BIAS=flags, SILU=flags), dtype),
                _compile_for_sm90(conv._conv_bwd_pre_kernel, dict(tile, HAS_BIAS=flags, SILU=flags), dtype),
                _compile_for_sm90(conv._conv_bwd_dx_kernel, tile, dtype)]
    for kernel in kernels:
        assert len(kernel.asm["cubin"]) > 1000 and ".entry" in kernel.asm["ptx"]
    assert "red.global" in kernels[1].asm["ptx"] or "atom.global" in kernels[1].asm["ptx"]  # dB, dC


@pytest.mark.skipif(IN_CHILD, reason="no kernels: the parent process runs it")
def test_gpu_check_triton_rows_judge_issue_45_targets(monkeypatch):
    """bench/gpu_check.py's triton rows: triton / mamba-ssm must be <= 1.5 and torch / triton >= 5, from the
    speed rows' seconds (given here, as the GPU would measure them); a miss is reported, not failed."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    import gpu_check
    from gpu_check import QUICK, Where

    torch_w, ext_w, triton_w = Where("cuda", "torch"), Where("cuda", "auto"), Where("cuda", "triton")
    monkeypatch.setattr(gpu_check, "SCAN_SPEEDS", {"cuda torch:torch": 8.0e-3, "cuda ext:mamba_ssm": 1.0e-3,
                                                   "cuda triton:triton": 1.2e-3})
    near, = gpu_check.triton_ratio_rows("triton / mamba-ssm", (triton_w, "triton"), (ext_w, "mamba_ssm"), QUICK)
    fast, = gpu_check.triton_ratio_rows("torch / triton", (torch_w, "torch"), (triton_w, "triton"), QUICK)
    assert near.value == pytest.approx(1.2) and near.status == "ok" and near.where == "cuda triton"
    assert fast.value == pytest.approx(8 / 1.2) and fast.status == "ok" and fast.where == "cuda triton"
    gpu_check.SCAN_SPEEDS["cuda triton:triton"] = 2.0e-3
    slow, = gpu_check.triton_ratio_rows("triton / mamba-ssm", (triton_w, "triton"), (ext_w, "mamba_ssm"), QUICK)
    weak, = gpu_check.triton_ratio_rows("torch / triton", (torch_w, "torch"), (triton_w, "triton"), QUICK)
    assert slow.status == "MISS" and weak.status == "MISS" and weak.value == pytest.approx(4.0)
