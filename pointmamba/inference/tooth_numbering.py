"""Instance-level tooth numbering: whole teeth numbered jointly along the arch, gaps allowed.

A per-point classifier that has learned to count teeth from the midline numbers a whole run of teeth one
position off where a tooth is missing or extra. Here the teeth are first cut out as instances (connected
pieces of one label after the graph cut), then numbered together:

1. every instance gets class evidence (the network's mean probabilities over its surface), a place along
   the arch (angles around a point inside the arch, canonical frame: crowns +z, incisors +y) and a
   mesio-distal width (its extent along the arch);
2. walking along the arch from one distal end to the other, the numbers must run 8..1 on one side and
   1..8 on the other, each used at most once. An exact dynamic programme finds the cheapest numbering
   under a small generative model: ``-log`` of the network's evidence, a Gaussian width prior per tooth,
   a prior that each position is missing (third molars often, others rarely), and the spacing between
   neighbouring teeth: no number skipped means touching teeth, a skipped number means room for the
   missing tooth or a closed space (both are common, so this term is a mixture). An instance may also be
   called gingiva (priced by its gingiva evidence and by its width: false positives are small fragments),
   or two neighbouring teeth (two teeth under one label, split at their expected widths);
3. the same model gives, by the forward-backward algorithm, each instance's posterior over numbers:
   the confidence of its number and the runner-up.

The priors (widths, spacing, missing rates) were measured on the ground truth of the training scans,
with the same measuring functions as inference uses (``python -m pointmamba.research.fit_arch_priors``, see
:mod:`pointmamba.inference.arch_priors`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.arch import NUM_ARCH_INDICES, ArchFrame, Instance, gap_mm, index_classes, measure_instances, per_index
from ..data.label_pieces import tooth_pieces
from .arch_priors import LOG_EPS, ArchPriors, default_priors

FORCED_COST = 1e6  # nats added to every option a forced instance may not take (finite: inf - inf is NaN in the sums)


@dataclass
class Numbering:
    """The numbering of a scan's instances: ``options[i]`` = (first, last) arch index of instance i, or
    None for gingiva; ``posterior`` (n, C) each instance's probability of each class (a pair instance
    counts for both of its classes; column 0 = gingiva); ``cost`` of the chosen numbering;
    ``first_posterior`` / ``last_posterior`` as ``posterior`` for the first / last tooth of an instance."""

    options: list[tuple[int, int] | None]
    posterior: np.ndarray
    cost: float
    # (n, C) each instance's probability of each class as its first / last tooth along the arch (the same
    # class for a single tooth): the numbers of the two halves of an instance split into a pair
    first_posterior: np.ndarray
    last_posterior: np.ndarray
    instances: list[Instance] = field(default_factory=list)
    dentition: Any = None  # dentition.DentitionReading: how the lone-premolar pattern was read (None: not asked)
    log_z: float = float("nan")  # log of the sum over every numbering of exp(-cost / temperature)
    # arch indices of the teeth a mend added (inference/dropped_teeth.py; [] none), and log_z of the cut's own
    # instances before it: the jaw call compares the two jaws' numberings of the same instances
    mended: list[int] = field(default_factory=list)
    cut_log_z: float = float("nan")
    merged: list[tuple[int, int]] = field(default_factory=list)  # arch indices of each pair merged (inference/cut_teeth.py)


def _options() -> tuple[np.ndarray, np.ndarray]:
    """Every (first, last) arch-index option: single teeth, then pairs of neighbours."""
    first = np.concatenate([np.arange(NUM_ARCH_INDICES), np.arange(NUM_ARCH_INDICES - 1)])
    last = np.concatenate([np.arange(NUM_ARCH_INDICES), np.arange(1, NUM_ARCH_INDICES)])
    return first, last


def _logsumexp(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """log(sum(exp(x))) along ``axis``; -inf where every term is -inf (an impossible option)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


