"""Teeth the numbering left as gingiva, looked at again (issue 43, item 3; ``infer.mend_dropped``).

The graph cut calls a vertex gingiva when gingiva is its likeliest single class, although the network may
give the teeth more in all: a tooth whose number it cannot decide (0.35 gingiva, 0.3 premolar 4, 0.3
premolar 5) is cut as gingiva, and the numbering never sees it. Where the review checks would report such a
tooth (:mod:`.review_checks`: ``dropped``, a space of at least a tooth's width between two numbered teeth,
a number skipped there, and across it surface the network calls tooth; ``lost_end``, that surface behind a
side's last tooth), that surface (the pieces of tooth-like gingiva there, each taken whole
within the space along the arch) becomes one more instance and the arch is numbered again: the numbering
decides, by the same evidence, width and spacing priors, whether it is a tooth and which. A scan mended so
keeps a ``mended`` finding (a person checks what was added).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..data.arch import NUM_ARCH_INDICES, ArchFrame, gap_mm
from .review_checks import TOOTH_PROBABILITY, behind_region, dropped_space, gap_region, lost_behind

HALF = NUM_ARCH_INDICES // 2  # arch indices below it lie on the -x side

if TYPE_CHECKING:
    from .arch_priors import ArchPriors
    from .confidence import ReviewRules
    from .tooth_numbering import Numbering


def dropped_regions(numbering: "Numbering", labels: np.ndarray, probs: np.ndarray, aligned: np.ndarray,
                    faces: np.ndarray, priors: "ArchPriors", rules: "ReviewRules", min_vertices: int
                    ) -> list[np.ndarray]:
    """Vertex ids of each space where a numbered arch left a tooth as gingiva (see the module doc):
    ``numbering`` of instances sorted along the arch, ``labels`` (V,) its per-vertex classes (0 gingiva),
    ``probs`` (V, C) the network's probabilities, ``aligned`` (V, 3) the canonical frame (mm), ``faces``
    the mesh's; ``priors`` give the typical widths, ``rules`` the review checks' thresholds; a region of
    fewer than ``min_vertices`` vertices is none."""
    numbered = [(inst, opt) for inst, opt in zip(numbering.instances, numbering.options) if opt is not None]
    if len(numbered) < 2:
        return []
    labels = np.asarray(labels)
    frame = ArchFrame.from_teeth(aligned[labels > 0, :2])
    theta, radius = frame.polar(aligned[:, :2])
    tooth_like = (labels == 0) & ((1.0 - np.asarray(probs)[:, 0]) >= TOOTH_PROBABILITY)
    width = priors.width_mean
    found = []  # (the check's region, the window its pieces are taken whole in)
    for (a, opt_a), (b, opt_b) in zip(numbered, numbered[1:]):
        skipped = range(opt_a[1] + 1, opt_b[0])
        if not len(skipped):
            continue
        expect = float(min(width[k] for k in skipped))
        hit = dropped_space(a, b, gap_mm(a, b), expect, theta, radius, tooth_like, rules)
        if hit is not None:
            found.append((hit[1], gap_region(a, b, theta, radius, tooth_like, band_mm=None)))
    for (last, opt), side, step in ((numbered[0], -1.0, -1), (numbered[-1], 1.0, 1)):
        nxt = (opt[0] if step < 0 else opt[1]) + step  # the arch index behind the side's last tooth
        if not 0 <= nxt < NUM_ARCH_INDICES or (nxt < HALF) != (step < 0):  # no side, or the last tooth is across the midline
            continue
        expect = float(width[nxt])
        hit = lost_behind(last, side, expect, theta, radius, aligned[:, :2], tooth_like, rules)
        if hit is not None:
            window, _ = behind_region(last, side, expect, theta, radius, aligned[:, :2], tooth_like, rules,
                                      band_mm=None, overlap=0.5)
            found.append((hit[1], window))
    if not found:
        return []
    from ..data.mesh import mesh_edges

    edges = mesh_edges(faces)  # only where a check fired: 0.08 s at 201k vertices
    wholes = [_whole(seed, window, edges) for seed, window in found]
    return [np.flatnonzero(w) for w in wholes if w.sum() >= min_vertices]


def _whole(seed: np.ndarray, window: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(V,) mask: the connected pieces (mesh ``edges``) of ``window`` that hold a vertex of ``seed``: the
    checks find a tooth by the surface at the neighbours' radii, a molar at the arch's end reaches beyond."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(window)
    e = edges[window[edges[:, 0]] & window[edges[:, 1]]]
    _, comp = connected_components(coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)), directed=False)
    return window & np.isin(comp, np.unique(comp[seed]))
