"""Our calls into the CUDA extensions follow their signatures.

mamba-ssm and causal-conv1d import only with CUDA, so these tests put stand-ins with the extensions'
exact signatures and argument checks (mamba-ssm 2.3.2.post1's ``selective_scan_fn``, causal-conv1d
1.7.0's ``causal_conv1d_fn``) where ``backend.extension`` finds them, compute with our torch ops, and
route CPU tensors to them. What they test is the calling convention: causal-conv1d's 4th parameter is
``seq_idx``, not ``activation`` (a positional ``activation`` went in as ``seq_idx`` before). Where the real
package imports (a CUDA machine), the stand-in's signature is checked against it.
"""
from __future__ import annotations

import importlib
import inspect

import pytest
import torch
import torch.nn.functional as F

from pointmamba.models.mamba import Mamba
from pointmamba.ops import backend as backend_mod
from pointmamba.ops.conv1d import causal_conv1d
from pointmamba.ops.scan import _selective_scan_torch


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,  # noqa: ANN001, ANN201
                     final_states_out=None, activation=None):
    """causal-conv1d 1.7.0's signature and the argument handling of its ``CausalConv1dFn.forward``."""
    if activation not in [None, "silu", "swish"]:
        raise NotImplementedError("activation must be None, silu, or swish")
    seq_idx = seq_idx.contiguous() if seq_idx is not None else None  # as the real one: a str fails here
    if initial_states is not None or return_final_states or final_states_out is not None:
        raise AssertionError("pointmamba never passes states")
    width = weight.shape[1]
    out = F.conv1d(F.pad(x, (width - 1, 0)), weight.unsqueeze(1), bias, groups=x.shape[1])
    return F.silu(out) if activation in ("silu", "swish") else out


def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,  # noqa: ANN001, ANN201
                      return_last_state=False):
    """mamba-ssm 2.3.2.post1's signature; the math of our torch engine."""
    return _selective_scan_torch(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)


STAND_INS = {"conv1d": ("causal_conv1d", causal_conv1d_fn), "scan": ("mamba_ssm.ops.selective_scan_interface",
                                                                       selective_scan_fn)}


@pytest.fixture
def extensions_on_cpu(monkeypatch):
    """``causal_conv1d`` and ``selective_scan`` dispatch CPU tensors to the stand-ins."""
    for env in ("POINTMAMBA_BACKEND_SCAN", "POINTMAMBA_BACKEND_CONV1D", "POINTMAMBA_BACKEND_SPCONV"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(backend_mod, "_imports", {op: (fn, None) for op, (_, fn) in STAND_INS.items()})
    real_choose = backend_mod.choose

    def choose(op: str, device: torch.device | str) -> str:
        return backend_mod.OPS[op].extension if op in STAND_INS else real_choose(op, device)

    monkeypatch.setattr(backend_mod, "choose", choose)


@pytest.mark.parametrize("activation", [None, "silu"])
def test_causal_conv1d_passes_activation_by_keyword(extensions_on_cpu, activation):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 300, 16, generator=g).transpose(1, 2)  # the Mamba block's channel-last view
    weight, bias = torch.randn(16, 4, generator=g), torch.randn(16, generator=g)
    got = causal_conv1d(x, weight, bias, activation=activation)
    want = F.conv1d(F.pad(x, (3, 0)), weight.unsqueeze(1), bias, groups=16)
    want = F.silu(want) if activation else want
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def _forward_backward(block: Mamba, x: torch.Tensor) -> list[torch.Tensor]:
    block.zero_grad()
    xs = x.clone().requires_grad_()
    y = block(xs)
    y.square().sum().backward()
    return [y.detach(), xs.grad] + [p.grad.clone() for p in block.parameters()]


def test_mamba_block_through_both_extensions_matches_the_cpu_engines(extensions_on_cpu, monkeypatch):
    torch.manual_seed(0)
    block = Mamba(d_model=16, d_state=8)
    x = torch.randn(2, 64, 16)
    got = _forward_backward(block, x)
    monkeypatch.setattr(backend_mod, "choose", lambda op, device: backend_mod.OPS[op].cpu)  # numba engines
    want = _forward_backward(block, x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", sorted(STAND_INS))
def test_stand_in_signatures_match_the_installed_extension(op):
    module_name, stand_in = STAND_INS[op]
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, OSError (no libcudart) ...
        pytest.skip(f"{module_name} does not import here ({type(exc).__name__}); checked where it does")
    real = getattr(module, stand_in.__name__)
    assert list(inspect.signature(real).parameters) == list(inspect.signature(stand_in).parameters)