@dataclass
class _ArchEnergy:
    """Every energy (nats) of the numbering model of one arch, in the pieces the recursions add up. A
    numbering's cost is ``start`` of its first tooth + ``unary`` of each numbered instance +
    ``transition`` between consecutive numbered instances + ``end`` of its last tooth + the gingiva cost
    of every instance before, between and after them (``gum_cum`` differences); numbering nothing costs
    ``all_gum``."""

    first: np.ndarray  # (n_opt,) first arch index of each option (see _options)
    last: np.ndarray  # (n_opt,) last arch index of each option
    unary: np.ndarray  # (n, n_opt) instance i numbered with option o (_tooth_costs, forced included)
    gum_cum: np.ndarray  # (n + 1,) gingiva cost of instances [0, i): instances [a, b) cost gum_cum[b] - gum_cum[a]
    start: np.ndarray  # (n_opt,) the positions before an arch's first tooth, missing
    end: np.ndarray  # (n_opt,) the positions after an arch's last tooth, missing
    all_gum: float  # every instance gingiva and every position missing
    transition: dict[tuple[int, int], np.ndarray]  # (j, i) -> (o', o): instance j (option o') then i (option o)

    @property
    def shape(self) -> tuple[int, int]:
        """(instances, options)."""
        return self.unary.shape

    def gum_after(self) -> np.ndarray:
        """(n,) gingiva cost of the instances after each one (all of them gingiva if it is the last tooth)."""
        n = self.shape[0]
        return self.gum_cum[n] - self.gum_cum[1:n + 1]


def _tooth_costs(evidence: np.ndarray, widths: np.ndarray, priors: ArchPriors) -> np.ndarray:
    """(n, n_opt) cost of instance i being option o (one tooth, or two neighbouring teeth): ``-log`` of
    the network's evidence for the option's arch indices (each scaled by ``evidence_scale`` where set,
    weighted by ``evidence_weight``), the ``-log``
    width density (:meth:`ArchPriors.width_cost`), ``-log P(present)`` of each position it fills and,
    for a pair, ``pair_cost``."""
    first, last = _options()
    keep = priors.present_cost  # (16,) -log P(position present)
    ev = np.asarray(evidence, dtype=np.float64)
    if priors.evidence_scale is not None:
        ev = ev * priors.evidence_scale[None, :]
    unary = np.empty((len(widths), len(first)))
    for o in range(len(first)):
        f, l_ = first[o], last[o]
        data = -priors.evidence_weight * np.log(np.maximum(ev[:, f:l_ + 1].sum(1), LOG_EPS))
        unary[:, o] = (data + priors.width_cost(widths, f, l_) + keep[f:l_ + 1].sum()
                       + (priors.pair_cost if l_ > f else 0.0))
    return unary


def _force(unary: np.ndarray, gum: np.ndarray, forced: dict[int, int] | None, single: set[int] | None = None) -> None:
    """Add :data:`FORCED_COST` (in place) to every option a ``forced`` instance may not take (all but its
    one arch index, gingiva included) and to the two-teeth options of each ``single`` instance."""
    first, last = _options()
    for i, a in (forced or {}).items():
        keep_only = (first == a) & (last == a)
        unary[i, ~keep_only] += FORCED_COST
        gum[i] += FORCED_COST
    for i in single or ():
        unary[i, last > first] += FORCED_COST


def _transition_costs(instances: list[Instance], priors: ArchPriors, gum_cum: np.ndarray
                      ) -> dict[tuple[int, int], np.ndarray]:
    """For every pair j < i of instances, the (o', o) cost of instance j taking option o' and instance i
    option o with every instance between them gingiva: the positions strictly between the two options,
    missing (``-log P(missing)`` each; inf where o does not come after o'), the ``-log`` density of the
    spacing between the two teeth (:meth:`ArchPriors.gap_cost`: touching when no position is skipped,
    else closed or open across the skipped positions' typical width), and the gingiva cost of the
    instances between."""
    first, last = _options()
    miss_cum = np.concatenate([[0.0], np.cumsum(priors.missing_cost)])  # sum over arch indices [a, b) = cum[b] - cum[a]
    width_cum = np.concatenate([[0.0], np.cumsum(priors.width_mean)])
    skip_lo = last[:, None] + 1  # (o', o)
    skip_hi = first[None, :]
    allowed = skip_hi >= skip_lo
    skipped_cost = np.where(allowed, miss_cum[np.clip(skip_hi, 0, NUM_ARCH_INDICES)] - miss_cum[np.clip(skip_lo, 0, NUM_ARCH_INDICES)], np.inf)
    skipped_width = np.where(allowed, width_cum[np.clip(skip_hi, 0, NUM_ARCH_INDICES)] - width_cum[np.clip(skip_lo, 0, NUM_ARCH_INDICES)], 0.0)
    touching = allowed & (skip_hi == skip_lo)
    out = {}
    for i in range(len(instances)):
        for j in range(i):
            g = gap_mm(instances[j], instances[i])
            out[j, i] = skipped_cost + priors.gap_cost(g, touching, skipped_width) + (gum_cum[i] - gum_cum[j + 1])
    return out


