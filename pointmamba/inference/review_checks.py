"""Checks for the failures the tooth confidence does not see (issue 43): each finds one failure mode of a
segmented arch from its teeth's sizes and places and the network's tooth evidence, however sure the
numbering is of its numbers.

* ``split``: one tooth cut in two, the second half numbered as a missing neighbour: two neighbouring
  teeth, each about half its number's typical width, touching, together about one tooth wide;
* ``packed``: the same failure where the widths do not show it (a molar at the back of the arch cut other
  than across it): two neighbours with adjacent numbers whose centres sit closer than two such teeth can;
* ``dropped``: a tooth between two present teeth left as gingiva: a space of at least a tooth's width
  between neighbours, and across it a tooth's width of surface the network calls tooth;
* ``lost_end``: a tooth at the end of the arch left as gingiva: behind the last tooth of a side, a
  tooth's width of surface the network calls tooth;
* ``unnumbered``: a tooth the cut found that the numbering left as gingiva: a cut piece of at least a
  share of a tooth's width that the network calls tooth, numbered as gingiva (as a molar behind an open space
  is, where the network's evidence names the missing tooth in front of it);
* ``parts``: a mesh of several large separate parts (two jaws in one file).

Widths and spaces are measured as the numbering measures them (:func:`~pointmamba.data.arch.measure_instances`,
:func:`~pointmamba.data.arch.gap_mm`) and compared with the typical widths it uses (:mod:`.arch_priors`).
The thresholds (:class:`~.confidence.ReviewRules`) and how they were chosen: ``docs/results/review_flag/``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..data.arch import Instance
    from .confidence import ReviewRules, ToothConfidence

TOOTH_PROBABILITY = 0.5  # a vertex the network calls tooth: its probability of any tooth class at least this
MIN_TOOTH_VERTICES = 5  # fewer tooth-like vertices than this measure no width


def _typical(jaw: str, fdi: int) -> float:
    """The priors' typical width (mm) of tooth ``fdi`` (:data:`~.arch_priors.FITTED`)."""
    from .arch_priors import FITTED

    return float(FITTED[jaw]["width_mean"][fdi % 10 - 1])


def looks_split(width_a: float, width_b: float, typical_a: float, typical_b: float, gap: float,
                rules: "ReviewRules") -> bool:
    """Two neighbouring teeth of measured widths ``width_a``, ``width_b`` (mm) whose numbers' typical widths
    are ``typical_a``, ``typical_b``, ``gap`` mm apart: each about half a tooth, touching, together one
    tooth (the ``split`` check)."""
    return (width_a < rules.split_half * typical_a and width_b < rules.split_half * typical_b
            and width_a + width_b <= rules.split_sum * max(typical_a, typical_b) and gap <= rules.split_gap_mm)


def centres_apart(a: "Instance", b: "Instance") -> float:
    """The distance (mm) between two instances' centroids seen from above (canonical frame)."""
    return float(np.linalg.norm(a.points[:, :2].mean(0) - b.points[:, :2].mean(0)))


def looks_packed(a: "Instance", b: "Instance", typical_a: float, typical_b: float, rules: "ReviewRules") -> bool:
    """Neighbours ``a``, ``b`` with adjacent numbers of typical widths ``typical_a``, ``typical_b`` (mm): their
    centroids seen from above closer than ``rules.packed`` times the mean typical width (the ``packed``
    check). Centres, not widths: a molar cut other than across the arch has pieces of nearly full width."""
    return centres_apart(a, b) < rules.packed * (typical_a + typical_b) / 2


def _span(values: np.ndarray) -> float:
    """The 5th-95th percentile span of ``values``; 0 for fewer than MIN_TOOTH_VERTICES."""
    if len(values) < MIN_TOOTH_VERTICES:
        return 0.0
    lo, hi = np.percentile(values, [5, 95])
    return float(hi - lo)


def _tooth_extent(theta: np.ndarray, radius: np.ndarray) -> float:
    """The extent along the arch (mm) of points at angles ``theta`` (degrees) and ``radius`` (mm): their
    5th-95th percentile angle span times their median radius; 0 for fewer than MIN_TOOTH_VERTICES."""
    if len(theta) < MIN_TOOTH_VERTICES:
        return 0.0
    return float(np.radians(_span(theta)) * np.median(radius))


