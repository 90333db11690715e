"""A child's priors where the dentition is given as mixed (``infer.child_priors``, issue 43): position 5 is a
primary second molar (molar-wide), second and third molars mostly unerupted. They act only on an arch whose
numbering shows the lone-premolar pattern; every other arch is numbered as without a dentition. Measured in
docs/results/review_flag/log.md ("A child's priors where the dentition is given as mixed")."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import class_to_fdi, fdi_to_class
from pointmamba.data.arch import Instance, index_of_fdi
from pointmamba.data.mesh import vertex_normals
from pointmamba.data.synthetic import synthetic_jaw
from pointmamba.inference.arch_priors import FITTED_MIXED, child_priors, default_priors, fit_child_priors
from pointmamba.inference.config import infer_options
from pointmamba.inference.pipeline import refine_either_jaw
from pointmamba.inference.tooth_numbering import number_instances

pytestmark = pytest.mark.usefixtures("one_thread")

# IOS004_upper, a child's upper arch (3D-IOSSeg), as the held-out pair of split A sees it after the graph cut:
# each instance's width (mm), its gap to the one before (mm), its mean gingiva probability and its mean
# probability of each arch index (0 = 18 ... 7 = 11, 8 = 21 ... 15 = 28). Reference: 16 15 14 13 12 11 21 22 23
# 24 25 26, where 15 and 25 are primary second molars (10.5 mm).
IOS004_UPPER = [
    (8.85, 0.0, 0.056, [0.114, 0.78, 0.046, 0, 0, 0, 0, 0, 0.001, 0, 0, 0, 0, 0, 0.001, 0.001]),
    (10.53, 0.28, 0.033, [0.002, 0.048, 0.829, 0.087, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    (6.77, 0.29, 0.045, [0, 0, 0.025, 0.685, 0.239, 0.002, 0, 0, 0, 0, 0, 0.001, 0.001, 0, 0, 0]),
    (7.66, 0.27, 0.078, [0, 0, 0, 0.003, 0.231, 0.661, 0.023, 0.001, 0, 0, 0.001, 0, 0, 0, 0, 0]),
    (7.35, 0.19, 0.063, [0, 0, 0, 0, 0.001, 0.072, 0.778, 0.083, 0.001, 0, 0, 0, 0, 0.001, 0, 0]),
    (7.92, 0.35, 0.04, [0.001, 0, 0, 0, 0, 0.001, 0.112, 0.762, 0.079, 0.001, 0, 0, 0, 0.001, 0.002, 0.001]),
    (8.39, 0.18, 0.035, [0.001, 0.002, 0.001, 0, 0, 0, 0.002, 0.178, 0.685, 0.095, 0, 0, 0, 0, 0, 0.001]),
    (7.77, 0.25, 0.03, [0, 0, 0, 0, 0, 0, 0, 0.001, 0.083, 0.852, 0.032, 0, 0, 0, 0, 0]),
    (7.83, 0.28, 0.066, [0, 0, 0, 0, 0, 0.001, 0, 0, 0.001, 0.043, 0.777, 0.109, 0.001, 0, 0, 0]),
    (8.35, 0.32, 0.06, [0, 0, 0, 0.001, 0.001, 0, 0, 0, 0, 0, 0.003, 0.174, 0.684, 0.077, 0.001, 0]),
    (10.53, 0.3, 0.033, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.066, 0.801, 0.096, 0.002]),
    (8.19, 0.27, 0.112, [0.001, 0.001, 0, 0, 0, 0, 0, 0.001, 0, 0, 0, 0, 0.001, 0.08, 0.706, 0.097]),
]


def _line_arch(rows) -> tuple[list[Instance], np.ndarray, np.ndarray]:
    """Instances laid along a line with the rows' widths and gaps, their evidence and gingiva evidence."""
    instances, x = [], -50.0
    for k, (width, gap, _, _) in enumerate(rows):
        x += gap
        points = np.stack([np.linspace(x, x + width, 40), np.zeros(40), np.zeros(40)], 1)
        instances.append(Instance(np.arange(40) + 40 * k, points, x + width / 2, k, np.array([1.0, 0.0]), width))
        x += width
    return instances, np.array([r[3] for r in rows], dtype=np.float64), np.array([r[2] for r in rows])