def _arch_energy(instances: list[Instance], evidence: np.ndarray, gum_evidence: np.ndarray, priors: ArchPriors,
                forced: dict[int, int] | None = None, single: set[int] | None = None) -> _ArchEnergy:
    """The energies of numbering ``instances`` (see :func:`number_instances` for the arguments): each
    instance as each tooth option (:func:`_tooth_costs`) or as gingiva (:meth:`ArchPriors.gingiva_cost`),
    ``forced`` instances held to their number (:func:`_force`), the missing positions before the first
    and after the last tooth, and the transitions between numbered instances (:func:`_transition_costs`)."""
    first, last = _options()
    miss_cum = np.concatenate([[0.0], np.cumsum(priors.missing_cost)])
    widths = np.array([inst.width for inst in instances])
    gum = priors.gingiva_cost(gum_evidence, widths)
    unary = _tooth_costs(evidence, widths, priors)
    _force(unary, gum, forced, single)
    gum_cum = np.concatenate([[0.0], np.cumsum(gum)])
    return _ArchEnergy(
        first=first, last=last, unary=unary, gum_cum=gum_cum,
        start=miss_cum[first], end=miss_cum[NUM_ARCH_INDICES] - miss_cum[last + 1],
        all_gum=gum_cum[len(instances)] + miss_cum[NUM_ARCH_INDICES],
        transition=_transition_costs(instances, priors, gum_cum))


def _forward(e: _ArchEnergy, temperature: float) -> tuple[np.ndarray, list[list[tuple[int, int]]], np.ndarray]:
    """The forward sweep, min-sum and sum-product at once. ``D[i, o]``: the cost of the cheapest
    numbering of instances 0..i in which instance i is the last numbered one, with option o;
    ``back[i][o]``: the (instance, option) before it there ((-1, -1): none); ``A[i, o]``: log of the sum
    of exp(-cost / temperature) over all those numberings."""
    n, n_opt = e.shape
    D = np.full((n, n_opt), np.inf)
    A = np.full((n, n_opt), -np.inf)
    back: list[list[tuple[int, int]]] = [[(-1, -1)] * n_opt for _ in range(n)]
    for i in range(n):
        best = e.start + e.gum_cum[i]  # instance i is the first tooth
        arg_j = np.full(n_opt, -1)
        arg_o = np.full(n_opt, -1)
        terms = [-(e.start + e.gum_cum[i]) / temperature]
        for j in range(i):
            t = e.transition[j, i]
            cand = D[j][:, None] + t  # (o', o)
            k = np.argmin(cand, axis=0)
            val = cand[k, np.arange(n_opt)]
            better = val < best
            best = np.where(better, val, best)
            arg_j = np.where(better, j, arg_j)
            arg_o = np.where(better, k, arg_o)
            terms.append(_logsumexp(A[j][:, None] - t / temperature, axis=0))
        D[i] = best + e.unary[i]
        A[i] = _logsumexp(np.stack(terms), axis=0) - e.unary[i] / temperature
        back[i] = list(zip(arg_j.tolist(), arg_o.tolist()))
    return D, back, A


