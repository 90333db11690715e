"""FDI tooth numbering, the class schemes built on it, class names and the colour table.

FDI: two digits, quadrant then position. Quadrant 1 = upper right, 2 = upper left, 3 = lower left,
4 = lower right (the patient's sides); position 1 = central incisor ... 8 = third molar. 0 = gingiva.

Class schemes (``num_classes``):

* 17 (per jaw, as ToothGroupNetwork): 0 gingiva, 1..8 = positions 1..8 of quadrant 1 (upper) or 3
  (lower), 9..16 = positions 1..8 of quadrant 2 (upper) or 4 (lower). The lower jaw is the upper one
  shifted by -20 (31 -> 1, 41 -> 9). Going back to FDI needs the jaw.
* 33 (both jaws): 0 gingiva, 1..8 = 11..18, 9..16 = 21..28, 17..24 = 31..38, 25..32 = 41..48.

In the canonical pose (see :mod:`pointmamba.data.pose`: crowns towards +z, arch opening towards -y)
quadrants 1 and 3 lie on -x and 2 and 4 on +x, so a 17-class id means the same place in both jaws.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

JAWS = ("upper", "lower")
NUM_CLASSES = (17, 33)
IGNORE_INDEX = -100

UPPER_FDI = tuple(range(11, 19)) + tuple(range(21, 29))
LOWER_FDI = tuple(range(31, 39)) + tuple(range(41, 49))
ALL_FDI = UPPER_FDI + LOWER_FDI
VALID_FDI = {"upper": frozenset((0,) + UPPER_FDI), "lower": frozenset((0,) + LOWER_FDI)}

TOOTH_TYPES = ("central incisor", "lateral incisor", "canine", "first premolar", "second premolar",
               "first molar", "second molar", "third molar")
_QUADRANT_NAMES = {1: "upper right", 2: "upper left", 3: "lower left", 4: "lower right"}

# 33 colours picked greedily for the largest smallest CIELAB distance (>= 34 between any two), gingiva
# first; fixed so that pictures agree across runs. The 17-class scheme uses the first 17.
_COLOR_HEX = (
    "#eebbaa", "#0000ff", "#00ff00", "#ff0000", "#ff11bb", "#0077dd", "#006600", "#ffdd00", "#00ffee",
    "#771133", "#224444", "#bbee88", "#995500", "#660099", "#ffaaff", "#77bbdd", "#ff1166", "#dd00ff",
    "#11ff88", "#443366", "#449977", "#888800", "#ff9900", "#aaee11", "#0055ff", "#aa0011", "#ee7799",
    "#444400", "#11aa00", "#aa4499", "#cceecc", "#ff8866", "#aa88aa",
)
COLOR_TABLE = np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in _COLOR_HEX], dtype=np.uint8)
COLOR_TABLE.setflags(write=False)


def check_jaw(jaw: str | None, allow_none: bool = False) -> str | None:
    """Return ``jaw`` if it is "upper" or "lower" (or None where allowed), else raise ValueError."""
    if jaw is None and allow_none:
        return None
    if jaw not in JAWS:
        raise ValueError(f"unknown jaw {jaw!r}; expected one of {JAWS}")
    return jaw


def check_num_classes(num_classes: int) -> int:
    if num_classes not in NUM_CLASSES:
        raise ValueError(f"num_classes must be one of {NUM_CLASSES}, got {num_classes!r}")
    return int(num_classes)


def fdi_name(fdi: int) -> str:
    """Human name of an FDI number, e.g. 36 -> "36 lower left first molar"."""
    if fdi == 0:
        return "gingiva"
    q, p = divmod(int(fdi), 10)
    if q not in _QUADRANT_NAMES or not 1 <= p <= 8:
        raise ValueError(f"{fdi!r} is not an FDI tooth number (11-18, 21-28, 31-38, 41-48) or 0")
    return f"{fdi} {_QUADRANT_NAMES[q]} {TOOTH_TYPES[p - 1]}"


def _names(num_classes: int) -> tuple[str, ...]:
    if num_classes == 33:
        return ("gingiva",) + tuple(fdi_name(f) for f in ALL_FDI)
    return ("gingiva",) + tuple(f"{u}/{l} {TOOTH_TYPES[u % 10 - 1]}" for u, l in zip(UPPER_FDI, LOWER_FDI))


CLASS_NAMES: dict[int, tuple[str, ...]] = {17: _names(17), 33: _names(33)}
"""Class names per scheme: ``CLASS_NAMES[17][1] == "11/31 central incisor"``, ``CLASS_NAMES[33][17] ==
"31 lower left central incisor"``."""


def class_colors(num_classes: int) -> np.ndarray:
    """Fixed, distinct RGB colours, (num_classes, 3) uint8 (divide by 255 for matplotlib); 0 = gingiva."""
    return COLOR_TABLE[: check_num_classes(num_classes)].copy()


def _fdi_lut(jaw: str | None, num_classes: int) -> np.ndarray:
    """Lookup FDI (0..48) -> class, -1 where invalid."""
    lut = np.full(49, -1, dtype=np.int64)
    lut[0] = 0
    if num_classes == 33:
        fdis = ALL_FDI if jaw is None else (UPPER_FDI if jaw == "upper" else LOWER_FDI)
        for f in fdis:
            lut[f] = ALL_FDI.index(f) + 1
    else:
        fdis = UPPER_FDI if jaw == "upper" else LOWER_FDI
        for i, f in enumerate(fdis):
            lut[f] = i + 1
    return lut


def _int64(values: Iterable[int] | np.ndarray, what: str) -> np.ndarray:
    """``values`` as an int64 array; ValueError naming ``what`` for a non-integer dtype (floats would round)."""
    values = np.asarray(values)
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{what} must be integers, got dtype {values.dtype}")
    return values.astype(np.int64, copy=False)


def fdi_to_class(labels: Iterable[int] | np.ndarray, jaw: str | None, num_classes: int = 17) -> np.ndarray:
    """FDI numbers (0 = gingiva) -> class ids (int64), checking each number is valid for ``jaw``.

    ``jaw`` is required for the 17-class scheme; for 33 classes it may be None (numbers of both jaws are
    accepted). ``IGNORE_INDEX`` (-100) passes through unchanged.
    """
    num_classes = check_num_classes(num_classes)
    check_jaw(jaw, allow_none=num_classes == 33)
    labels = _int64(labels, "FDI labels")
    lut = _fdi_lut(jaw, num_classes)
    ignore = labels == IGNORE_INDEX
    inside = (labels >= 0) & (labels < len(lut))
    out = np.full(labels.shape, -1, dtype=np.int64)
    out[inside] = lut[labels[inside]]
    bad = (out < 0) & ~ignore
    if bad.any():
        values = sorted(set(np.unique(labels[bad]).tolist()))
        where = f"the {jaw} jaw" if jaw else "any jaw"
        raise ValueError(f"FDI label(s) {values[:10]} not valid for {where} ({bad.sum()} entries); valid: "
                         f"0 and {'11-18, 21-28' if jaw == 'upper' else '31-38, 41-48' if jaw == 'lower' else '11-48'}")
    out[ignore] = IGNORE_INDEX
    return out


def class_to_fdi(classes: Iterable[int] | np.ndarray, jaw: str | None, num_classes: int = 17) -> np.ndarray:
    """Class ids -> FDI numbers (int64), the inverse of :func:`fdi_to_class`.

    The 17-class scheme needs ``jaw``; for 33 classes ``jaw`` may be None or, when given, is checked
    against the classes. ``IGNORE_INDEX`` passes through unchanged.
    """
    num_classes = check_num_classes(num_classes)
    check_jaw(jaw, allow_none=num_classes == 33)
    classes = _int64(classes, "class ids")
    if num_classes == 33:
        table = np.array((0,) + ALL_FDI, dtype=np.int64)
    else:
        table = np.array((0,) + (UPPER_FDI if jaw == "upper" else LOWER_FDI), dtype=np.int64)
    ignore = classes == IGNORE_INDEX
    bad = ((classes < 0) | (classes >= num_classes)) & ~ignore
    if bad.any():
        raise ValueError(f"class id(s) {sorted(set(classes[bad].tolist()))[:10]} outside 0..{num_classes - 1}")
    out = np.where(ignore, IGNORE_INDEX, table[np.where(ignore, 0, classes)])
    if num_classes == 33 and jaw is not None:
        teeth = out[out > 0]
        wrong = teeth > 30 if jaw == "upper" else teeth < 30
        if wrong.any():
            raise ValueError(f"class ids of the other jaw in a {jaw} scan: FDI {sorted(set(teeth[wrong].tolist()))[:10]}")
    return out


_MIRROR_QUADRANT = {1: 2, 2: 1, 3: 4, 4: 3}


def mirror_fdi(labels: Iterable[int] | np.ndarray) -> np.ndarray:
    """Swap the patient's left and right: 1x <-> 2x, 3x <-> 4x; 0 (gingiva) and -100 (ignore) stay."""
    labels = _int64(labels, "FDI labels")
    lut = np.full(49, -1, dtype=np.int64)
    lut[0] = 0
    for f in ALL_FDI:
        q, p = divmod(f, 10)
        lut[f] = _MIRROR_QUADRANT[q] * 10 + p
    keep = labels == IGNORE_INDEX
    inside = (labels >= 0) & (labels < 49)
    out = np.full(labels.shape, -1, dtype=np.int64)
    out[inside] = lut[labels[inside]]
    bad = (out < 0) & ~keep
    if bad.any():
        raise ValueError(f"mirror_fdi: {sorted(set(labels[bad].tolist()))[:10]} are not FDI numbers or 0")
    out[keep] = IGNORE_INDEX
    return out


def mirror_class(classes: Iterable[int] | np.ndarray, num_classes: int = 17) -> np.ndarray:
    """The class-id version of :func:`mirror_fdi` (same result as mapping to FDI, mirroring, and back)."""
    num_classes = check_num_classes(num_classes)
    classes = np.asarray(classes).astype(np.int64, copy=False)
    lut = np.arange(num_classes, dtype=np.int64)
    for start in range(1, num_classes, 16):  # blocks of 16: [1..8 | 9..16], [17..24 | 25..32]
        lut[start:start + 8], lut[start + 8:start + 16] = np.arange(start + 8, start + 16), np.arange(start, start + 8)
    keep = classes == IGNORE_INDEX
    bad = ((classes < 0) | (classes >= num_classes)) & ~keep
    if bad.any():
        raise ValueError(f"mirror_class: class id(s) {sorted(set(classes[bad].tolist()))[:10]} outside 0..{num_classes - 1}")
    return np.where(keep, IGNORE_INDEX, lut[np.where(keep, 0, classes)])
