"""The dentition as an input of the numbering: how a side of the lone-premolar pattern is numbered.

A side of an arch with a canine, one premolar-sized tooth and then molar-sized teeth reads two ways
(issue 43; ``docs/results/numbering/log.md``, "The same pattern in 3D-IOSSeg is numbered both ways"),
and geometry does not tell them apart; the patient's age does. The convention is FDI by identity, a
primary tooth under its permanent successor's number:

* ``permanent``: an adult whose first premolar was taken out and the space closed: canine 3, premolar 5,
  first molar 6 (then 7, 8);
* ``mixed``: a child with primary molars: canine 3, primary first molar 4, primary second molar 5, first
  permanent molar 6 (then 7). Given, an arch that shows the pattern is also numbered under a child's
  priors (``infer.child_priors``: a molar-wide 5, second molars rarely erupted; ``pipeline._number``);
  ``auto``'s mixed reading is the adult numbering's;
* ``auto`` (default): the likelier of the two under the numbering's own model (the lower cost of the
  two constrained numberings, which is the unconstrained one wherever that already reads one way), and
  the scan is always flagged, naming both readings; each affected tooth carries the other reading's
  number as its ``alternative``. Where the numbering reads the side neither way (premolar 4, first
  molar 6: a second premolar missing, a third reading), ``auto`` keeps it as numbered and flags it,
  the cheaper reading as the alternative: forcing one of the two changed 9 of the 187 shared arches,
  3 better and 6 worse (3 of them arches whose reference has no such side).

Only the pattern's sides are constrained (their canine, premolar-sized and molar-sized teeth take the
reading's numbers); the numbering then runs as before around them. An arch without the pattern is
numbered exactly as without a dentition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from typing import Callable

import numpy as np

from .config import DENTITIONS, check_dentition

DENTITIONS = ("auto", "permanent", "mixed")
READINGS = ("permanent", "mixed")
_FIRST_PREMOLAR_SIZED = {"permanent": 5, "mixed": 4}  # the lone premolar-sized tooth's number
_FIRST_MOLAR_SIZED = {"permanent": 6, "mixed": 5}  # the first molar-sized tooth's number


def check_dentition(value: object, where: str = "dentition") -> str:
    """``value`` if it is one of :data:`DENTITIONS`, else ValueError naming ``where``."""
    if value not in DENTITIONS:
        raise ValueError(f"{where}: unknown dentition {value!r}: expected one of {', '.join(DENTITIONS)}")
    return str(value)


@dataclass
class DentitionReading:
    """How the pattern's sides of one arch were read: ``requested`` (auto / permanent / mixed), ``used``
    (permanent / mixed, None where the arch has no side of the pattern), ``sides`` {quadrant: FDI numbers
    of its canine and the teeth behind it, per reading}, ``costs`` {reading: cost of the numbering under
    it}, ``alternative`` per-vertex class ids under the other reading (auto only, where it is possible)."""

    requested: str
    used: str | None = None
    sides: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    alternative: np.ndarray | None = None
    neither: bool = False  # auto, and the numbering reads the side neither way: kept as numbered

    @property
    def other(self) -> str | None:
        """The reading not used (None without the pattern)."""
        return None if self.used is None else next(r for r in READINGS if r != self.used)

    def to_json(self) -> dict[str, object]:
        """Plain data for the prediction's JSON."""
        return {"requested": self.requested, "used": "as numbered" if self.neither else self.used,
                "pattern_sides": {str(q): v for q, v in sorted(self.sides.items())},
                "costs": {k: round(v, 3) for k, v in self.costs.items()}}

    def finding(self) -> str | None:
        """The review text under ``auto`` (both readings, per side), None where nothing is to be decided."""
        if self.requested != "auto" or (self.used is None and not self.neither):
            return None
        parts = []
        for quadrant, by_reading in sorted(self.sides.items()):
            readings = [f"{r} {' '.join(map(str, by_reading[r]))}" for r in READINGS if r in by_reading]
            parts.append(f"quadrant {quadrant}: " + " or ".join(readings))
        read = "kept as numbered (neither reading)" if self.neither else f"read as {self.used}"
        return (f"a side of canine, one premolar, molars reads two ways ({'; '.join(parts)}): {read}; "
                "give the dentition (permanent: a premolar's space closed; mixed: primary molars)")


def reading_numbers(behind: list[int], reading: str) -> list[int] | None:
    """Position digits of a side's teeth behind the canine (``behind``: the lone premolar-sized tooth,
    then the molar-sized ones) under ``reading``; None where the last would need a 9th number."""
    start = _FIRST_PREMOLAR_SIZED[reading]
    digits = [start] + [_FIRST_MOLAR_SIZED[reading] + k for k in range(len(behind) - 1)]
    return digits if digits[-1] <= 8 else None


