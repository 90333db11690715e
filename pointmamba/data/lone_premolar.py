"""Sides of an arch with one premolar-sized tooth behind the canine, then molar-sized teeth.

3D-IOSSeg numbers this pattern both ways (13 sides by identity: the first molar-sized tooth 6, a premolar's
space closed; 18 counted: 5, or a child's primary second molar under its successor's number). Widths are
measured as the numbering measures them: on the 49 MSN/MLEX arches premolars 5.1-8.1 mm, the molars of
such sides 9.2-10.5 mm. Used by the dentition reading (:mod:`pointmamba.inference.dentition`) and the
per-group summary (:mod:`pointmamba.evaluation.scan_summary`).
"""
from __future__ import annotations

import numpy as np

from .arch import labelled_teeth

# mm: a premolar at least this wide along the arch is a molar (see the module doc: 8.1 vs 9.2 mm)
MOLAR_MM = 9.0


def tooth_widths(aligned: np.ndarray, labels: np.ndarray) -> dict[int, float]:
    """FDI number -> the width along the arch (mm) of each tooth the labels outline, as the numbering
    measures it (:func:`~pointmamba.data.arch.measure_instances`); {} without teeth."""
    teeth, _ = labelled_teeth(aligned, labels)
    return {fdi: inst.width for fdi, inst in teeth.items()}


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