def test_a_childs_priors_change_position_5s_width_and_the_second_and_third_molars_only() -> None:
    for jaw in ("upper", "lower"):
        adult = default_priors(jaw)
        child = child_priors(adult, jaw)
        fives = [index_of_fdi(15), index_of_fdi(25)]
        molars = [index_of_fdi(10 * q + p) for q in (1, 2) for p in (7, 8)]
        np.testing.assert_allclose(child.width_mean[fives], FITTED_MIXED[jaw]["width_mean_5"])
        others = np.setdiff1d(np.arange(16), fives)
        np.testing.assert_array_equal(child.width_mean[others], adult.width_mean[others])
        rest = np.setdiff1d(np.arange(16), molars)
        np.testing.assert_array_equal(child.missing_cost[rest], adult.missing_cost[rest])
        np.testing.assert_array_equal(child.present_cost[rest], adult.present_cost[rest])
        # a second molar: missing on 87.5 % of a child's sides; a third molar: always (capped at 99 %)
        assert child.missing_cost[index_of_fdi(17)] == pytest.approx(-np.log(0.875))
        assert child.present_cost[index_of_fdi(27)] == pytest.approx(-np.log(0.125))
        assert child.present_cost[index_of_fdi(18)] == pytest.approx(-np.log(0.01))
        assert child.present_cost[index_of_fdi(17)] > adult.present_cost[index_of_fdi(17)] + 1.5


def test_a_real_childs_arch_is_read_tooth_by_tooth_under_a_childs_priors() -> None:
    """IOS004_upper, held out: under the adult priors the left side reads 23, one instance as 24 + 25, then
    the primary second molar as 26 and the first molar as 27. A pair blocks the mixed reading of that side, so
    the arch kept a number too many there (0.716 given mixed). Under a child's priors the molar-wide tooth may
    be a 5 and the side reads one tooth an instance (0.952 once the mixed reading applies)."""
    instances, evidence, gum = _line_arch(IOS004_UPPER)
    adult = number_instances(instances, evidence, gum, default_priors("upper"))
    child = number_instances(instances, evidence, gum, child_priors(default_priors("upper"), "upper"))
    left = slice(8, 12)  # the canine 23 and the three teeth behind it
    plus_x = {a: 20 + a - 7 for a in range(8, 16)}  # arch index -> FDI on the left side
    assert adult.options[left] == [(10, 10), (11, 12), (13, 13), (14, 14)]  # 23, 24 + 25, 26, 27
    assert all(o is not None and o[0] == o[1] for o in child.options[left])
    numbers = [plus_x[o[0]] for o in child.options[left]]
    assert numbers[0] == 23 and numbers[-1] <= 27 and len(set(numbers)) == 4


def test_fit_child_priors_pools_the_molars_over_the_jaws() -> None:
    arches = []
    for seed, jaw, missing in ((0, "lower", (37, 47, 38, 48)), (1, "lower", (37, 38, 48)), (2, "upper", (18, 28))):
        scan = synthetic_jaw(seed, jaw, n_vertices=6000, missing=missing, pose="canonical")
        arches.append((scan.vertices.astype(np.float64), scan.labels, jaw))
    table = fit_child_priors(arches)
    assert (table["lower"]["arches"], table["upper"]["arches"]) == (2, 1)
    # second molars: lower 3 of 4 sides missing, upper 0 of 2; third molars: every side
    assert table["missing_rate"][7] == pytest.approx((0.75 * 2 + 0.0 * 1) / 3, abs=1e-3)
    assert table["missing_rate"][8] == pytest.approx(1.0)
    assert 5.0 < table["lower"]["width_mean_5"] < 9.0 and 5.0 < table["upper"]["width_mean_5"] < 9.0


def _refined(missing: tuple[int, ...], dentition: str, child: bool) -> dict[int, int]:
    """Each true tooth's number after the pipeline's numbering of a synthetic lower arch (no graph cut)."""
    scan = synthetic_jaw(0, "lower", n_vertices=8000, missing=missing, pose="canonical")
    classes = fdi_to_class(scan.labels, "lower", 17)
    probs = np.full((len(classes), 17), 0.2 / 16)
    probs[np.arange(len(classes)), classes] = 0.8
    options = infer_options({"infer": {"dentition": dentition, "child_priors": child, "graph_cut": False}})
    normals = vertex_normals(scan.vertices, scan.faces)
    labels, _, _ = refine_either_jaw(probs, scan.vertices, scan.faces, normals, "lower", 17, options)
    fdi = class_to_fdi(labels, "lower", 17)
    return {int(t): int(np.bincount(fdi[scan.labels == t]).argmax()) for t in np.unique(scan.labels) if t > 0}


def test_through_the_pipeline_a_pattern_arch_given_mixed_reads_mixed_and_others_are_untouched() -> None:
    # canine, one premolar-sized tooth (35), molars 36, 37 on each side: given mixed, 34, 35, 36
    with_child = _refined((34, 44, 38, 48), "mixed", True)
    assert (with_child[35], with_child[36], with_child[37]) == (34, 35, 36), with_child
    assert (with_child[45], with_child[46], with_child[47]) == (44, 45, 46), with_child
    # an arch without the pattern, given mixed: the numbers are those without a dentition
    plain = _refined((38, 48), "auto", False)
    given = _refined((38, 48), "mixed", True)
    assert given == plain == {t: t for t in plain}