def _backward(e: _ArchEnergy, temperature: float) -> np.ndarray:
    """``B[i, o]``: log of the sum of exp(-cost / temperature) over everything after instance i taking
    option o (the later instances' numbers, or none of them numbered), its own cost left out."""
    n, n_opt = e.shape
    B = np.full((n, n_opt), -np.inf)
    for i in reversed(range(n)):
        terms = [-(e.end + e.gum_cum[n] - e.gum_cum[i + 1]) / temperature]
        for k in range(i + 1, n):
            terms.append(_logsumexp(-e.transition[i, k] / temperature + (B[k] - e.unary[k] / temperature)[None, :], axis=1))
        B[i] = _logsumexp(np.stack(terms), axis=0)
    return B


def _backtrace(e: _ArchEnergy, D: np.ndarray, back: list[list[tuple[int, int]]]
               ) -> tuple[list[tuple[int, int] | None], float]:
    """The cheapest numbering and its cost: the best last tooth (``D`` plus what comes after it), followed
    back through ``back``; all gingiva where that is cheaper."""
    n, n_opt = e.shape
    finals = D + e.end[None, :] + e.gum_after()[:, None] if n else np.zeros((0, n_opt))
    options: list[tuple[int, int] | None] = [None] * n
    cost = e.all_gum
    if n and finals.min() < e.all_gum:
        i, o = np.unravel_index(int(np.argmin(finals)), finals.shape)
        cost = float(finals[i, o])
        while i >= 0:
            options[i] = (int(e.first[o]), int(e.last[o]))
            i, o = back[i][o]
    return options, cost


def _log_partition(e: _ArchEnergy, A: np.ndarray, temperature: float) -> float:
    """log Z: the all-gingiva numbering, plus every numbering by its last tooth (``A`` and what follows)."""
    last_terms = (A - (e.end[None, :] + e.gum_after()[:, None]) / temperature).ravel()
    return _logsumexp(np.concatenate([[-e.all_gum / temperature], last_terms]))


