"""Mending a tooth split in two (issue 43, item 3): two neighbouring instances numbered as neighbouring
teeth, each about half its number's width, touching, together about one tooth wide, are one tooth cut in
two by the graph cut. :func:`split_pairs` finds them in a numbering, with the thresholds of the review
flag's ``split`` check (:class:`~.confidence.ReviewRules`); :func:`~.tooth_numbering.number_teeth` merges
each pair into one instance and numbers the arch again (``infer.mend_split``, off: its pre-registered rule
failed on a simulation, ``docs/results/review_flag/README.md``, which also gives what it does on the real
split predictions found afterwards).
"""
from __future__ import annotations

import numpy as np

from .arch_priors import ArchPriors


def split_pairs(numbering, priors: ArchPriors) -> list[tuple[int, int]]:
    """Indices ``(i, i + 1)`` of neighbouring instances of ``numbering`` (sorted along the arch) that look
    like one tooth split in two: each numbered as one tooth, the two numbers neighbours, each narrower
    than ``split_half`` x its number's typical width, together at most ``split_sum`` x the wider one's,
    their nearest vertices within ``split_gap_mm``. No instance is in two pairs."""
    from .confidence import ReviewRules
    from .review_checks import looks_split
    from ..data.arch import gap_mm

    rules = ReviewRules()
    out: list[tuple[int, int]] = []
    options, instances = numbering.options, numbering.instances
    i = 0
    while i + 1 < len(instances):
        a, b = options[i], options[i + 1]
        if a is not None and b is not None and a[0] == a[1] and b[0] == b[1] and b[0] == a[0] + 1:
            if looks_split(instances[i].width, instances[i + 1].width, float(priors.width_mean[a[0]]),
                           float(priors.width_mean[b[0]]), gap_mm(instances[i], instances[i + 1]), rules):
                out.append((i, i + 1))
                i += 2
                continue
        i += 1
    return out


def merged_pieces(instances: list, pairs: list[tuple[int, int]]) -> list[np.ndarray]:
    """The vertex ids of ``instances`` with each pair of ``pairs`` (indices into ``instances``) as one."""
    second = {j for _, j in pairs}
    partner = dict(pairs)
    return [np.sort(np.concatenate([inst.vertices, instances[partner[i]].vertices])) if i in partner else inst.vertices
            for i, inst in enumerate(instances) if i not in second]
