"""Position-encoding variants for the per-stage position slot (ablations compare them).

``position`` (config) picks what a stage runs before its mixers:

- ``cpe``: CPE only (PTv3);
- ``cpe+relpos`` (default): CPE, then one RelPos per serialization order used by the stage, each applied
  just before the first block that uses its order;
- ``relpos+abs``: no CPE; ``0.1 * Linear(3 -> C)`` of per-sample centred coordinates (weights std 0.01),
  then RelPos as above;
- ``sinusoidal``: fixed Fourier features of per-sample centred coordinates, scaled and added;
- ``gru``: a bidirectional GRU over the stage's first curve order, per sample (``pack_padded_sequence``:
  no state crosses a sample boundary, padding never enters), added residually;
- ``logical``: causal windowed self-attention along the first curve order (``logical.py``), residual;
- ``sin+gru`` / ``sin+logical``: ``sinusoidal``, then ``gru`` / ``logical`` on its output;
- ``none``: nothing.

Kinds build only their own sub-modules, so adding a kind leaves every other kind's parameters, random
initialisation and outputs unchanged.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..point.reductions import segment_reduce
from ..point.sequence import pack_to_padded
from .cpe import CPE
from .logical import LogicalPosition
from .relpos import RelPos, RelPosConfig

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["POSITIONS", "POSITION_PARTS", "PositionSlot", "AbsolutePosition", "SinusoidalPosition", "GRUPosition"]

POSITION_PARTS: dict[str, tuple[str, ...]] = {
    "cpe": ("cpe",),
    "cpe+relpos": ("cpe", "relpos"),
    "relpos+abs": ("abs_pos", "relpos"),
    "sinusoidal": ("sinusoidal",),
    "gru": ("gru",),
    "logical": ("logical",),
    "sin+gru": ("sinusoidal", "gru"),
    "sin+logical": ("sinusoidal", "logical"),
    "none": (),
}
"""``model.position`` value -> the parts its slot runs (names of :data:`PART_CLASSES` plus ``relpos``)."""

POSITIONS = tuple(POSITION_PARTS)


def centred_coord(point: PointBatch) -> Tensor:
    """Coordinates minus each sample's mean, so the encoding ignores where a scan sits."""
    mean = segment_reduce(point.coord, point.batch, point.num_samples, "mean")
    return point.coord - mean.index_select(0, point.batch)


class AbsolutePosition(nn.Module):
    """``feat + scale * Linear(3 -> C)(centred coord)``, weights N(0, init_std), bias 0."""

    def __init__(self, channels: int, init_std: float = 0.01, scale: float = 0.1) -> None:
        super().__init__()
        self.linear = nn.Linear(3, channels)
        nn.init.normal_(self.linear.weight, std=init_std)
        nn.init.zeros_(self.linear.bias)
        self.scale = scale

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        return feat + self.scale * self.linear(centred_coord(point).to(feat.dtype))


class SinusoidalPosition(nn.Module):
    """``feat + scale * [sin, cos](2 pi x / lambda)`` per axis, wavelengths geometric in [min, max] (mm).

    ``C // 6`` wavelengths per axis fill 6 * (C // 6) channels; the remaining channels get nothing.
    """

    def __init__(self, channels: int, min_wavelength: float = 1.0, max_wavelength: float = 100.0,
                 scale: float = 0.1) -> None:
        super().__init__()
        if not 0 < min_wavelength <= max_wavelength:
            raise ValueError(f"sinusoidal: need 0 < min_wavelength <= max_wavelength, got {min_wavelength}, {max_wavelength}")
        n = max(1, channels // 6)
        if 6 * n > channels:
            raise ValueError(f"sinusoidal: needs at least 6 channels, got {channels}")
        wavelengths = torch.logspace(math.log10(min_wavelength), math.log10(max_wavelength), n)
        self.register_buffer("freq", 2 * math.pi / wavelengths, persistent=False)
        self.channels, self.scale = channels, scale

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        x = centred_coord(point).to(feat.dtype).unsqueeze(2) * self.freq.to(feat.dtype)  # (N, 3, n)
        enc = torch.cat([x.sin(), x.cos()], 2).flatten(1)
        enc = nn.functional.pad(enc, (0, self.channels - enc.shape[1]))
        return feat + self.scale * enc


class GRUPosition(nn.Module):
    """``feat + Linear(BiGRU(LayerNorm(feat)) along order 0)``, run per sample."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        hidden = max(1, channels // 2)
        self.norm = nn.LayerNorm(channels)
        self.gru = nn.GRU(channels, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, channels)

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        lengths = point.lengths
        x, mask = pack_to_padded(self.norm(feat).index_select(0, point.order[0]), lengths)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        y, _ = pad_packed_sequence(self.gru(packed)[0], batch_first=True, total_length=x.shape[1])
        return feat + self.proj(y[mask]).index_select(0, point.inverse[0])


PART_CLASSES: dict[str, type[nn.Module]] = {
    "cpe": CPE,
    "abs_pos": AbsolutePosition,
    "sinusoidal": SinusoidalPosition,
    "gru": GRUPosition,
    "logical": LogicalPosition,
}
"""Part name (also its attribute, which diagnostics group by) -> class; ``pre`` runs them in this order."""


class PositionSlot(nn.Module):
    """A stage's position encodings: ``pre(feat, point)`` before the blocks, ``relpos_for(k)`` per order.

    ``kind`` is a key of :data:`POSITION_PARTS`. Each part is built as ``PART_CLASSES[name](channels,
    **options)``, its options being this constructor's keyword of the same name (``cpe_kernel`` for the
    CPE); ``relpos`` gives one RelPos per order in ``orders_used``. Parts are built in the table's order, so
    adding a kind leaves every other kind's parameters and random initialisation unchanged.
    """

    def __init__(self, kind: str, channels: int, orders_used: list[int], *, cpe_kernel: int = 3,
                 abs_pos: dict[str, Any] | None = None, sinusoidal: dict[str, Any] | None = None,
                 logical: dict[str, Any] | None = None, relpos: RelPosConfig | dict[str, Any] | None = None) -> None:
        super().__init__()
        if kind not in POSITION_PARTS:
            raise ValueError(f"position must be one of {POSITIONS}, got {kind!r}")
        self.kind = kind
        parts = POSITION_PARTS[kind]
        options = {"cpe": {"kernel_size": cpe_kernel}, "abs_pos": abs_pos or {}, "sinusoidal": sinusoidal or {},
                   "gru": {}, "logical": logical or {}}
        for name, cls in PART_CLASSES.items():
            setattr(self, name, cls(channels, **options[name]) if name in parts else None)
        self.relpos = None
        if "relpos" in parts:
            rcfg = relpos if isinstance(relpos, RelPosConfig) else RelPosConfig.from_dict(relpos or {})
            self.relpos = nn.ModuleDict({str(k): RelPos(channels, rcfg) for k in sorted(set(orders_used))})

    def pre(self, feat: Tensor, point: PointBatch) -> Tensor:
        for name in PART_CLASSES:
            module = getattr(self, name)
            if module is not None:
                feat = module(feat, point)
        return feat

    def relpos_for(self, k: int) -> RelPos | None:
        return self.relpos[str(k)] if self.relpos is not None else None
