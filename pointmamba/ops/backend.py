"""Which implementation each dispatching op runs: decided in one function, reported, and overridable.

| op (``POINTMAMBA_BACKEND_*``) | function       | backends                            | auto on CUDA / CPU                |
|-------------------------------|----------------|-------------------------------------|-----------------------------------|
| scan (``_SCAN``)              | selective_scan | mamba_ssm, torch, numba, triton     | mamba_ssm > triton > torch / numba |
| conv1d (``_CONV1D``)          | causal_conv1d  | causal_conv1d, torch, numba, triton | causal_conv1d > triton > torch / numba |
| spconv (``_SPCONV``)          | sparse_conv    | spconv, torch, gather               | spconv > gather / torch           |

(a > b: a where it imports, else b)

- the extension (mamba_ssm, causal_conv1d, spconv): the CUDA package, CUDA tensors only;
- triton: our Triton kernels (``scan_triton.py``, ``conv1d_triton.py``), compiled on first call, nothing at
  install time (Triton ships with CUDA builds of torch); CUDA tensors, or CPU tensors when
  ``TRITON_INTERPRET=1`` runs them in Triton's interpreter (the tests);
- torch: plain torch ops on the tensors' own device (``scan_torch.py``, ``F.conv1d``, our rulebook
  gather + matmul); on other devices than CPU and CUDA auto picks it too;
- numba: our CPU kernels (fastest on CPU); CUDA tensors make a round trip through the CPU;
- gather (spconv only): the gathered conv (``submconv_gather.py``), one matmul per conv on any device: far
  fewer kernel launches than the rulebook, more arithmetic. Auto takes it on CUDA without spconv: the recipe's
  training step 1.06-1.27x the rulebook's on two H200s, every agreement row inside (``docs/results/gpu/``); on the
  CPU it is 8 % slower, so the CPU keeps the rulebook.

An environment variable set to anything but ``auto`` forces that backend; a forced backend that cannot
run raises ``BackendError`` (a ValueError, so the tools print it as one line) saying why. When auto has to
fall back to torch on CUDA because a package does not import, a ``RuntimeWarning`` says so once per op
(auto taking triton for want of the extension is reported, not warned about: it is the no-compile path).
Models never branch on the device: they call the op, and the op asks ``choose(op, device)``.
"""
from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

__all__ = ["OPS", "BackendError", "backends", "choose", "extension", "report"]


class BackendError(ValueError):
    """A backend was asked for (environment variable) that does not exist or cannot run here."""


@dataclass(frozen=True)
class Op:
    name: str  # "scan"
    function: str  # the op's function, for messages
    extension: str  # the CUDA extension's module name, also the backend's name
    package: str  # what to pip install
    fallback: str  # what auto uses on CUDA without the extension, in words
    cpu: str  # auto's backend on CPU
    triton: bool = False  # has our Triton kernels
    more: tuple[str, ...] = ()  # further backends of ours, on any device, taken only when forced (or as `cuda`)
    cuda: str = "torch"  # ours that auto takes on CUDA without the extension (and without Triton kernels)

    @property
    def env(self) -> str:
        return f"POINTMAMBA_BACKEND_{self.name.upper()}"

    @property
    def choices(self) -> tuple[str, ...]:
        return (("auto", self.extension, "torch") + (("numba",) if self.cpu == "numba" else ())
                + (("triton",) if self.triton else ()) + self.more)


OPS: dict[str, Op] = {
    "scan": Op("scan", "selective_scan", "mamba_ssm", "mamba-ssm", "the chunked torch scan", "numba", True),
    "conv1d": Op("conv1d", "causal_conv1d", "causal_conv1d", "causal-conv1d", "torch's conv1d", "numba", True),
    "spconv": Op("spconv", "sparse_conv", "spconv", "spconv-cuXXX", "our gathered conv", "torch", more=("gather",),
             cuda="gather"),
}

_imports: dict[str, tuple[Any, str | None]] = {}  # op or "triton" -> (imported function / module or None, why not)
_warned: set[str] = set()
_logged: set[tuple[str, str, str]] = set()


def _import(op: str) -> Any:
    if op == "triton":
        import triton
        return triton
    if op == "scan":
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
        return selective_scan_fn
    if op == "conv1d":
        from causal_conv1d import causal_conv1d_fn
        return causal_conv1d_fn
    import spconv.pytorch as spconv_pytorch  # noqa: PLC0415 - spconv's CPU wheel shares the module name

    return spconv_pytorch


