"""A tooth cut between two numbers, merged back (issue 43, item 3; ``infer.merge_cut_teeth``).

The graph cut sometimes cuts one tooth in two, and the numbering then gives the halves two neighbouring
numbers, moving every tooth behind on one (a molar as "15" + "16", the premolar in front "14"). The review
checks see it from the widths (:mod:`.review_checks`: ``split``, each half about half its number's width;
``squeezed``, the two together a quarter short of their numbers' widths). Here each such pair of the
numbering's instances becomes one instance, numbered again as one tooth (or gingiva, never two teeth)
with the rest of the arch; a scan merged so keeps a
``merged`` finding (a person checks it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..data.arch import gap_mm, position_of_index
from .review_checks import looks_split, looks_squeezed

if TYPE_CHECKING:
    from ..data.arch import Instance
    from .arch_priors import ArchPriors
    from .confidence import ReviewRules
    from .tooth_numbering import Numbering


def cut_pairs(numbering: "Numbering", priors: "ArchPriors", rules: "ReviewRules") -> list[tuple[int, int]]:
    """Indices ``(i, j)`` into ``numbering.instances`` (sorted along the arch) of each pair of consecutive
    numbered instances, each one tooth, their numbers neighbours, that the ``split`` or ``squeezed`` check
    reports (``priors``' typical widths, ``rules``' thresholds). No instance is in two pairs: where pairs
    overlap (a tooth beside a cut one is narrow-looking too), the pair shortest of its typical width wins."""
    numbered = [i for i, opt in enumerate(numbering.options) if opt is not None]
    found: list[tuple[float, int, int]] = []
    for i, j in zip(numbered, numbered[1:]):
        a, b = numbering.options[i], numbering.options[j]
        if a[0] != a[1] or b[0] != b[1] or b[0] != a[0] + 1:
            continue
        ia, ib = numbering.instances[i], numbering.instances[j]
        ta, tb = float(priors.width_mean[a[0]]), float(priors.width_mean[b[0]])
        gap = gap_mm(ia, ib)
        # the squeezed check's third-molar rule reads FDI numbers: position 8 stands for any third molar
        fa, fb = 10 + int(position_of_index(a[0])), 10 + int(position_of_index(b[0]))
        if looks_split(ia.width, ib.width, ta, tb, gap, rules) or looks_squeezed(ia.width, ib.width, ta, tb, gap,
                                                                                fa, fb, rules):
            found.append(((ia.width + ib.width) / (ta + tb), i, j))
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
