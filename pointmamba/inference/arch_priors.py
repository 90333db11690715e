"""Priors of the instance-level tooth numbering (:mod:`.tooth_numbering`): tooth widths, how often each
position is missing, and the spacing of neighbouring teeth, per jaw.

They are measured on the ground truth of labelled scans with the functions inference uses
(:func:`fit_priors`; ``python -m pointmamba.research.fit_arch_priors`` prints the table below). ``FITTED`` holds the
figures measured on the training scans of ``../shared/data`` (both sources, the val patients of both
splits left out; position-labelled arches only where complete). Positions are 1..8 (central incisor ..
third molar), pooled over the two sides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

import numpy as np

from ..data.arch import NUM_ARCH_INDICES, gap_mm, index_of_fdi, labelled_teeth, per_index, position_of_index

# measured by python -m pointmamba.research.fit_arch_priors (see module doc); widths and gaps in mm
FITTED: dict[str, dict[str, Any]] = {
    "upper": {"width_mean": [7.92, 6.5, 7.09, 6.63, 6.29, 9.47, 8.68, 6.69],
              "width_sd": [0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8],
              "missing_rate": [0.007, 0.007, 0.007, 0.022, 0.015, 0.007, 0.075, 0.903], "arches": 67},
    "lower": {"width_mean": [5.05, 5.6, 6.3, 6.67, 6.7, 10.01, 9.26, 7.27],
              "width_sd": [0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 1.51],
              "missing_rate": [0.0, 0.0, 0.048, 0.016, 0.016, 0.016, 0.048, 0.895], "arches": 62},
    "gap": {"touching_mean": 0.26, "touching_sd": 0.5, "closed_fraction": 0.74, "open_ratio": 0.65,
            "open_sd": 1.71, "neighbour_pairs": 1647, "pairs_across_gaps": 19},
}

# Points of each class of a 17-class network (0 gingiva, 1..16 the classes of the arch indices, both jaws pooled
# as the network pools them) among the grid-sampled training points, counted as `train.class_balance` counts
# them (pointmamba.training.loss.class_counts): the 131 training scans of ../shared/data, the val patients of both
# splits left out. A network trained on them has their frequencies in its probabilities (class_prior_scale;
# `python -m pointmamba.research.fit_arch_priors` prints them as class_points)
FITTED_CLASS_POINTS = [549697, 27947, 24305, 26842, 32019, 31926, 53177, 41197, 2196,
                       28019, 24194, 27310, 32315, 32159, 53431, 41323, 3303]

# A child's arch with primary molars (the dentition given as mixed; child_priors): position 5's width per jaw
# and the share of sides missing positions 7 and 8, measured by `python -m pointmamba.research.fit_arch_priors
# --mixed` on the 4 such 3D-IOSSeg arches outside both splits' val patients (IOS051_upper, IOS069_lower,
# IOS072_upper, IOS072_lower: 8 sides, one second molar)
FITTED_MIXED: dict[str, Any] = {
    "upper": {"width_mean_5": 9.16, "arches": 2},
    "lower": {"width_mean_5": 9.67, "arches": 2},
    "missing_rate": {7: 0.875, 8: 1.0},
}

# nats: prior against one instance holding two touching teeth (odds e^-1). Chosen on split A val among 3, 1.5,
# 1 and 0.5 (docs/results/numbering): merged neighbours are common where the graph cut meets a tight contact
PAIR_COST = 1.0
# the network's mean probability over a tooth sums hundreds of vertices' evidence: it counts this many
# times a prior term (a single guess would count once)
EVIDENCE_WEIGHT = 2.0
MIN_MISSING_RATE = 0.05  # the training arches are mostly complete; a clinic's are not
LOG_EPS = 1e-6  # floor of a probability under a log
ROBUST_NU = 3.0  # degrees of freedom of the Student-t width and spacing densities
MIN_GAP_SD = 1.0  # mm: predicted teeth's edges are less exact than the ground truth's the spacing was fitted on
# An instance called gingiva is a false positive, and false positives are small fragments: up to
# FRAGMENT_WIDTH mm wide it costs nothing more than its gingiva evidence, each mm beyond costs FRAGMENT_COST
# nats. Without it a whole molar the network calls tooth at 90 % was dropped to gingiva more cheaply than
# numbered (third-molar arches, two teeth merged by the graph cut). Measured on split A val with two
# networks (docs/results/numbering/README.md): 2-4 mm and 0.5-0.67 nats/mm alike; an exponential density
# of the width instead also taxed 2 mm slivers and did less well.
FRAGMENT_WIDTH = 3.0
FRAGMENT_COST = 0.5


@dataclass
class ArchPriors:
    """Per arch index 0..15 (see :mod:`pointmamba.data.arch`): width mean and sd, the cost
    (nats) of a position being missing or present; the spacing model; the pair prior."""

    width_mean: np.ndarray
    width_sd: np.ndarray
    missing_cost: np.ndarray
    present_cost: np.ndarray
    touching_mean: float
    touching_sd: float
    closed_fraction: float
    open_ratio: float
    open_sd: float
    pair_cost: float = PAIR_COST
    evidence_weight: float = EVIDENCE_WEIGHT
    fragment_cost: float = FRAGMENT_COST
    touching_nu: float = ROBUST_NU  # degrees of freedom of the touching (and closed-space) spacing density
    # (16,) per arch index: the network's evidence for that number is multiplied by this before its log
    # (class_prior_scale: the training frequency of the class taken out); None: the evidence as it is
    evidence_scale: np.ndarray | None = None

    def gingiva_cost(self, gum_evidence: np.ndarray, width: np.ndarray) -> np.ndarray:
        """Nats of calling instances gingiva: the network's evidence (their mean probability of gingiva),
        plus ``fragment_cost`` per mm of width beyond FRAGMENT_WIDTH (0: the evidence alone)."""
        cost = -self.evidence_weight * np.log(np.maximum(np.asarray(gum_evidence, dtype=np.float64), LOG_EPS))
        return cost + self.fragment_cost * np.maximum(np.asarray(width, dtype=np.float64) - FRAGMENT_WIDTH, 0.0)

    def gap_cost(self, gap: float, touching: np.ndarray, skipped_width: np.ndarray) -> np.ndarray:
        """``-log`` density of the spacing ``gap`` (mm) between two teeth: neighbours (``touching``)
        touch; across missing positions of total typical width ``skipped_width`` the space is either
        closed or about ``open_ratio`` of it. Student-t densities: a predicted tooth's edge can be off
        by millimetres, which must cost a few nats, not tens; ``touching_nu`` sets how heavy the touching
        density's tail is (a space a tooth wide read as two touching teeth)."""
        closed = -robust_cost(gap, self.touching_mean, self.touching_sd, self.touching_nu)
        opened = -robust_cost(gap, self.touching_mean + self.open_ratio * skipped_width, self.open_sd)
        skipped = np.logaddexp(np.log(self.closed_fraction) + closed, np.log1p(-self.closed_fraction) + opened)
        return -np.where(touching, closed, skipped)

    def width_cost(self, width: np.ndarray, first: int, last: int) -> np.ndarray:
        """``-log`` density of a measured width for the teeth at arch indices ``first..last``."""
        mu = self.width_mean[first:last + 1].sum()
        sd = float(np.sqrt((self.width_sd[first:last + 1] ** 2).sum()))
        return robust_cost(width, mu, sd)