def read_dentition(numbering, labels: np.ndarray, renumber: Callable[[dict[int, int] | None], object],
                   to_labels: Callable[[object], np.ndarray], aligned: np.ndarray, jaw: str, num_classes: int,
                   dentition: str):
    """The numbering and labels of an arch read under ``dentition`` (see the module doc), from the
    unconstrained ``numbering`` and its per-vertex class ``labels``; ``renumber(forced)`` numbers the
    arch with ``forced`` {instance index: arch index}, ``to_labels`` turns a numbering into labels.
    The returned numbering carries the :class:`DentitionReading` as ``numbering.dentition``."""
    from ..data.lone_premolar import lone_premolar_sides
    from ..data.fdi import class_to_fdi, fdi_to_class
    from ..data.arch import index_classes

    check_dentition(dentition)
    reading = DentitionReading(dentition)
    numbering.dentition = reading
    fdi = class_to_fdi(labels, jaw, num_classes)
    sides = lone_premolar_sides(aligned, fdi, jaw)
    if not sides:
        return numbering, labels
    classes = index_classes(num_classes, jaw)
    arch_index = {int(c): a for a, c in enumerate(classes)}
    single = {opt[0]: i for i, opt in enumerate(numbering.options) if opt is not None and opt[0] == opt[1]}
    present = {int(t) for t in np.unique(fdi) if t > 0}
    forced: dict[str, dict[int, int]] = {r: {} for r in READINGS}
    for quadrant in sorted(sides):
        behind = sorted(t % 10 for t in present if t // 10 == quadrant and t % 10 >= 4)
        teeth = [10 * quadrant + 3] + [10 * quadrant + p for p in behind]
        index = [arch_index[int(fdi_to_class([t], jaw, num_classes)[0])] for t in teeth]
        if any(a not in single for a in index):  # a tooth of the side is half of a split pair: left as numbered
            continue
        by_reading = {}
        for r in READINGS:
            digits = reading_numbers(behind, r)
            if digits is None:
                forced[r] = None  # type: ignore[assignment]  # this reading is impossible for the arch
                continue
            numbers = [10 * quadrant + 3] + [10 * quadrant + d for d in digits]
            by_reading[r] = numbers
            if forced[r] is not None:
                for a, t in zip(index, numbers):
                    forced[r][single[a]] = arch_index[int(fdi_to_class([t], jaw, num_classes)[0])]
        reading.sides[quadrant] = by_reading
    if not reading.sides:
        return numbering, labels
    candidates = [r for r in (READINGS if dentition == "auto" else (dentition,)) if forced[r] is not None]
    results = {}
    for r in candidates:
        wanted = forced[r]
        if all(numbering.options[i] == (a, a) for i, a in wanted.items()):
            results[r] = (numbering, labels)  # the numbering already reads this way: kept as it is
        else:
            other = renumber(wanted)
            results[r] = (other, to_labels(other))
        reading.costs[r] = float(results[r][0].cost)
    if not results:  # the given reading needs a 9th number here: left as numbered
        return numbering, labels
    cheaper = min(results, key=lambda r: reading.costs[r])
    if dentition == "auto" and all(results[r][0] is not numbering for r in results):
        reading.neither = True
        reading.alternative = results[cheaper][1]
        return numbering, labels
    reading.used = cheaper
    chosen, chosen_labels = results[reading.used]
    if dentition == "auto" and reading.other in results:
        reading.alternative = results[reading.other][1]
    chosen.dentition = reading
    return chosen, chosen_labels


def read_dentition_file(path: str | PathLike) -> dict[str, str]:
    """{scan stem: dentition} from a CSV of rows ``scan stem,dentition`` (see
    :func:`~pointmamba.data.scan_table.read_scan_table`)."""
    from ..data.scan_table import read_scan_table

    return read_scan_table(path, "dentition", DENTITIONS)


def reference_dentition(aligned: np.ndarray, labels: np.ndarray, jaw: str) -> str | None:
    """The dentition a reference arch's own numbering gives (``tools/test.py``'s "dentition given" group):
    a side of the pattern whose first molar-sized tooth is numbered 6 reads permanent, 5 mixed; the
    majority of the sides where they differ (a tie: mixed, the commoner in 3D-IOSSeg: 18 sides to 13);
    None without the pattern. ``aligned`` (V, 3) the vertices in the canonical frame, ``labels`` FDI."""
    from ..data.lone_premolar import lone_premolar_sides

    sides = list(lone_premolar_sides(aligned, labels, jaw).values())
    if not sides:
        return None
    permanent = sum(1 for m in sides if m >= 6)
    return "permanent" if permanent > len(sides) - permanent else "mixed"
