"""Backend choice: the report, the environment overrides, their errors, the fallback warning."""
from __future__ import annotations

import importlib
import logging
import warnings

import pytest
import torch

from pointmamba.ops import BackendError, backend_report, backends
from pointmamba.ops.conv1d import causal_conv1d, conv1d_backend
from pointmamba.ops.submconv import sparse_conv_backend
from pointmamba.ops.scan import scan_backend, selective_scan

backend_mod = importlib.import_module("pointmamba.ops.backend")
ENVS = ("POINTMAMBA_BACKEND_SCAN", "POINTMAMBA_BACKEND_CONV1D", "POINTMAMBA_BACKEND_SPCONV")
CUDA = torch.device("cuda")  # a device description only: nothing here allocates on it


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    """No override from the caller's environment, a fresh import cache, warnings and log lines."""
    for env in ENVS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(backend_mod, "_imports", {})
    monkeypatch.setattr(backend_mod, "_warned", set())
    monkeypatch.setattr(backend_mod, "_logged", set())


def _missing(monkeypatch, *ops):
    """Make the ops' extensions (or "triton") unimportable, whatever is installed."""
    for op in ops:
        module = "triton" if op == "triton" else backend_mod.OPS[op].extension
        backend_mod._imports[op] = (None, f"ModuleNotFoundError: No module named '{module}'")


def _present(monkeypatch, op):
    backend_mod._imports[op] = (object(), None)


def test_cpu_defaults_and_report():
    assert backends() == {"scan": "numba", "conv1d": "numba", "spconv": "torch"}
    assert backends("cpu") == backends(torch.device("cpu"))
    text = backend_report(["cpu"])
    assert text == "pointmamba backends on cpu: scan=numba, conv1d=numba, spconv=torch"
    u = torch.zeros(1)
    assert scan_backend(u) == "numba" and conv1d_backend(u) == "numba" and sparse_conv_backend(u) == "torch"
    assert backend_mod._imports == {}  # CPU never tries to import the CUDA packages


def test_cuda_auto_falls_back_to_torch_with_one_warning(monkeypatch, caplog):
    _missing(monkeypatch, "scan", "conv1d", "spconv", "triton")
    # the sparse conv's fallback is the gathered conv (measured faster on CUDA), the others' plain torch
    assert backends(CUDA) == {"scan": "torch", "conv1d": "torch", "spconv": "gather"}
    with pytest.warns(RuntimeWarning, match=r"mamba_ssm not importable .*No module named 'mamba_ssm'.*mamba-ssm"):
        assert backend_mod.choose("scan", CUDA) == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second call does not warn again
        assert backend_mod.choose("scan", CUDA) == "torch"
    with pytest.warns(RuntimeWarning, match="causal-conv1d"):
        backend_mod.choose("conv1d", CUDA)
    with pytest.warns(RuntimeWarning, match=r"spconv not importable.*gathered conv.*POINTMAMBA_BACKEND_SPCONV=gather"):
        assert backend_mod.choose("spconv", CUDA) == "gather"
    text = backend_report(["cpu", "cuda"])
    assert "pointmamba backends on cuda: scan=torch (mamba_ssm not importable" in text
    # --verbose shows the choice (once) with the reason
    monkeypatch.setattr(backend_mod, "_logged", set())
    with caplog.at_level(logging.DEBUG, logger="pointmamba.ops.backend"):
        backend_mod.choose("scan", CUDA)
        backend_mod.choose("scan", CUDA)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "selective_scan: torch backend (inputs on cuda)" in lines[0] and "mamba_ssm" in lines[0]


def test_cuda_auto_takes_the_extension_when_it_imports(monkeypatch):
    for op in ("scan", "conv1d", "spconv"):
        _present(monkeypatch, op)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert backends(CUDA) == {"scan": "mamba_ssm", "conv1d": "causal_conv1d", "spconv": "spconv"}
    assert backends("cpu") == {"scan": "numba", "conv1d": "numba", "spconv": "torch"}  # CPU keeps ours


