"""Scan units: the model works in millimetres; a scan in metres or centimetres silently predicts nonsense.

A jaw (full arch) is about 35-90 mm across; the shared scans measure 59-80 mm along their longest
principal axis, the synthetic ones 80-91 mm. :func:`infer_units` reads that extent and, with
``units="auto"``, finds the power of ten that brings it into :data:`JAW_EXTENT_MM` (20-150 mm, narrower
than a factor of ten, so at most one unit fits). Scans that fit none are refused: pass ``--units``.

Inches are never guessed: a full arch in inches (2.3-3.5 across) reads as a small arch in cm (23-35 mm), and
a partial arch in cm reads the same. ``auto``'s warning on a scan it reads as cm names ``--units in``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from os import PathLike

import numpy as np

UNITS: dict[str, float] = {"mm": 1.0, "cm": 10.0, "m": 1000.0, "in": 25.4}
"""Explicit units and their factor to millimetres."""

UNIT_CHOICES = ("auto",) + tuple(UNITS)

JAW_EXTENT_MM = (20.0, 150.0)
"""Plausible longest extent of a jaw scan in mm (a full arch is 35-90 mm; partial arches are smaller)."""

_AUTO = (("m", 1000.0), ("dm", 100.0), ("cm", 10.0), ("mm", 1.0), ("0.1 mm", 0.1), ("0.01 mm", 0.01),
         ("um", 0.001))


class UnitsError(ValueError):
    """A scan whose size fits no unit (or no jaw)."""


@dataclass
class UnitsDecision:
    """How to bring a scan to millimetres: multiply by ``factor``; ``warning`` is set when that needs
    saying (rescaled, or an explicit unit that gives an implausible size)."""

    units: str
    factor: float
    extent: float  # longest principal extent, in file units
    warning: str | None = None

    @property
    def extent_mm(self) -> float:
        return self.extent * self.factor


def extent(vertices: np.ndarray) -> float:
    """Longest extent of the points along their principal axes (independent of the scan's pose)."""
    v = np.asarray(vertices, dtype=np.float64)
    if len(v) < 2:
        return 0.0
    c = v - v.mean(0)
    _, axes = np.linalg.eigh(c.T @ c)
    p = c @ axes
    return float((p.max(0) - p.min(0)).max())


def _plausible(mm: float) -> bool:
    return JAW_EXTENT_MM[0] <= mm <= JAW_EXTENT_MM[1]


def infer_units(vertices: np.ndarray, units: str = "auto", path: str | PathLike | None = None) -> UnitsDecision:
    """The factor that brings ``vertices`` to mm: explicit ``units`` (mm, cm, m, in) or ``"auto"`` from the
    extent. Raises :class:`UnitsError` naming the file where ``auto`` finds no unit."""
    where = str(path) if path is not None else "scan"
    size = extent(vertices)
    lo, hi = JAW_EXTENT_MM
    if units != "auto":
        if units not in UNITS:
            raise UnitsError(f"unknown units {units!r}; use one of {', '.join(UNIT_CHOICES)}")
        factor = UNITS[units]
        warning = None
        if not _plausible(size * factor):
            warning = (f"{where}: {size * factor:.4g} mm across in {units} (--units {units}), not the "
                       f"{lo:g}-{hi:g} mm of a jaw; check the units")
        return UnitsDecision(units, factor, size, warning)
    if not math.isfinite(size) or size <= 0:
        raise UnitsError(f"{where}: the scan has no extent ({size:g}): all vertices coincide")
    for name, factor in _AUTO:
        if _plausible(size * factor):
            warning = None
            if factor != 1.0:
                warning = (f"{where}: {size:.4g} across in file units, which is no jaw in mm; read as {name} "
                           f"and scaled by {factor:g} to {size * factor:.0f} mm (pass --units to override")
                if name == "cm" and _plausible(size * UNITS["in"]):
                    warning += f"; in inches it would be {size * UNITS['in']:.0f} mm: --units in"
                warning += ")"
            return UnitsDecision(name, factor, size, warning)
    raise UnitsError(f"{where}: {size:.4g} across in file units fits no unit (a jaw is {lo:g}-{hi:g} mm across, "
                     "a stray vertex far away?); if the size is right, pass --units mm|cm|m|in")


def length_text(mm: float) -> str:
    """A length in mm as a person reads it: ``118 m``, ``7.57 m``, ``80 mm``, ``0.08 mm``."""
    return f"{mm / 1000:.3g} m" if mm >= 1000 else f"{mm:.3g} mm"


def grid_reach_mm(grid_size: float | None) -> float:
    """The widest scan (mm, along its longest principal axis) that a model's grid of ``grid_size`` mm cells
    holds in any pose: 2^MAX_DEPTH cells per axis of the serialization, and a pose can put the principal
    extent along a diagonal (sqrt 3). No grid (``None`` / 0): no bound."""
    from ..point.serialization import MAX_DEPTH  # here, not at the top: it imports torch

    return grid_size * 2 ** MAX_DEPTH / math.sqrt(3) if grid_size else math.inf


def check_fits(decision: UnitsDecision, max_mm: float, path: str | PathLike | None = None) -> None:
    """Raise :class:`UnitsError` where the scan, read in ``decision``'s units, is wider than ``max_mm`` (what
    the model's grid holds): the message says how wide it would be, the sign of wrong ``--units``."""
    if decision.extent_mm > max_mm:
        where = str(path) if path is not None else "scan"
        lo, hi = JAW_EXTENT_MM
        raise UnitsError(f"{where}: read in {decision.units}, the scan would be {length_text(decision.extent_mm)} wide "
                         f"(a jaw is {lo:g}-{hi:g} mm; the model's grid holds at most {length_text(max_mm)}): "
                         f"check --units (auto finds them from the size)")


def check_millimetres(vertices: np.ndarray, path: str | PathLike | None = None) -> None:
    """Raise :class:`UnitsError` unless the scan's extent is a jaw's in mm (for training and test data,
    which must be in mm; ``pointmamba-check-data`` reports the unit each scan seems to be in)."""
    decision = infer_units(vertices, "auto", path)
    if decision.factor != 1.0:
        raise UnitsError(f"{path}: {decision.extent:.4g} across: looks like {decision.units}, not mm (a jaw is "
                         f"{JAW_EXTENT_MM[0]:g}-{JAW_EXTENT_MM[1]:g} mm across); convert the data set to mm")


def rescaled(scan, factor: float):  # Scan -> Scan
    """A copy of ``scan`` with its vertices multiplied by ``factor`` (faces and labels shared)."""
    if factor == 1.0:
        return scan
    return replace(scan, vertices=scan.vertices * factor, meta=dict(scan.meta))
