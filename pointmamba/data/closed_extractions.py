"""Position labels of an arch with a closed premolar extraction, turned into tooth identities.

The MSN labels of ``../shared/data/scans`` number teeth by position along the arch. An adult arch from
which a premolar was taken out and the space closed (as orthodontists do) has only one premolar on that
side, and its first molar stands at position 5: counted, every molar carries the number of the tooth in
front of it, and the arch still looks complete (positions 1..7). Trained on such labels, a network learns
to count where it should name the teeth, which is how the 3D-IOSSeg extraction arches get numbered one
position forward.

Such a side is told by its widths: a "premolar" (position 4 or 5) as wide as a molar. Measured on the 49
MSN/MLEX arches with :func:`~pointmamba.evaluation.tooth_numbering.measure_instances` (the width the
numbering uses): premolars 5.1-8.1 mm, and four arches whose position 5 measured 9.2-10.5 mm, each followed
by two more molar-sized teeth (MSN002_upper, MSN007_lower, MSN015_upper both sides; MSN023_upper on its
right side). Such a side's teeth behind the canine move back: the lone premolar becomes the second premolar
(the first premolar is the one orthodontists usually extract), the molars become 6, 7 and 8.

Measured (``docs/results/numbering/README.md``, seed 1, both splits): no gain, so ``data.relabel_closed_extractions``
is off by default. The 3D-IOSSeg labels number the same pattern both ways (13 sides identity, 18 counted),
and the network's reading of a lone premolar beside the canine did not move.

:func:`counted_side_map` is the same rule for identity-labelled arches (``data.relabel_counted_sides``): a
3D-IOSSeg side with one premolar-sized tooth behind the canine and then molar-sized teeth, whose first
molar-sized tooth is numbered 5 (18 sides of 7 patients: counted, or a child's primary second molar under
its successor's number), is numbered the way the other 13 such sides are: the first molar-sized tooth 6.
It makes the training labels of that pattern one convention (identity), which a child's arch is not.
Measured on split B, two seeds: the pattern's val arches are numbered as before and the closed-space
removal check gets worse (84 % of removals renumber another tooth against 63 %), so the switch is off.
"""
from __future__ import annotations

import numpy as np

from .missing_teeth import arch_is_complete

# mm: a premolar at least this wide along the arch is a molar (see the module doc: 8.1 vs 9.2 mm)
MOLAR_MM = 9.0


def tooth_widths(aligned: np.ndarray, labels: np.ndarray) -> dict[int, float]:
    """FDI number -> the width along the arch (mm) of each tooth the labels outline, as the numbering
    measures it (:func:`~pointmamba.evaluation.tooth_numbering.measure_instances`); {} without teeth."""
    from ..evaluation.tooth_numbering import measure_instances

    labels = np.asarray(labels)
    teeth = [int(t) for t in np.unique(labels) if t > 0]
    if not teeth:
        return {}
    instances, _ = measure_instances(np.asarray(aligned, dtype=np.float64),
                                     [np.flatnonzero(labels == t) for t in teeth])
    return {teeth[inst.key]: inst.width for inst in sorted(instances, key=lambda inst: inst.key)}


def closed_extraction_map(aligned: np.ndarray, labels: np.ndarray, jaw: str, molar_mm: float = MOLAR_MM
                          ) -> dict[int, int]:
    """FDI number -> identity number for the teeth of a complete position-labelled arch with a closed
    extraction on one or both sides ({} where there is none, or where the arch is not complete: its
    positions are not known to be in place). ``aligned`` (V, 3) its vertices in the canonical frame."""
    labels = np.asarray(labels)
    if not arch_is_complete(labels, jaw):
        return {}
    width = tooth_widths(aligned, labels)
    teeth = list(width)
    mapping: dict[int, int] = {}
    for quadrant in ((1, 2) if jaw == "upper" else (3, 4)):
        wide = [p for p in (4, 5) if width[10 * quadrant + p] >= molar_mm]  # complete: both present
        if not wide:
            continue
        shift = 6 - wide[0]  # the first molar-sized tooth becomes the first molar
        behind = sorted(t % 10 for t in teeth if t // 10 == quadrant and t % 10 >= 4)
        if behind[-1] + shift > 8:  # no number left for the last molar: not this pattern
            continue
        mapping.update({10 * quadrant + p: 10 * quadrant + p + shift for p in behind})
    return mapping


def lone_premolar_sides(aligned: np.ndarray, labels: np.ndarray, jaw: str, molar_mm: float = MOLAR_MM
                        ) -> dict[int, int]:
    """Quadrant -> the position digit (5, 6, ...) of its first molar-sized tooth, for each side of an arch
    that holds a canine, then one premolar-sized tooth, then molar-sized teeth (>= ``molar_mm`` along the
    arch): the pattern 3D-IOSSeg numbers both ways (the first molar-sized tooth 6: a premolar's space
    closed, by identity; 5: counted, or a child's primary second molar). ``aligned`` (V, 3) the vertices
    in the canonical frame; widths are measured on the teeth the labels outline."""
    width = tooth_widths(aligned, labels)
    teeth = list(width)
    sides: dict[int, int] = {}
    for quadrant in ((1, 2) if jaw == "upper" else (3, 4)):
        if 10 * quadrant + 3 not in width:
            continue
        behind = sorted(t % 10 for t in teeth if t // 10 == quadrant and t % 10 >= 4)
        molar = next((k for k, p in enumerate(behind) if width[10 * quadrant + p] >= molar_mm), None)
        if molar == 1:
            sides[quadrant] = behind[1]
    return sides


def counted_side_map(aligned: np.ndarray, labels: np.ndarray, jaw: str, molar_mm: float = MOLAR_MM
                     ) -> dict[int, int]:
    """FDI number -> identity number for each side of an identity-labelled arch numbered as counted: a
    canine, one premolar-sized tooth numbered 4, then molar-sized teeth from 5 on
    (:func:`lone_premolar_sides`). That side's teeth behind the canine move back one number (4 -> 5,
    5 -> 6, ...); {} where no side reads so, or where its last tooth would need a 9th number. ``aligned``
    (V, 3) its vertices in the canonical frame."""
    labels = np.asarray(labels)
    mapping: dict[int, int] = {}
    for quadrant, molar in lone_premolar_sides(aligned, labels, jaw, molar_mm).items():
        behind = sorted(int(t) % 10 for t in np.unique(labels) if t // 10 == quadrant and t % 10 >= 4)
        if molar != 5 or behind[-1] == 8:
            continue
        mapping.update({10 * quadrant + p: 10 * quadrant + p + 1 for p in behind})
    return mapping


def apply_map(labels: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
    """``labels`` with each FDI number in ``mapping`` replaced (all at once: 35->36 and 36->37 together)."""
    labels = np.asarray(labels)
    out = labels.copy()
    for old, new in mapping.items():
        out[labels == old] = new
    return out