def extension(op: str) -> Any | None:
    """The op's CUDA extension (mamba-ssm's ``selective_scan_fn``, causal-conv1d's ``causal_conv1d_fn``, the
    ``spconv.pytorch`` module), or None where it cannot be imported; tried once per process."""
    if op not in _imports:
        try:
            _imports[op] = (_import(op), None)
        except Exception as exc:  # noqa: BLE001 - ImportError, OSError (missing libcudart), RuntimeError ...
            _imports[op] = (None, f"{type(exc).__name__}: {exc}")
    return _imports[op][0]


def triton_error() -> str | None:
    """Why Triton cannot be imported here, or None where it can; tried once per process."""
    return None if extension("triton") is not None else _imports["triton"][1]


def interpreting() -> bool:
    """Whether Triton's interpreter is asked for (``TRITON_INTERPRET=1``): it runs our Triton kernels on CPU
    tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _requested(op: Op) -> str:
    raw = os.environ.get(op.env, "auto").strip() or "auto"
    value = raw.lower().replace("-", "_")
    if value not in op.choices:
        raise BackendError(f"{op.env}={raw!r}: {op.function} has no such backend; "
                           f"choose one of {', '.join(op.choices)}")
    return value


def _choose(name: str, device: torch.device) -> tuple[str, str | None]:
    """(backend, why auto did not take the extension on CUDA or None); raises BackendError for a forced
    backend that cannot run."""
    op = OPS[name]
    want = _requested(op)
    if want == "auto":
        if device.type == "cuda":
            if extension(name) is not None:
                return op.extension, None
            why = f"{op.extension} not importable ({_imports[name][1]})"
            if op.triton:
                if triton_error() is None:
                    return "triton", why
                why += f"; triton not importable ({triton_error()})"
            return op.cuda, why
        return (op.cpu if device.type == "cpu" else "torch"), None
    if want == "triton":
        if device.type != "cuda" and not interpreting():
            raise BackendError(f"{op.env}=triton: Triton runs CUDA tensors (CPU tensors only under "
                               f"TRITON_INTERPRET=1), these are on {device}")
        if triton_error() is not None:
            raise BackendError(f"{op.env}=triton, but triton cannot be imported ({triton_error()}); "
                               f"pip install triton (CUDA builds of torch bring it) or set {op.env}=auto or torch")
        return want, None
    if want == op.extension:
        if device.type != "cuda":
            raise BackendError(f"{op.env}={want}: {op.extension} runs CUDA tensors only, these are on {device}")
        if extension(name) is None:
            raise BackendError(f"{op.env}={want}, but {op.extension} cannot be imported ({_imports[name][1]}); "
                               f"install {op.package} (README, GPU install) or set {op.env}=auto or torch")
    return want, None


def choose(op: str, device: torch.device | str) -> str:
    """The backend ``op`` ("scan", "conv1d" or "spconv") uses for tensors on ``device``; warns once per op
    when CUDA falls back for want of the extension, and logs the choice once at debug level."""
    device = torch.device(device)
    name, why = _choose(op, device)
    if why is not None and name == OPS[op].cuda and op not in _warned:
        _warned.add(op)
        info = OPS[op]
        warnings.warn(f"pointmamba: {why}; CUDA {info.function} uses {info.fallback} instead (install "
                      f"{info.package} for its CUDA kernel, or set {info.env}={info.cuda} to choose this)",
                      RuntimeWarning, stacklevel=3)
    key = (op, name, device.type)
    if key not in _logged:
        _logged.add(key)
        log.debug("%s: %s backend (inputs on %s)%s", OPS[op].function, name, device, f"; {why}" if why else "")
    return name


def backends(device: torch.device | str = "cpu") -> dict[str, str]:
    """{op: backend} for tensors on ``device``, e.g. {"scan": "numba", "conv1d": "numba", "spconv": "torch"}."""
    device = torch.device(device)
    return {op: _choose(op, device)[0] for op in OPS}


def report(devices: list[torch.device | str] | None = None) -> str:
    """One line per device (default: cpu, and cuda where available) naming each op's backend and, for a
    fallback, why; a forced backend that cannot run is reported as an error instead of raising."""
    if devices is None:
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    lines = []
    for dev in devices:
        device = torch.device(dev)
        parts = []
        for op in OPS:
            try:
                name, why = _choose(op, device)
                parts.append(f"{op}={name}" + (f" ({why})" if why else ""))
            except BackendError as exc:
                parts.append(f"{op}=ERROR ({exc})")
        lines.append(f"pointmamba backends on {device}: " + ", ".join(parts))
    forced = [f"{o.env}={os.environ[o.env]}" for o in OPS.values() if os.environ.get(o.env, "auto") != "auto"]
    if forced:
        lines.append("forced by " + " ".join(forced))
    return "\n".join(lines)