def robust_cost(x: float | np.ndarray, mu: float | np.ndarray, sd: float, nu: float = ROBUST_NU) -> np.ndarray:
    """``-log`` of a Student-t density with ``nu`` degrees of freedom, location ``mu`` and scale ``sd``:
    Gaussian near ``mu``, growing only logarithmically far from it."""
    z2 = ((np.asarray(x, dtype=np.float64) - mu) / sd) ** 2
    norm = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi) - math.log(sd)
    return 0.5 * (nu + 1) * np.log1p(z2 / nu) - norm


def class_prior_scale(jaw: str, power: float, counts: Iterable[float] = FITTED_CLASS_POINTS) -> np.ndarray | None:
    """(16,) per arch index of ``jaw``: ``(share / median share) ** -power`` of its class among the tooth
    classes' training points (``counts``, 17 classes, :data:`FITTED_CLASS_POINTS`), the ratio clipped to
    [1/16, 16] as the training's class weights clip it; None where ``power`` is 0.

    A network's probability of a class holds how often the class was seen in training: rare third molars
    read as the molar in front. The numbering adds its own prior of each position being present
    (``present_cost``), so without this a rare class is counted rare twice. A network trained with
    ``train.class_balance`` b has learned ``share ** (1 - b)`` (its loss weighs a class ``share ** -b``):
    ``power`` = 1 - b takes that out."""
    if not power:
        return None
    from ..data.arch import index_classes

    teeth = np.asarray(list(counts), dtype=np.float64)[1:]
    if len(teeth) != NUM_ARCH_INDICES or (teeth <= 0).any():  # a 17-class network: one tooth class an arch index
        raise ValueError(f"class_prior_scale: expected {NUM_ARCH_INDICES} positive tooth-class counts, got {teeth.tolist()}")
    ratio = np.clip(teeth / np.median(teeth), 1 / 16, 16)
    return ratio[index_classes(NUM_ARCH_INDICES + 1, jaw) - 1] ** -float(power)