def test_cuda_auto_takes_triton_without_the_extension(monkeypatch, caplog):
    """Without mamba-ssm / causal-conv1d, auto runs our Triton kernels on CUDA, silently (the no-compile
    path) but the report says why; forcing triton needs CUDA tensors, or the interpreter for CPU ones."""
    _missing(monkeypatch, "scan", "conv1d", "spconv")
    _present(monkeypatch, "triton")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert backends(CUDA) == {"scan": "triton", "conv1d": "triton", "spconv": "gather"}
        assert backend_mod.choose("scan", CUDA) == "triton" and backend_mod.choose("conv1d", CUDA) == "triton"
    assert "scan=triton (mamba_ssm not importable" in backend_report(["cuda"])
    assert backends("cpu") == {"scan": "numba", "conv1d": "numba", "spconv": "torch"}  # CPU keeps numba
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(BackendError, match="Triton runs CUDA tensors"):
        backends("cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert backends("cpu")["scan"] == "triton"
    _missing(monkeypatch, "triton")
    with pytest.raises(BackendError, match=r"triton cannot be imported .*No module named 'triton'"):
        backends(CUDA)


def test_overrides(monkeypatch):
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "torch")
    monkeypatch.setenv("POINTMAMBA_BACKEND_CONV1D", "Torch")
    assert backends() == {"scan": "torch", "conv1d": "torch", "spconv": "torch"}
    _missing(monkeypatch, "scan")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chosen, not a fallback: no warning
        assert backends(CUDA)["scan"] == "torch"
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "numba")  # CUDA tensors then go through the CPU
    assert backends(CUDA)["scan"] == "numba"
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "auto")
    assert backends()["scan"] == "numba"
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "mamba-ssm")  # the pip spelling works too
    _present(monkeypatch, "scan")
    assert backends(CUDA)["scan"] == "mamba_ssm"
    assert "forced by POINTMAMBA_BACKEND_SCAN=mamba-ssm POINTMAMBA_BACKEND_CONV1D=Torch" in backend_report(["cpu"])


def test_forced_backend_errors(monkeypatch):
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "cuda")
    with pytest.raises(BackendError, match=r"POINTMAMBA_BACKEND_SCAN='cuda'.*auto, mamba_ssm, torch, numba"):
        backends()
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "auto")
    monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", "numba")
    with pytest.raises(BackendError, match="sparse_conv has no such backend; choose one of auto, spconv, torch, gather$"):
        backends()
    assert "spconv=ERROR" in backend_report(["cpu"])  # the report says so instead of raising
    monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", "spconv")
    with pytest.raises(BackendError, match="spconv runs CUDA tensors only, these are on cpu"):
        backends()
    monkeypatch.delenv("POINTMAMBA_BACKEND_SPCONV")
    monkeypatch.setenv("POINTMAMBA_BACKEND_CONV1D", "causal_conv1d")
    _missing(monkeypatch, "conv1d")
    with pytest.raises(BackendError, match=r"cannot be imported \(ModuleNotFoundError.*install causal-conv1d"):
        backends(CUDA)
    # the ops raise it too, before any work
    x = torch.randn(1, 2, 5)
    with pytest.raises(BackendError, match="CUDA tensors only"):
        causal_conv1d(x, torch.randn(2, 4))
    monkeypatch.setenv("POINTMAMBA_BACKEND_SCAN", "mamba_ssm")
    with pytest.raises(BackendError, match="CUDA tensors only"):
        selective_scan(x, x.abs(), -torch.ones(2, 3), torch.randn(1, 3, 5), torch.randn(1, 3, 5))
    assert issubclass(BackendError, ValueError)  # the tools print it as one line and exit 2


def test_tools_verbose_flag_and_start_up_report(capsys):
    """pointmamba.cli._common.parse_args: --verbose configures the pointmamba loggers at DEBUG; the report goes to stderr."""
    import argparse

    from pointmamba.cli import _common as common
    logger = logging.getLogger("pointmamba")
    saved = (logger.level, list(logger.handlers))
    # a tool run in this process earlier (tests/support/tools.run_tool) left its handler: start without it
    logger.handlers[:] = [h for h in saved[1] if not getattr(h, "_pointmamba_tools", False)]
    others = len(logger.handlers)
    try:
        args = common.parse_args(argparse.ArgumentParser(), ["--verbose"])
        assert args.verbose and logger.getEffectiveLevel() == logging.DEBUG
        assert "pointmamba backends on cpu: scan=numba" in capsys.readouterr().err
        common.parse_args(argparse.ArgumentParser(), [])
        assert logger.getEffectiveLevel() == logging.WARNING and len(logger.handlers) == others + 1
    finally:
        logger.setLevel(saved[0])
        logger.handlers[:] = saved[1]
