"""Where models run: the device a config or ``--device`` names, and mixed precision on it."""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["DeviceError", "autocast", "resolve_device"]


class DeviceError(ValueError):
    """A device name that is unknown or not available on this machine."""


def resolve_device(name: str, what: str = "train.device") -> torch.device:
    """``auto`` (CUDA where available, else CPU), ``cpu``, ``cuda`` or ``cuda:N``; ``what`` names the
    setting in the error message (``--device`` for the tools)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"{what}={name!r} is not a device: use auto, cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise DeviceError(f"{what}={name!r}: only cpu and cuda are supported (or auto)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"{what}={name!r} but no CUDA device is available (use cpu or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"{what}={name!r} but this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def autocast(device: torch.device, enabled: bool) -> Any:
    """Mixed precision (bfloat16) on CUDA only; a no-op context on CPU."""
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=enabled and device.type == "cuda")