def _posteriors(e: _ArchEnergy, marg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each instance's probability of each class (column 0 gingiva, 1 + a arch index a) from ``marg``
    (n, n_opt) its probability of each option: a pair counts for both its classes in the first array,
    for its first / last tooth's class in the second / third."""
    n = len(marg)
    posterior = np.zeros((n, NUM_ARCH_INDICES + 1))
    first_posterior, last_posterior = posterior.copy(), posterior.copy()
    for o in range(e.shape[1]):
        for a in range(e.first[o], e.last[o] + 1):
            posterior[:, 1 + a] += marg[:, o]
        first_posterior[:, 1 + e.first[o]] += marg[:, o]
        last_posterior[:, 1 + e.last[o]] += marg[:, o]
    for p in (posterior, first_posterior, last_posterior):
        p[:, 0] = np.clip(1.0 - marg.sum(1), 0.0, 1.0)
    return posterior, first_posterior, last_posterior


def number_instances(instances: list[Instance], evidence: np.ndarray, gum_evidence: np.ndarray,
                     priors: ArchPriors, temperature: float = 1.0, forced: dict[int, int] | None = None,
                     single: set[int] | None = None) -> Numbering:
    """The cheapest numbering of ``instances`` (sorted along the arch) and their posteriors.

    ``evidence`` (n, 16): each instance's probability of each arch index (the network's mean over its
    surface); ``gum_evidence`` (n,): its probability of gingiva. Energies are in nats; ``temperature``
    divides them for the posteriors only (calibration).

    ``forced`` {instance index: arch index}: those instances take that one number (every other option,
    gingiva included, costs :data:`FORCED_COST`): a reading of the arch given from outside (the dentition,
    :mod:`.dentition`), the rest numbered around it. ``single``: instance indices that may be one tooth or
    gingiva, not two teeth (a tooth merged from two pieces, :mod:`.cut_teeth`).

    The energies (:func:`_arch_energy`), the forward sweep (:func:`_forward`: the cheapest numbering's
    table and the forward sums), the backtrace (:func:`_backtrace`), the backward sums (:func:`_backward`),
    and from both the partition function and each instance's marginals (:func:`_posteriors`)."""
    e = _arch_energy(instances, evidence, gum_evidence, priors, forced, single)
    D, back, A = _forward(e, temperature)
    options, cost = _backtrace(e, D, back)
    B = _backward(e, temperature)
    log_z = _log_partition(e, A, temperature)
    marg = np.exp(A + B - log_z) if e.shape[0] else np.zeros((0, e.shape[1]))
    posterior, first_posterior, last_posterior = _posteriors(e, marg)
    return Numbering(options, posterior, cost, first_posterior, last_posterior, instances, log_z=float(log_z),
                     cut_log_z=float(log_z))


def merge_fragments(pieces: list[np.ndarray], edges: np.ndarray, labels: np.ndarray, points: np.ndarray,
                    min_vertices: int, reach_mm: float = 2.0) -> list[np.ndarray]:
    """Pieces below ``min_vertices`` join a larger piece: the one they share most mesh edges with (a
    sliver of another label on a tooth's flank is part of that tooth), else the nearest one of their own
    label within ``reach_mm`` (an island of a tooth's label cut off by a groove); others stay alone."""
    from scipy.spatial import cKDTree

    owner = np.full(len(labels), -1)
    for k, p in enumerate(pieces):
        owner[p] = k
    large = np.array([len(p) >= min_vertices for p in pieces], dtype=bool)
    small = [k for k in range(len(pieces)) if not large[k]]
    if not small or not large.any():
        return pieces
    a, b = owner[edges[:, 0]], owner[edges[:, 1]]
    cross = (a >= 0) & (b >= 0) & (a != b)
    a, b = np.concatenate([a[cross], b[cross]]), np.concatenate([b[cross], a[cross]])
    trees: dict[int, tuple[np.ndarray, cKDTree]] = {}  # per label: its large pieces' vertices
    target = {}
    for k in small:
        nb = b[a == k]
        nb = nb[large[nb]]
        if len(nb):
            target[k] = int(np.bincount(nb).argmax())
            continue
        label = int(labels[pieces[k][0]])
        if label not in trees:
            same = [pieces[j] for j in np.flatnonzero(large) if labels[pieces[j][0]] == label]
            ids = np.concatenate(same) if same else np.zeros(0, dtype=np.int64)
            trees[label] = (ids, cKDTree(points[ids]) if len(ids) else None)
        ids, tree = trees[label]
        if tree is not None:
            dist, idx = tree.query(points[pieces[k]], k=1)
            if dist.min() <= reach_mm:
                target[k] = int(owner[ids[idx[np.argmin(dist)]]])
    merged = {k: [p] for k, p in enumerate(pieces)}
    for k, t in target.items():
        merged[t].extend(merged.pop(k))
    return [np.sort(np.concatenate(v)) for v in merged.values()]


def measured_pieces(pieces: list[np.ndarray], aligned: np.ndarray, probs: np.ndarray,
                    areas: np.ndarray | None) -> tuple[list[Instance], np.ndarray]:
    """The instances of ``pieces`` along the arch and their mean probabilities (weighted by ``areas``,
    None: equal)."""
    w = np.ones(len(probs)) if areas is None else np.asarray(areas, dtype=np.float64)
    instances, _ = measure_instances(aligned, pieces)
    mean_probs = np.array([np.average(probs[inst.vertices], axis=0, weights=w[inst.vertices] + 1e-12)
                           for inst in instances]).reshape(len(instances), probs.shape[1])
    return instances, mean_probs


def number_teeth(labels: np.ndarray, probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, jaw: str,
                 num_classes: int, priors: ArchPriors | None = None, areas: np.ndarray | None = None,
                 temperature: float = 1.0, min_vertices: int = 20, dentition: str | None = None,
                 pieces: list[np.ndarray] | None = None,
                 measured: tuple[list[Instance], np.ndarray] | None = None,
                 mend_dropped: bool = False, merge_packed: bool = False,
                 merge_area_limit: float = 0.0, mend_unnumbered: float = 0.0,
                 mend_unnumbered_width: float = 0.0, mend_unnumbered_area: float = 0.0,
                 mend_unnumbered_touching: bool = False) -> tuple[np.ndarray, Numbering]:
    """Renumber the teeth of ``labels`` (per-vertex classes, e.g. after the graph cut) as whole instances
    (see module doc). Returns the new labels and the :class:`Numbering` (instances, options, posteriors).

    ``probs`` (V, C) the network's probabilities, ``aligned`` (V, 3) vertices in the canonical frame,
    ``areas`` (V,) vertex areas weighting the evidence (default: equal). ``dentition``
    ``auto`` | ``permanent`` | ``mixed`` reads the sides of the lone-premolar pattern that way
    (:mod:`.dentition`; None: the numbering alone, as before the dentition existed). ``pieces``: the
    :func:`cut_pieces` of ``labels`` where the caller has them, ``measured`` their :func:`measured_pieces`
    (neither depends on the jaw). ``mend_dropped``: surface the cut left as gingiva where the review checks
    would report a dropped or lost tooth is numbered again as one more instance (:mod:`.dropped_teeth`;
    ``numbering.mended`` names what it added). ``merge_packed``: two neighbouring teeth that the ``split`` or
    ``packed`` check reports are merged into one instance and the arch numbered again (:mod:`.cut_teeth`;
    ``numbering.merged`` names the pairs); ``merge_area_limit`` > 0: only pairs of at most that many times a
    crown's typical area (:func:`.cut_teeth.cut_pairs`). ``mend_unnumbered`` > 0: each numbering numbers a
    piece it left as gingiva that the ``unnumbered`` check reports, where that keeps every other piece's number
    and costs at most that many nats (:func:`number_unnumbered`), with a number only where the piece is at least
    ``mend_unnumbered_width`` x that number's typical width (``priors.width_mean``; 0: any width) and area at
    least ``mend_unnumbered_area`` x its median crown area (:data:`.cut_teeth.CROWN_AREA_MM2`, with ``areas``; 0:
    any area); ``mend_unnumbered_touching``: a piece touching a numbered neighbour skips no number."""
    if jaw not in ("upper", "lower"):
        raise ValueError(f"number_teeth: jaw must be 'upper' or 'lower', got {jaw!r}")
    priors = priors or default_priors(jaw)
    labels = np.asarray(labels).copy()
    if pieces is None:
        pieces = cut_pieces(labels, aligned, faces, min_vertices)
    classes = index_classes(num_classes, jaw)
    measured = measured or measured_pieces(pieces, aligned, probs, areas)

    whole_keys: set[int] = set()  # pieces merged from two (cut_teeth): one tooth, never two
    least_area = None
    if mend_unnumbered > 0 and mend_unnumbered_area > 0:
        from .cut_teeth import CROWN_AREA_MM2

        if areas is None:
            from ..data.mesh import vertex_areas

            areas = vertex_areas(aligned, faces)  # no faces: no area, and no piece is a crown
        least_area = mend_unnumbered_area * per_index(CROWN_AREA_MM2[jaw])

    def renumber(forced: dict[int, int] | None) -> Numbering:
        instances, mean_probs = measured
        single = {i for i, inst in enumerate(instances) if inst.key in whole_keys}

        def numbered(more: dict[int, int] | None) -> Numbering:
            return number_instances(instances, mean_probs[:, classes], mean_probs[:, 0], priors, temperature,
                                    {**(forced or {}), **(more or {})} or None, single)

        numbering = numbered(None)
        if mend_unnumbered > 0:
            numbering = number_unnumbered(numbering, lambda i, a: numbered({i: a}), probs, jaw, mend_unnumbered,
                                          mend_unnumbered_width * np.asarray(priors.width_mean, dtype=float),
                                          least_area, areas, mend_unnumbered_touching)
        return numbering

    def to_labels(numbering: Numbering) -> np.ndarray:
        return numbered_labels(labels, numbering, classes, priors)

    numbering = renumber(None)
    out = to_labels(numbering)
    if mend_dropped:
        from .confidence import ReviewRules
        from .dropped_teeth import dropped_regions

        regions = dropped_regions(numbering, out, probs, aligned, faces, priors, ReviewRules(), min_vertices)
        if regions:
            unmended = measured
            measured = measured_pieces(list(pieces) + regions, aligned, probs, areas)
            mended = renumber(None)
            added = [opt for inst, opt in zip(mended.instances, mended.options)
                     if inst.key >= len(pieces) and opt is not None]
            if added:
                mended.mended = sorted(set(mended.mended) | {a for opt in added for a in range(opt[0], opt[1] + 1)})
                mended.cut_log_z = numbering.log_z
                numbering, out = mended, to_labels(mended)
            else:  # every region called gingiva: the arch as it was
                measured = unmended
    if merge_packed:
        from .confidence import ReviewRules
        from .cut_teeth import cut_pairs, merged_pieces

        crown_areas = areas
        if merge_area_limit > 0 and crown_areas is None:
            from ..data.mesh import vertex_areas

            crown_areas = vertex_areas(aligned, faces)
        pairs = cut_pairs(numbering, priors, ReviewRules(), crown_areas, jaw, merge_area_limit)
        if pairs:
            before = numbering
            merged, whole_keys = merged_pieces(before.instances, pairs)
            measured = measured_pieces(merged, aligned, probs, areas)
            numbering = renumber(None)
            numbering.merged = [(before.options[i][0], before.options[j][0]) for i, j in pairs]
            numbering.mended = sorted(set(before.mended) | set(numbering.mended))
            numbering.cut_log_z = before.cut_log_z
            out = to_labels(numbering)
    if dentition is not None:
        from .dentition import read_dentition

        numbering, out = read_dentition(numbering, out, renumber, to_labels, aligned, jaw, num_classes, dentition)
    return out, numbering


def number_unnumbered(numbering: Numbering, forced: Any, probs: np.ndarray, jaw: str, bound: float,
                      least_width: np.ndarray | None = None, least_area: np.ndarray | None = None,
                      areas: np.ndarray | None = None, touching: bool = False) -> Numbering:
    """``numbering`` with each piece it left as gingiva that the ``unnumbered`` review check reports
    (:func:`~.review_checks.looks_unnumbered`) numbered, one after the other along the arch, where that is
    cheap: each number free between the numbered teeth beside it is tried (``forced(i, a)``: the arch numbered
    with instance ``i`` held to arch index ``a``); the cheapest that keeps every other instance's option and
    costs at most ``bound`` nats more is kept; ``least_width`` (per arch index, mm): a number is tried only where
    the piece is at least that wide (None: any); ``least_area`` (per arch index, mm², with the vertex ``areas``):
    only where its area reaches that (None: any); ``touching``: a piece that touches a numbered neighbour (nearest
    vertices within ``ReviewRules.split_gap_mm``) takes only the number next to that neighbour's, as no space is
    left there for a number between them. A tooth numbered so is in ``mended``; its posterior rows stay
    the unforced numbering's (its confidence: its number's share of the tooth mass there), and so do
    ``log_z`` and ``cut_log_z`` (the jaw call compares those)."""
    from .confidence import ReviewRules
    from .review_checks import looks_unnumbered

    rules = ReviewRules()
    for i, inst in enumerate(numbering.instances):  # sorted along the arch
        if numbering.options[i] is not None or looks_unnumbered(inst, probs, jaw, rules) is None:
            continue
        before = [j for j in range(i) if numbering.options[j] is not None]
        after = [j for j in range(i + 1, len(numbering.options)) if numbering.options[j] is not None]
        lo = numbering.options[before[-1]][1] + 1 if before else 0
        hi = numbering.options[after[0]][0] - 1 if after else NUM_ARCH_INDICES - 1
        numbers = list(range(lo, hi + 1))
        if touching and before and gap_mm(numbering.instances[before[-1]], inst) <= rules.split_gap_mm:
            numbers = [a for a in numbers if a == lo]
        if touching and after and gap_mm(inst, numbering.instances[after[0]]) <= rules.split_gap_mm:
            numbers = [a for a in numbers if a == hi]
        area = float(np.asarray(areas)[inst.vertices].sum()) if least_area is not None else 0.0
        best = None
        for a in numbers:
            if least_width is not None and inst.width < least_width[a]:
                continue
            if least_area is not None and area < least_area[a]:
                continue
            trial = forced(i, a)
            moved = any(o != p for j, (o, p) in enumerate(zip(trial.options, numbering.options)) if j != i)
            if not moved and trial.cost - numbering.cost <= bound and (best is None or trial.cost < best.cost):
                best = trial
        if best is None:
            continue
        for rows in ("posterior", "first_posterior", "last_posterior"):
            getattr(best, rows)[i] = getattr(numbering, rows)[i]
        best.log_z, best.cut_log_z = numbering.log_z, numbering.cut_log_z
        best.mended = sorted(set(numbering.mended) | {best.options[i][0]})
        best.dentition, best.merged = numbering.dentition, numbering.merged
        numbering = best
    return numbering


def cut_pieces(labels: np.ndarray, aligned: np.ndarray, faces: np.ndarray, min_vertices: int = 20,
               edges: np.ndarray | None = None) -> list[np.ndarray]:
    """The tooth instances :func:`number_teeth` numbers: the connected pieces of each tooth class of
    ``labels``, fragments under ``min_vertices`` merged into a neighbour (vertex ids per piece). ``edges``: the
    mesh's :func:`~pointmamba.data.mesh.mesh_edges` where the caller has them (None: made here)."""
    from ..data.mesh import mesh_edges

    edges = mesh_edges(faces) if edges is None else edges
    return merge_fragments(tooth_pieces(labels, edges), edges, labels, aligned, min_vertices)


def numbered_labels(labels: np.ndarray, numbering: Numbering, classes: np.ndarray, priors: ArchPriors) -> np.ndarray:
    """``labels`` (per-vertex classes) with every instance of ``numbering`` given its number (``classes``:
    the class of each arch index): gingiva, one tooth, or two teeth split along the arch where their
    typical widths meet."""
    labels = np.asarray(labels).copy()
    for inst, opt in zip(numbering.instances, numbering.options):
        if opt is None:
            labels[inst.vertices] = 0
    # numbered after every gingiva instance: a region the dropped-tooth mend added can hold a cut piece left as
    # gingiva (IOS035_upper), and the piece must not write gingiva over the region's number
    for inst, opt in zip(numbering.instances, numbering.options):
        if opt is None:
            continue
        if opt[0] == opt[1]:
            labels[inst.vertices] = classes[opt[0]]
        else:
            mu = priors.width_mean[opt[0]:opt[1] + 1]
            along = inst.along()  # the tangent points from the -x end towards the +x end
            cut = np.quantile(along, mu[0] / mu.sum())
            labels[inst.vertices] = np.where(along <= cut, classes[opt[0]], classes[opt[1]])
    return labels


def numbered_instances(numbering: Numbering, labels: np.ndarray, num_classes: int, jaw: str
                       ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Per-vertex tooth instances (0 gingiva, 1..k in arch order; an instance split into two teeth
    gives two) and each one's posterior over the ``num_classes`` classes, from :func:`number_teeth`'s
    result and final ``labels``."""
    classes = index_classes(num_classes, jaw)
    instances = np.zeros(len(labels), dtype=np.int64)
    probs: dict[int, np.ndarray] = {}

    def row(post: np.ndarray) -> np.ndarray:
        out = np.zeros(num_classes)
        out[0] = post[0]
        out[classes] = post[1:]
        return out

    for i, (inst, opt) in enumerate(zip(numbering.instances, numbering.options)):
        if opt is None:
            continue
        for a in range(opt[0], opt[1] + 1):
            mine = inst.vertices[labels[inst.vertices] == classes[a]]
            if not len(mine):
                continue
            # a split pair's halves: each its own number's probability (the pair's posterior holds both
            # numbers at once, which made each half look 50/50 between itself and its neighbour)
            post = numbering.posterior[i] if opt[0] == opt[1] else (
                numbering.first_posterior[i] if a == opt[0] else numbering.last_posterior[i])
            instances[mine] = len(probs) + 1
            probs[len(probs) + 1] = row(post)
    return instances, probs