def gap_region(a: "Instance", b: "Instance", theta: np.ndarray, radius: np.ndarray, tooth_like: np.ndarray,
               band_mm: float | None = 1.0) -> np.ndarray:
    """(V,) mask: the ``tooth_like`` vertices in the space between neighbouring teeth ``a`` and ``b``: between
    their facing edges along the arch (2nd / 98th percentile angles), at their radii (``band_mm`` either
    way; None: at any radius)."""
    ends = sorted([np.percentile(theta[a.vertices], [2, 98]), np.percentile(theta[b.vertices], [2, 98])],
                  key=lambda r: r[0])
    lo, hi = ends[0][1], ends[1][0]
    region = tooth_like & (theta > lo) & (theta < hi)
    if band_mm is None:
        return region
    r_lo, r_hi = np.percentile(radius[np.concatenate([a.vertices, b.vertices])], [5, 95])
    return region & (radius >= r_lo - band_mm) & (radius <= r_hi + band_mm)


def end_region(last: "Instance", side: float, expect: float, theta: np.ndarray, radius: np.ndarray,
               tooth_like: np.ndarray, band_mm: float | None = 2.0, overlap: float = 0.0) -> np.ndarray:
    """(V,) mask: the ``tooth_like`` vertices behind ``last``, a side's last tooth (``side`` -1: the arch's
    end at low angles, +1: at high ones), within one and a half ``expect`` (mm, the next tooth's typical
    width) of its distal edge and at its radii (``band_mm`` either way; None: at any radius). ``overlap``:
    the window starts this share of its length in front of the edge (where the arch runs away from the
    frame's centre, the next molar shares angles with the last tooth)."""
    t, r = theta[last.vertices], radius[last.vertices]
    reach = np.degrees(1.5 * expect / max(float(np.median(r)), 1e-6))
    edge = np.percentile(t, 98) if side > 0 else np.percentile(t, 2)
    beyond = (theta - edge) * side
    region = tooth_like & (beyond > -overlap * reach) & (beyond <= reach)
    if band_mm is None:
        return region
    r_lo, r_hi = np.percentile(r, [5, 95])
    return region & (radius >= r_lo - band_mm) & (radius <= r_hi + band_mm)


