"""A lower side numbered with a lateral incisor and a first premolar but no canine: the canine numbered "4"?

Where a lower first premolar was taken out (common in orthodontics: the four premolars, or the lower two to camouflage a
class III bite) and its space closed, the canine stands next to the second premolar. By the project's convention (FDI
by identity) the side reads 1, 2, 3, 5, 6, 7; a label file that counts back from the molars reads 1, 2, 4, 5, 6, 7,
its canine numbered 4. A side truly without its canine is rare: lower canines erupt at 9-10 years, before the
premolars, and their absence or impaction is among the rarest of any tooth. On the 187 shared references
(2026-11-28, ``docs/results/reference_doubts/``) three lower arches read so, 3 of the 92 lower jaws: IOS026_lower
and IOS052_lower on both sides and IOS038_lower on its left, whose "34" has the widths of its own 43 (6.0 x 6.7 mm
against 6.0 x 6.6) rather than its 44's (6.9 x 7.5).

Upper jaws are not checked: upper canines erupt last (11-12 years), so a child's arch shows the 2 and the 4
without the 3 (IOS062_upper, whose lower jaw keeps primary second molars); an upper canine numbered 4 is found by
its crown's width instead (:mod:`.crown_shape`).
"""
from __future__ import annotations

import numpy as np

CHECKED_JAW = "lower"


def missing_canine_findings(labels: np.ndarray, jaw: str) -> list[str]:
    """One line per lower side numbered with its 2 and its 4 but not its 3; [] otherwise, and for an upper jaw."""
    if jaw != CHECKED_JAW:
        return []
    present = set(np.unique(labels).tolist())
    findings = []
    for quadrant in (3, 4):
        lateral, canine, premolar = (10 * quadrant + p for p in (2, 3, 4))
        if lateral in present and premolar in present and canine not in present:
            findings.append(f"no canine between {lateral} and {premolar}: lower canines erupt before the premolars; "
                            f"is the canine numbered {premolar} (a first premolar taken out, counted back from the "
                            f"molars)?")
    return findings
