"""Instance-level tooth numbering: the DP is exact and its posteriors are the model's (brute force in
float64), and on real arches: correct teeth stay correct, a removed tooth leaves the others' numbers,
two teeth under one label are split, a wide ambiguous run is numbered by width, slivers are absorbed."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import apply_transform
from pointmamba.inference.arch_priors import FRAGMENT_WIDTH, default_priors
from pointmamba.data.arch import GAP_QUERY_POINTS, Instance, gap_mm, index_classes, measure_instances
from pointmamba.inference.tooth_numbering import number_instances, number_teeth

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
OPTIONS = [None] + [(a, a) for a in range(16)] + [(a, a + 1) for a in range(15)]


def _path_cost(instances, evidence, gum, priors, options) -> float:
    """The energy of one numbering, written out term by term (the DP's reference)."""
    if priors.evidence_scale is not None:  # each number's evidence scaled before its log
        evidence = evidence * priors.evidence_scale[None, :]
    cost, prev, last = 0.0, None, -1
    for i, opt in enumerate(options):
        if opt is None:  # gingiva: its evidence, and its width beyond a fragment's
            cost -= priors.evidence_weight * np.log(max(gum[i], 1e-6))
            cost += priors.fragment_cost * max(instances[i].width - FRAGMENT_WIDTH, 0.0)
            continue
        f, l_ = opt
        if f <= last:
            return np.inf
        cost += (-priors.evidence_weight * np.log(max(evidence[i, f:l_ + 1].sum(), 1e-6)) + float(priors.width_cost(np.array(instances[i].width), f, l_))
                 + priors.present_cost[f:l_ + 1].sum() + (priors.pair_cost if l_ > f else 0.0) + priors.missing_cost[last + 1:f].sum())
        if prev is not None:
            cost += float(priors.gap_cost(gap_mm(instances[prev], instances[i]), np.array(f == last + 1),
                                          np.array(priors.width_mean[last + 1:f].sum())))
        prev, last = i, l_
    return cost + priors.missing_cost[last + 1:].sum()


def _random_arch(rng: np.random.Generator, n: int) -> list[Instance]:
    out, x = [], -40.0
    for k in range(n):
        w = rng.uniform(4, 13)
        pts = np.stack([np.linspace(x, x + w, 20), np.zeros(20), np.zeros(20)], 1)
        out.append(Instance(np.arange(20) + 20 * k, pts, float(x), k, np.array([1.0, 0.0]), float(w * 0.9)))
        x += w + rng.uniform(-0.5, 8)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_dp_is_exact_and_posteriors_are_the_models(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 2 if seed < 4 else 3
    instances = _random_arch(rng, n)
    gum = rng.uniform(0.02, 0.6, n)
    evidence = rng.dirichlet(np.full(16, 0.3), n) * (1 - gum[:, None])
    priors = default_priors("lower" if seed % 2 else "upper")
    temperature = 1.7
    result = number_instances(instances, evidence, gum, priors, temperature)
    costs = {opts: _path_cost(instances, evidence, gum, priors, opts) for opts in itertools.product(OPTIONS, repeat=n)}
    best = min(costs, key=costs.get)
    assert result.cost == pytest.approx(costs[best], abs=1e-9)
    assert _path_cost(instances, evidence, gum, priors, result.options) == pytest.approx(costs[best], abs=1e-9)
    # posteriors: exp(-cost / T) over every numbering, summed per instance and class (float64 enumeration)
    finite = {k: v for k, v in costs.items() if np.isfinite(v)}
    weights = np.exp(-(np.array(list(finite.values())) - min(finite.values())) / temperature)
    weights /= weights.sum()
    expected = np.zeros((n, 17))
    first, last = expected.copy(), expected.copy()
    for w, opts in zip(weights, finite):
        for i, opt in enumerate(opts):
            if opt is None:
                for e in (expected, first, last):
                    e[i, 0] += w
            else:
                expected[i, 1 + opt[0]:2 + opt[1]] += w
                first[i, 1 + opt[0]] += w
                last[i, 1 + opt[1]] += w
    np.testing.assert_allclose(result.posterior, expected, atol=1e-9)
    np.testing.assert_allclose(result.first_posterior, first, atol=1e-9)
    np.testing.assert_allclose(result.last_posterior, last, atol=1e-9)
    # the partition function: log of the sum of exp(-cost / T) over every numbering
    c = np.array(list(finite.values()))
    assert result.log_z == pytest.approx(-c.min() / temperature + np.log(np.exp(-(c - c.min()) / temperature).sum()),
                                         abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_dp_is_exact_with_an_evidence_scale(seed: int) -> None:
    """``evidence_scale`` (the class-prior correction): the optimum and log Z are those of the brute-force
    energy with each number's evidence scaled before its log, and differ from the unscaled ones."""
    from dataclasses import replace

    rng = np.random.default_rng(200 + seed)
    n = 3
    instances = _random_arch(rng, n)
    gum = rng.uniform(0.02, 0.6, n)
    evidence = rng.dirichlet(np.full(16, 0.3), n) * (1 - gum[:, None])
    priors = replace(default_priors("lower"), evidence_scale=rng.uniform(0.3, 4.0, 16))
    result = number_instances(instances, evidence, gum, priors, 1.0)
    costs = {opts: _path_cost(instances, evidence, gum, priors, opts) for opts in itertools.product(OPTIONS, repeat=n)}
    assert result.cost == pytest.approx(min(costs.values()), abs=1e-9)
    c = np.array([v for v in costs.values() if np.isfinite(v)])
    assert result.log_z == pytest.approx(-c.min() + np.log(np.exp(-(c - c.min())).sum()), abs=1e-9)
    plain = number_instances(instances, evidence, gum, replace(priors, evidence_scale=None), 1.0)
    assert abs(plain.log_z - result.log_z) > 1e-3


def test_class_prior_scale_takes_out_the_training_frequency() -> None:
    """``class_prior_scale``: (share / median share) ** -power per arch index, through the jaw's classes;
    the ratio clipped to [1/16, 16]; None at power 0; a clear error for counts of the wrong length."""
    from pointmamba.inference.arch_priors import class_prior_scale

    counts = [1000] + [100] * 16
    counts[8] = 25  # class 8: the upper right third molar (18) and the lower right one (48), a quarter of the median
    counts[16] = 1  # 1/100 of the median: clipped to 1/16
    for jaw in ("upper", "lower"):
        scale = class_prior_scale(jaw, 0.5, counts)
        classes = index_classes(17, jaw)
        expected = np.ones(16)
        expected[classes == 8] = 2.0
        expected[classes == 16] = 4.0
        np.testing.assert_allclose(scale, expected)
    assert class_prior_scale("upper", 0.0, counts) is None
    np.testing.assert_allclose(class_prior_scale("upper", 1.0, counts)[index_classes(17, "upper") == 8], 4.0)
    with pytest.raises(ValueError, match="16 positive tooth-class counts"):
        class_prior_scale("upper", 0.5, counts[:-1])


def test_class_prior_numbers_a_third_molar_the_network_reads_as_the_molar_in_front() -> None:
    """A left upper side 21-27 numbered right, then a 7 mm piece behind 27 that the network reads as a tooth
    (gingiva 0.16) but mostly as "27" (0.55; "28" 0.26), as a recipe network trained on few third molars
    reads one: without the correction it is called gingiva, the third molar counted rare twice (its
    evidence and its presence prior); with the recipe's (``class_prior_scale`` 0.5) it is numbered 28."""
    from dataclasses import replace

    from pointmamba.inference.arch_priors import class_prior_scale

    priors = default_priors("upper")
    classes = index_classes(17, "upper")
    left = [int(np.flatnonzero(classes == c)[0]) for c in fdi_to_class(np.arange(21, 29), "upper", 17)]
    widths = list(priors.width_mean[left[:7]]) + [6.9]
    instances, x = [], 0.0
    for k, w in enumerate(widths):
        pts = np.stack([np.linspace(x, x + w, 20), np.zeros(20), np.zeros(20)], 1)
        instances.append(Instance(np.arange(20) + 20 * k, pts, float(x), k, np.array([1.0, 0.0]), float(w)))
        x += w + 0.26
    gum = np.array([0.05] * 7 + [0.16])
    evidence = np.full((8, 16), 0.01)
    for k in range(7):
        evidence[k, left[k]] = 0.8
    evidence[7, left[6]], evidence[7, left[7]] = 0.55, 0.26
    plain = number_instances(instances, evidence, gum, priors)
    corrected = number_instances(instances, evidence, gum, replace(priors, evidence_scale=class_prior_scale("upper", 0.5)))
    assert plain.options[:7] == corrected.options[:7] == [(a, a) for a in left[:7]]
    assert plain.options[7] is None
    assert corrected.options[7] == (left[7], left[7])


@pytest.mark.parametrize("seed", range(3))
def test_forced_instance_is_the_cheapest_numbering_that_keeps_it(seed: int) -> None:
    """``forced``: the optimum and log Z are those of the numberings in which the forced instance takes its
    number, every other numbering paying FORCED_COST once."""
    from pointmamba.inference.tooth_numbering import FORCED_COST

    rng = np.random.default_rng(100 + seed)
    n = 3
    instances = _random_arch(rng, n)
    gum = rng.uniform(0.02, 0.6, n)
    evidence = rng.dirichlet(np.full(16, 0.3), n) * (1 - gum[:, None])
    priors = default_priors("upper")
    i, a = int(rng.integers(n)), int(rng.integers(16))
    result = number_instances(instances, evidence, gum, priors, 1.3, {i: a})
    costs = {opts: _path_cost(instances, evidence, gum, priors, opts) + (0.0 if opts[i] == (a, a) else FORCED_COST)
             for opts in itertools.product(OPTIONS, repeat=n)}
    best = min(costs, key=costs.get)
    assert result.options[i] == (a, a) and result.cost == pytest.approx(costs[best], abs=1e-6)
    c = np.array([v for v in costs.values() if np.isfinite(v)])
    assert result.log_z == pytest.approx(-c.min() / 1.3 + np.log(np.exp(-(c - c.min()) / 1.3).sum()), abs=1e-6)


def _arch(name: str):
    scan = load_scan(SAMPLES / name.split("_")[0] / f"{name}.obj")
    arrays = preprocess_scan(scan)
    aligned = apply_transform(scan.vertices.astype(np.float64), arrays["transform"])
    return scan, aligned, fdi_to_class(scan.labels, scan.jaw, 17)


def _probs(classes: np.ndarray, p: float = 0.8) -> np.ndarray:
    probs = np.full((len(classes), 17), (1 - p) / 16)
    probs[np.arange(len(classes)), classes] = p
    return probs


def _numbers(truth: np.ndarray, labels: np.ndarray) -> dict[int, int]:
    """The number each true tooth carries: the most common label on its vertices."""
    return {int(t): int(np.bincount(labels[truth == t], minlength=17).argmax()) for t in np.unique(truth) if t > 0}


def _without(scan, aligned, classes, drop: np.ndarray):
    """The mesh with the ``drop`` vertices (and their faces) removed, as a tool would cut a tooth out."""
    keep = ~drop
    new_id = np.cumsum(keep) - 1
    faces = scan.faces[keep[scan.faces].all(1)]
    return aligned[keep], new_id[faces], classes[keep]


@pytest.mark.parametrize("name", ["MSN021_lower", "MSN022_upper", "MSN023_lower"])
def test_correct_teeth_stay_correct(name: str) -> None:
    scan, aligned, classes = _arch(name)
    labels, numbering = number_teeth(classes, _probs(classes), aligned, scan.faces, scan.jaw, 17)
    assert _numbers(classes, labels) == _numbers(classes, classes)
    assert (labels == classes).mean() > 0.999  # a stray labelled vertex far from its tooth may become gingiva
    teeth = [o for o in numbering.options if o is not None]
    assert len(teeth) == len(np.unique(classes)) - 1 and all(f == l_ for f, l_ in teeth)


@pytest.mark.parametrize("name", ["MSN021_lower", "MSN022_upper"])
def test_a_removed_tooth_leaves_the_others_numbers(name: str) -> None:
    scan, aligned, classes = _arch(name)
    for tooth in [c for c in np.unique(classes) if c > 0]:
        v, f, c = _without(scan, aligned, classes, classes == tooth)
        # the network still says what each remaining tooth is, but no longer sees the removed one
        labels, _ = number_teeth(c, _probs(c, 0.6), v, f, scan.jaw, 17)
        assert _numbers(c, labels) == _numbers(c, c), f"{name}: removing class {tooth} renumbered others"


def test_two_teeth_under_one_label_are_split() -> None:
    scan, aligned, classes = _arch("MSN022_upper")
    merged = np.where(classes == 5, 4, classes)  # premolars 14 and 15 both called 14 (as a counting net does)
    probs = _probs(merged, 0.7)
    labels, numbering = number_teeth(merged, probs, aligned, scan.faces, scan.jaw, 17)
    assert any(o is not None and o[1] == o[0] + 1 for o in numbering.options)
    pair = (classes == 4) | (classes == 5)
    assert (labels[pair] == classes[pair]).mean() > 0.8  # split near the true boundary
    assert _numbers(classes, labels) == _numbers(classes, classes)
    # each half is sure of its own number: the pair's posterior held both numbers, and each half used to
    # come out 50/50 between itself and its neighbour (flagged for review on a correct scan)
    from pointmamba.inference.confidence import scan_confidence
    from pointmamba.inference.tooth_numbering import numbered_instances

    instances, instance_probs = numbered_instances(numbering, labels, 17, scan.jaw)
    conf = scan_confidence(probs, labels, instances, scan.jaw, aligned, instance_probs)
    halves = {t.fdi: t for t in conf.teeth if t.fdi in (14, 15)}
    assert set(halves) == {14, 15}
    assert all(t.confidence > 0.8 for t in halves.values()), halves


def test_width_decides_between_lower_incisor_and_canine() -> None:
    # a lower arch whose network evidence cannot tell 2 from 3 on two neighbouring teeth: the narrower
    # lateral incisor (5.6 mm) and the wider canine (6.3 mm) are told apart by their measured widths
    scan, aligned, classes = _arch("MSN021_lower")
    probs = _probs(classes, 0.8)
    for c in (2, 3, 10, 11):
        ids = classes == c
        pair = (2, 3) if c in (2, 3) else (10, 11)
        probs[ids] = 0.02 / 15
        probs[ids, pair[0]] = probs[ids, pair[1]] = 0.49
    labels, _ = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17)
    assert (labels == classes).mean() > 0.99


def test_slivers_join_their_tooth_and_stray_blobs_become_gingiva() -> None:
    scan, aligned, classes = _arch("MSN023_lower")
    noisy = classes.copy()
    tooth = np.flatnonzero(classes == 6)
    noisy[tooth[:8]] = 7  # a sliver of the neighbour's label on a molar
    gum = np.flatnonzero(classes == 0)
    centre = aligned[gum[len(gum) // 2]]
    blob = gum[np.argsort(np.linalg.norm(aligned[gum] - centre, axis=1))[:25]]
    noisy[blob] = 12  # a patch of gingiva the network half believes is a tooth
    probs = _probs(noisy, 0.8)
    probs[blob] = 0.0
    probs[blob, 0], probs[blob, 12] = 0.4, 0.6
    labels, _ = number_teeth(noisy, probs, aligned, scan.faces, scan.jaw, 17)
    assert (labels[tooth] == 6).all()
    assert (labels[blob] == 0).all()


def test_a_whole_molar_in_doubt_keeps_its_number_a_fragment_does_not() -> None:
    """Calling an instance gingiva costs its width beyond a fragment's too (false positives are small): a
    first molar (10 mm) the network doubts (gingiva 0.5, its own number 0.01) keeps its number; with the
    width term off (the old model) it vanished into the gingiva. A 2 mm fragment with the same evidence goes."""
    from dataclasses import replace

    scan, aligned, classes = _arch("MSN021_lower")
    cls = index_classes(17, scan.jaw)
    present = [c for c in cls if (classes == c).any()]
    instances, _ = measure_instances(aligned, [np.flatnonzero(classes == c) for c in present])
    evidence, gum = np.full((len(instances), 16), 0.1 / 15), np.full(len(instances), 0.1)
    index = {int(c): a for a, c in enumerate(cls)}
    for k, inst in enumerate(instances):
        evidence[k, index[present[inst.key]]] = 0.8
    molar = next(k for k, inst in enumerate(instances) if present[inst.key] == 6)
    evidence[molar] = 0.49 / 15
    evidence[molar, index[6]], gum[molar] = 0.01, 0.5
    assert instances[molar].width > 8.0
    priors = default_priors(scan.jaw)
    assert number_instances(instances, evidence, gum, priors).options[molar] == (index[6], index[6])
    assert number_instances(instances, evidence, gum, replace(priors, fragment_cost=0.0)).options[molar] is None
    instances[molar].width = 2.0
    assert number_instances(instances, evidence, gum, priors).options[molar] is None


def test_widths_are_measured_along_the_arch() -> None:
    scan, aligned, classes = _arch("MSN022_upper")
    cls = index_classes(17, "upper")
    members = [np.flatnonzero(classes == c) for c in cls if (classes == c).any()]
    instances, _ = measure_instances(aligned, members)
    assert [i.key for i in instances] == list(range(len(members)))  # members were given in arch order
    widths = {int(cls[np.flatnonzero(np.isin(cls, np.unique(classes[i.vertices])))[0]]): i.width for i in instances}
    molars = [widths[c] for c in (6, 14) if c in widths]
    incisors = [widths[c] for c in (2, 10) if c in widths]
    assert min(molars) > 8.0 and max(incisors) < 7.5


@pytest.mark.parametrize("offset", [0.0, 0.5, 3.0, 40.0])
def test_gap_is_the_smallest_distance_between_the_queried_points(offset: float) -> None:
    """The bounded KD-tree search finds the brute-force minimum, from touching to far-apart teeth."""
    from scipy.spatial.distance import cdist


    rng = np.random.default_rng(int(offset * 10))
    a = Instance(np.arange(5000), rng.normal(size=(5000, 3)) * [2.0, 3.0, 4.0], 0.0)
    b = Instance(np.arange(9000), rng.normal(size=(9000, 3)) * [2.0, 3.0, 4.0] + [6.0 + offset, 1.0, 0.0], 0.0)
    step = max(1, len(a.points) // GAP_QUERY_POINTS)
    expected = cdist(a.points[::step], b.points).min()
    assert gap_mm(a, b) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert gap_mm(b, a) == gap_mm(a, b)


@pytest.mark.parametrize(("nu", "beyond_5mm"), [(3.0, 0.00890), (5.0, 0.00258), (10.0, 0.00040)])
def test_touching_spacing_is_a_student_t_with_the_tail_the_log_states(nu: float, beyond_5mm: float) -> None:
    """The spacing of two touching teeth (``touching_nu`` degrees of freedom, location 0.26 mm, scale 1 mm)
    is a density, and its share beyond 5 mm is the Student-t survival the pre-registration quotes (SciPy,
    docs/results/review_flag/log.md), integrated here in float64."""
    from dataclasses import replace

    priors = replace(default_priors("upper"), touching_nu=nu)
    assert (priors.touching_mean, priors.touching_sd) == (0.26, 1.0)
    g = np.linspace(-3000.0, 3000.0, 6_000_001)
    density = np.exp(-priors.gap_cost(g, np.ones(len(g), bool), np.zeros(len(g))))
    assert np.trapezoid(density, g) == pytest.approx(1.0, abs=2e-4)
    tail = g >= 5.0
    assert np.trapezoid(density[tail], g[tail]) == pytest.approx(beyond_5mm, rel=0.01)