def end_region_along(last: "Instance", side: float, expect: float, xy: np.ndarray, tooth_like: np.ndarray,
                     band_mm: float | None = 2.0, overlap: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(V,) mask and (V,) coordinate (mm) along the distal direction: the ``tooth_like`` vertices behind
    ``last``, a side's last tooth, measured along its own arch direction (``last.tangent``, which points
    towards higher angles: ``side`` +1 distal, -1 mesial), from its distal edge out to one and a half
    ``expect``, and across it within its own extent and ``band_mm`` either way (None: any). ``xy`` (V, 2)
    the vertices' canonical x, y. At the back of the arch a molar behind the last one sits further out at
    about its angles, where :func:`end_region` (by angle and radius) does not look."""
    distal = side * np.asarray(last.tangent, dtype=np.float64)
    across = np.array([-distal[1], distal[0]])
    centre = last.points[:, :2].mean(0)
    rel, own = np.asarray(xy, dtype=np.float64) - centre, last.points[:, :2] - centre
    u = rel @ distal
    edge = np.percentile(own @ distal, 98)
    reach = 1.5 * expect
    region = tooth_like & (u > edge - overlap * reach) & (u <= edge + reach)
    if band_mm is not None:
        v, lo_hi = rel @ across, np.percentile(own @ across, [5, 95])
        region &= (v >= lo_hi[0] - band_mm) & (v <= lo_hi[1] + band_mm)
    return region, u


def dropped_space(a: "Instance", b: "Instance", gap: float, expect: float, theta: np.ndarray, radius: np.ndarray,
                  tooth_like: np.ndarray | None, rules: "ReviewRules") -> tuple[float, np.ndarray | None] | None:
    """The ``dropped`` check between neighbouring teeth ``a`` and ``b``, ``gap`` mm apart, where a tooth of
    typical width ``expect`` (mm) would fit: (the extent in mm of the tooth-like surface there, its
    :func:`gap_region` mask) when the space is at least ``rules.dropped_gap`` x ``expect`` and that surface
    reaches ``rules.tooth_share`` x ``expect``; else None. ``tooth_like`` None: the space itself counts
    (extent = ``gap``, no mask)."""
    if gap < rules.dropped_gap * expect:
        return None
    if tooth_like is None:
        return (gap, None) if gap >= rules.tooth_share * expect else None
    region = gap_region(a, b, theta, radius, tooth_like)
    extent = _tooth_extent(theta[region], radius[region])
    return (extent, region) if extent >= rules.tooth_share * expect else None


def behind_region(last: "Instance", side: float, expect: float, theta: np.ndarray, radius: np.ndarray,
                  xy: np.ndarray, tooth_like: np.ndarray, rules: "ReviewRules", band_mm: float | None = 2.0,
                  overlap: float = 0.0) -> tuple[np.ndarray, float]:
    """(V,) mask of the ``tooth_like`` vertices behind ``last``, a side's last tooth (``side``: see
    :func:`end_region`), and their extent (mm) along the arch: along the last tooth's own direction
    (:func:`end_region_along`, ``xy`` the vertices' x, y) with ``rules.end_along_tangent``, else by angle
    around the arch frame's centre (:func:`end_region`, ``theta`` and ``radius``)."""
    if rules.end_along_tangent:
        region, u = end_region_along(last, side, expect, xy, tooth_like, band_mm, overlap)
        return region, _span(u[region])
    region = end_region(last, side, expect, theta, radius, tooth_like, band_mm, overlap)
    return region, _tooth_extent(theta[region], radius[region])


def lost_behind(last: "Instance", side: float, expect: float, theta: np.ndarray, radius: np.ndarray,
                xy: np.ndarray, tooth_like: np.ndarray, rules: "ReviewRules") -> tuple[float, np.ndarray] | None:
    """The ``lost_end`` check behind ``last``, a side's last tooth (``side``: see :func:`end_region`), the next
    tooth ``expect`` mm wide: (the extent in mm of the tooth-like surface there, its :func:`behind_region`
    mask) when it reaches ``rules.end_share`` x ``expect``; else None."""
    region, extent = behind_region(last, side, expect, theta, radius, xy, tooth_like, rules)
    return (extent, region) if extent >= rules.end_share * expect else None


def failure_findings(teeth: list["ToothConfidence"], jaw: str, aligned: np.ndarray, instances: np.ndarray,
                     probs: np.ndarray | None, rules: "ReviewRules") -> list[tuple[str, str]]:
    """``(kind, text)`` of the ``split``, ``dropped`` and ``lost_end`` checks (see the module doc) for the
    ``teeth`` (sorted along the arch, numbered) of instances ``instances`` (V,), vertices ``aligned``
    (V, 3, canonical frame, mm); ``probs`` (V, C) the network's probabilities (column 0 gingiva; None:
    a space of a tooth's width between teeth counts as tooth-like, and the arch's ends are not checked)."""
    from ..data.arch import gap_mm, measure_instances, skipped_between

    if len(teeth) < 2:
        return []
    aligned = np.asarray(aligned, dtype=np.float64)
    members = [np.flatnonzero(instances == t.instance) for t in teeth]
    measured, frame = measure_instances(aligned, members)
    by_key = {m.key: m for m in measured}
    inst = [by_key[k] for k in range(len(teeth))]  # in the order of ``teeth`` (along the arch by number)
    theta, radius = frame.polar(aligned[:, :2])
    gum = np.asarray(instances) == 0
    tooth_like = gum & ((1.0 - np.asarray(probs)[:, 0]) >= TOOTH_PROBABILITY) if probs is not None else None
    out: list[tuple[str, str]] = []
    for k, (a, b) in enumerate(zip(teeth, teeth[1:])):
        if a.fdi == b.fdi:
            continue
        ia, ib = inst[k], inst[k + 1]
        ta, tb = _typical(jaw, a.fdi), _typical(jaw, b.fdi)
        gap = gap_mm(ia, ib)
        if looks_split(ia.width, ib.width, ta, tb, gap, rules):
            out.append(("split", f"teeth {a.fdi} and {b.fdi} each about half a tooth wide ({ia.width:.1f} and "
                                 f"{ib.width:.1f} mm, typical {ta:.1f} and {tb:.1f}) and touching: one tooth split in two?"))
            continue
        skipped = skipped_between(a.fdi, b.fdi)
        if not skipped and looks_packed(ia, ib, ta, tb, rules):
            out.append(("packed", f"teeth {a.fdi} and {b.fdi} only {centres_apart(ia, ib):.1f} mm apart (typical "
                                  f"{(ta + tb) / 2:.1f}): one tooth cut in two?"))
        expect = min(_typical(jaw, f) for f in skipped) if skipped else min(ta, tb)
        hit = dropped_space(ia, ib, gap, expect, theta, radius, tooth_like, rules)
        if hit is not None:
            extent = hit[0]
            what = f"{', '.join(map(str, skipped))} missing" if skipped else "no number missing"
            out.append(("dropped", f"{gap:.1f} mm between {a.fdi} and {b.fdi} ({what}) with {extent:.1f} mm of "
                                   f"tooth-like surface left as gingiva (typical tooth {expect:.1f} mm): a tooth dropped?"))
    if tooth_like is not None:
        out += _lost_at_ends(teeth, inst, jaw, theta, radius, tooth_like, rules, aligned[:, :2])
    return out


def _lost_at_ends(teeth: list["ToothConfidence"], inst: list, jaw: str, theta: np.ndarray, radius: np.ndarray,
                  tooth_like: np.ndarray, rules: "ReviewRules", xy: np.ndarray) -> list[tuple[str, str]]:
    """``lost_end`` findings: behind each side's last tooth (numbered below 8), surface the network calls
    tooth, left as gingiva, along at least ``rules.end_share`` of the next number's typical width."""
    out = []
    middles = np.array([m.middle for m in inst])
    for side in (-1.0, 1.0):  # the two ends of the arch: angles below and above the incisors'
        on_side = np.flatnonzero(np.sign(middles) == side)
        if not len(on_side):
            continue
        last = on_side[np.argmax(np.abs(middles[on_side]))]
        tooth = teeth[last]
        if tooth.fdi % 10 >= 8:
            continue
        expect = _typical(jaw, tooth.fdi + 1)
        hit = lost_behind(inst[last], side, expect, theta, radius, xy, tooth_like, rules)
        if hit is not None:
            out.append(("lost_end", f"{hit[0]:.1f} mm of tooth-like surface behind {tooth.fdi} left as gingiva "
                                    f"(typical {tooth.fdi + 1}: {expect:.1f} mm): a tooth lost at the arch's end?"))
    return out


def looks_unnumbered(inst: "Instance", probs: np.ndarray, jaw: str, rules: "ReviewRules") -> float | None:
    """The mean gingiva probability (``probs`` column 0) of the vertices of ``inst``, a cut piece numbered
    gingiva, where the ``unnumbered`` check reports it: at least ``rules.unnumbered_width`` x the jaw's narrowest
    typical tooth width wide and that mean below 1 - TOOTH_PROBABILITY (the network calls it tooth); else None
    (and always with the check off)."""
    from ..data.arch import TEXTBOOK_WIDTH_MM

    if rules.unnumbered_width is None or inst.width < rules.unnumbered_width * float(TEXTBOOK_WIDTH_MM[jaw].min()):
        return None
    gum = float(np.asarray(probs)[inst.vertices, 0].mean())
    return gum if gum < 1.0 - TOOTH_PROBABILITY else None


def unnumbered_findings(numbering: Any, probs: np.ndarray, jaw: str, rules: "ReviewRules") -> list[tuple[str, str]]:
    """``unnumbered`` findings: each of the ``numbering``'s instances (cut pieces, :mod:`.tooth_numbering`) it
    numbered gingiva that :func:`looks_unnumbered`, named by the numbered teeth beside it along the arch. No
    numbering: none."""
    from ..data.arch import fdi_of_index

    if numbering is None:
        return []
    options = list(numbering.options)
    out = []
    for i, (inst, opt) in enumerate(zip(numbering.instances, options)):
        gum = looks_unnumbered(inst, probs, jaw, rules) if opt is None else None
        if gum is None:
            continue
        # the instances are sorted along the arch: the nearest numbered tooth on each side names the place
        before = next((fdi_of_index(o[1], jaw) for o in reversed(options[:i]) if o is not None), None)
        after = next((fdi_of_index(o[0], jaw) for o in options[i + 1:] if o is not None), None)
        where = (f" between {before} and {after}" if before and after else
                 f" behind {before or after}" if before or after else "")
        out.append(("unnumbered", f"a piece {inst.width:.1f} mm wide{where} that the network calls tooth (gingiva "
                                  f"{gum:.2f}) was numbered as gingiva: a tooth lost?"))
    return out


def parts_finding(num_vertices: int, faces: np.ndarray | None, rules: "ReviewRules") -> list[tuple[str, str]]:
    """``parts`` when the mesh holds two or more connected parts of at least ``rules.second_part`` of its
    vertices each (two jaws in one file; :func:`~pointmamba.data.integrity.part_sizes`)."""
    from ..data.integrity import part_sizes

    if faces is None or not len(faces):
        return []
    sizes = part_sizes(num_vertices, faces)
    large = sizes[sizes >= rules.second_part * num_vertices]
    if len(large) < 2:
        return []
    shares = ", ".join(f"{s / num_vertices:.0%}" for s in large)
    return [("parts", f"the mesh has {len(large)} large separate parts ({shares} of the vertices): two jaws in "
                      "one file? Segment each jaw from its own file")]