def presence_costs(missing_rate: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``-log P(missing)``, ``-log P(present)``) of positions missing at ``missing_rate``, floored at
    MIN_MISSING_RATE and capped at 0.99 (no position is ever certain either way)."""
    q = np.clip(np.asarray(missing_rate, dtype=np.float64), MIN_MISSING_RATE, 0.99)
    return -np.log(q), -np.log1p(-q)


def priors_from(table: dict[str, Any], jaw: str) -> ArchPriors:
    """:class:`ArchPriors` of ``jaw`` from a table shaped like :data:`FITTED`."""
    t, g = table[jaw], table["gap"]
    missing, present = presence_costs(per_index(t["missing_rate"]))
    return ArchPriors(per_index(t["width_mean"]), per_index(t["width_sd"]), missing, present,
                      float(g["touching_mean"]), max(float(g["touching_sd"]), MIN_GAP_SD),
                      float(g["closed_fraction"]), float(g["open_ratio"]), max(float(g["open_sd"]), MIN_GAP_SD))


def default_priors(jaw: str) -> ArchPriors:
    """The fitted priors of ``jaw`` ("upper" or "lower")."""
    return priors_from(FITTED, jaw)


def child_priors(priors: ArchPriors, jaw: str, table: dict[str, Any] | None = None) -> ArchPriors:
    """``priors`` for a child's arch with primary molars (the dentition given as ``mixed``): position 5 is a
    primary second molar, molar-wide (``table[jaw]["width_mean_5"]``), and second and third molars are
    mostly unerupted (``table["missing_rate"]`` of positions 7 and 8, pooled over the jaws;
    :func:`presence_costs`). ``table``: :data:`FITTED_MIXED` by default."""
    t = table or FITTED_MIXED
    width = priors.width_mean.copy()
    width[[index_of_fdi(10 * q + 5) for q in (1, 2)]] = float(t[jaw]["width_mean_5"])  # both sides
    missing, present = priors.missing_cost.copy(), priors.present_cost.copy()
    for position, rate in t["missing_rate"].items():
        for a in (index_of_fdi(10 * quadrant + int(position)) for quadrant in (1, 2)):
            missing[a], present[a] = presence_costs(rate)
    return replace(priors, width_mean=width, missing_cost=missing, present_cost=present)


def fit_child_priors(arches: Iterable[tuple[np.ndarray, np.ndarray, str]]) -> dict[str, Any]:
    """A :data:`FITTED_MIXED`-shaped table from ground-truth arches of children with primary molars:
    position 5's median width per jaw and the share of sides missing positions 7 and 8, pooled over the
    jaws (a handful of arches: per jaw would be two or three)."""
    table = fit_priors(arches)
    counts = {jaw: table[jaw]["arches"] for jaw in ("upper", "lower")}
    total = max(sum(counts.values()), 1)
    return {**{jaw: {"width_mean_5": table[jaw]["width_mean"][4], "arches": counts[jaw]} for jaw in counts},
            "missing_rate": {p: round(sum(table[j]["missing_rate"][p - 1] * counts[j] for j in counts) / total, 3)
                             for p in (7, 8)}}


def fit_priors(arches: Iterable[tuple[np.ndarray, np.ndarray, str]]) -> dict[str, Any]:
    """A :data:`FITTED`-shaped table from ground-truth arches ``(aligned vertices, FDI labels, jaw)``.

    Widths: median and MAD-based sd per position (sd floored at 0.8 mm: predicted teeth are measured less exactly than true ones); missing rate per position; spacing of
    neighbouring teeth (mean, sd); across missing positions, the share of closed spaces (gap below half
    the missing width) and, of the open ones, gap / missing width and the spread around it."""
    widths: dict[str, list[list[float]]] = {j: [[] for _ in range(8)] for j in ("upper", "lower")}
    present: dict[str, np.ndarray] = {j: np.zeros(8) for j in ("upper", "lower")}
    count = {"upper": 0, "lower": 0}
    touching, across = [], []
    for aligned, labels, jaw in arches:
        teeth, _ = labelled_teeth(aligned, labels)
        if not teeth:
            continue
        by_index = {index_of_fdi(fdi): inst for fdi, inst in teeth.items()}
        count[jaw] += 1
        for a, inst in by_index.items():
            pos = position_of_index(a)
            widths[jaw][pos - 1].append(inst.width)
            present[jaw][pos - 1] += 0.5
        ordered = sorted(by_index)
        for a, b in zip(ordered, ordered[1:]):
            g = gap_mm(by_index[a], by_index[b])
            if b == a + 1:
                touching.append(g)
            else:
                across.append((g, jaw, list(range(a + 1, b))))
    table: dict[str, Any] = {}
    for jaw in ("upper", "lower"):
        # median and MAD: a few mislabelled or broken teeth must not widen the prior
        mean = [float(np.median(w)) if w else np.nan for w in widths[jaw]]
        sd = [float(max(1.4826 * np.median(np.abs(np.asarray(w) - np.median(w))), 0.8)) if len(w) > 1 else 1.0
              for w in widths[jaw]]
        rate = [float(1 - present[jaw][p] / max(count[jaw], 1)) for p in range(8)]
        table[jaw] = {"width_mean": [round(m, 2) for m in mean], "width_sd": [round(s, 2) for s in sd],
                      "missing_rate": [round(r, 3) for r in rate], "arches": count[jaw]}
    t = np.asarray(touching)
    t_mean, t_sd = float(np.median(t)), float(1.4826 * np.median(np.abs(t - np.median(t))))
    closed, ratios = 0, []
    for g, jaw, skipped in across:
        positions = [position_of_index(a) for a in skipped]
        missing_width = sum(table[jaw]["width_mean"][p - 1] for p in positions)
        if g - t_mean < 0.5 * missing_width:
            closed += 1
        else:
            ratios.append((g - t_mean) / missing_width)
    table["gap"] = {"touching_mean": round(t_mean, 2), "touching_sd": round(max(t_sd, 0.5), 2),
                    "closed_fraction": round(min(max(closed / max(len(across), 1), 0.05), 0.95), 2),
                    "open_ratio": round(float(np.median(ratios)) if ratios else 0.7, 2),
                    "open_sd": round(float(max(np.std(ratios) * 7.0, 1.5)) if len(ratios) > 1 else 2.5, 2),
                    "neighbour_pairs": len(touching), "pairs_across_gaps": len(across)}
    return table
