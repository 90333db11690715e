"""A tooth cut between two numbers, merged back (issue 43, item 3; ``infer.merge_packed``).

The graph cut sometimes cuts one tooth in two, and the numbering then gives the pieces two neighbouring
numbers, moving every tooth behind on one (a molar as "36" + "37", the third molar left as gingiva). The
review checks see it (:mod:`.review_checks`): ``split``, each piece about half its number's width, and
``packed``, the two pieces' centres closer than two such teeth's can be (a cut other than across the
arch leaves pieces of nearly full width). Here each such pair of the numbering's instances becomes one
instance, numbered again as one tooth (or gingiva, never two teeth) with the rest of the arch; a scan
merged so keeps a ``merged`` finding (a person checks it).

One instance the numbering reads as two neighbouring teeth (a pair option) is left as read: numbering such
an instance as one tooth where it is narrower than two teeth (``infer.unpair_packed``) failed its rule
held out and was retired (code at commit 7ccbc90).

The trigger is the difference from the retired ``infer.merge_cut_teeth`` (widths alone, ``split`` or
``squeezed``: it merged a premolar with half a primary molar): ``docs/results/review_flag/log.md``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..data.arch import gap_mm, per_index
from .review_checks import centres_apart, looks_packed, looks_split

if TYPE_CHECKING:
    from ..data.arch import Instance
    from .arch_priors import ArchPriors
    from .confidence import ReviewRules
    from .tooth_numbering import Numbering


# median crown area (mm², vertex areas in the canonical frame) per position 1-8 on the reference labels of the
# 187 shared scans (docs/results/review_flag/log.md, "A guard on the merge")
CROWN_AREA_MM2 = {"upper": [155.0, 109.5, 127.4, 143.6, 126.5, 210.4, 180.8, 103.6],
                  "lower": [88.1, 96.1, 117.8, 120.9, 120.8, 208.9, 172.4, 104.2]}


def cut_pairs(numbering: "Numbering", priors: "ArchPriors", rules: "ReviewRules", areas: np.ndarray | None = None,
              jaw: str | None = None, area_limit: float = 0.0) -> list[tuple[int, int]]:
    """Indices ``(i, j)`` into ``numbering.instances`` (sorted along the arch) of each pair of consecutive
    numbered instances, each one tooth, their numbers neighbours, that the ``split`` or ``packed`` check
    reports (``priors``' typical widths, ``rules``' thresholds). No instance is in two pairs: where pairs
    overlap, the pair whose centres sit closest for their typical widths wins. ``area_limit`` > 0 (with the
    vertex ``areas`` and the ``jaw``): only pairs whose area together is at most that many times the larger
    of their numbers' :data:`CROWN_AREA_MM2` (two whole crowns side by side are not one tooth cut in two)."""
    crown = per_index(CROWN_AREA_MM2[jaw]) if area_limit > 0 else None
    numbered = [i for i, opt in enumerate(numbering.options) if opt is not None]
    found: list[tuple[float, int, int]] = []
    for i, j in zip(numbered, numbered[1:]):
        a, b = numbering.options[i], numbering.options[j]
        if a[0] != a[1] or b[0] != b[1] or abs(b[0] - a[0]) != 1:
            continue
        ia, ib = numbering.instances[i], numbering.instances[j]
        ta, tb = float(priors.width_mean[a[0]]), float(priors.width_mean[b[0]])
        if crown is not None:
            together = float(areas[ia.vertices].sum() + areas[ib.vertices].sum())
            if together > area_limit * max(crown[a[0]], crown[b[0]]):
                continue
        if looks_split(ia.width, ib.width, ta, tb, gap_mm(ia, ib), rules) or looks_packed(ia, ib, ta, tb, rules):
            found.append((centres_apart(ia, ib) / (ta + tb), i, j))
    out: list[tuple[int, int]] = []
    used: set[int] = set()
    for _, i, j in sorted(found):
        if i not in used and j not in used:
            out.append((i, j))
            used.update((i, j))
    return sorted(out)


def merged_pieces(instances: list["Instance"], pairs: list[tuple[int, int]]) -> tuple[list[np.ndarray], set[int]]:
    """The vertex ids of ``instances``, each pair of ``pairs`` (indices into ``instances``) as one, and the
    indices of the merged ones in that list."""
    partner = dict(pairs)
    second = set(partner.values())
    kept = [i for i in range(len(instances)) if i not in second]
    pieces = [np.sort(np.concatenate([instances[i].vertices, instances[partner[i]].vertices])) if i in partner
              else instances[i].vertices for i in kept]
    return pieces, {k for k, i in enumerate(kept) if i in partner}
