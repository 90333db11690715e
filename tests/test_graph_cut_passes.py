"""The graph cut's fast path against the plain one: alpha-expansion restricted to candidate labels (checked
move by move against brute force, and against GCO), and the coarse-then-fine cut of a fine mesh against one
cut of every vertex (its energy, its labels)."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.inference import graph_cut as gc
from pointmamba.inference.expansion import cut_energy, restricted_expansion

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "MSN021" / "MSN021_lower.obj"


def _random_problem(rng: np.random.Generator, n: int, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4])
    edges = pairs.reshape(-1, 2)
    weights = rng.integers(1, 60, len(edges))
    cost = rng.integers(0, 100, (n, n_labels))
    return edges, weights, cost


PAIRS = {"potts": None, "teeth cost 2": gc.pair_costs(np.arange(4), 2)}  # label 0 the gingiva, 1-3 teeth


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS.keys())
@pytest.mark.parametrize("seed", range(6))
def test_restricted_expansion_ends_where_no_expansion_move_helps(seed: int, pair: np.ndarray | None) -> None:
    rng = np.random.default_rng(seed)
    n, n_labels = 7, 4
    edges, weights, cost = _random_problem(rng, n, n_labels)
    candidates = rng.random((n, n_labels)) < 0.6
    start = np.array([rng.choice(np.flatnonzero(c)) if c.any() else 0 for c in candidates])
    labels = restricted_expansion(edges, weights, cost, candidates, start, 20, pair)
    allowed = candidates.copy()
    allowed[np.arange(n), start] = True  # the start label is always allowed
    assert allowed[np.arange(n), labels].all()
    energy = cut_energy(labels, cost, edges, weights, pair)
    assert energy <= cut_energy(start, cost, edges, weights, pair)
    for alpha in range(n_labels):  # every subset of the sites that may take alpha: none is cheaper
        movable = [p for p in range(n) if allowed[p, alpha] and labels[p] != alpha]
        for k in range(1, len(movable) + 1):
            for subset in itertools.combinations(movable, k):
                moved = labels.copy()
                moved[list(subset)] = alpha
                assert cut_energy(moved, cost, edges, weights, pair) >= energy


@pytest.mark.parametrize("tooth_pair_cost", [None, 2], ids=["potts", "teeth cost 2"])
def test_restricted_expansion_with_every_label_matches_gco(tooth_pair_cost: int | None) -> None:
    rng = np.random.default_rng(11)
    edges, weights, cost = _random_problem(rng, 40, 5)
    pair = None if tooth_pair_cost is None else gc.pair_costs(np.arange(5), tooth_pair_cost)
    ours = restricted_expansion(edges, weights, cost, np.ones_like(cost, dtype=bool), None, 20, pair)
    theirs = gc._expansion(np.ascontiguousarray(edges, dtype=np.int32), np.ascontiguousarray(weights, dtype=np.int32),
                           np.ascontiguousarray(cost, dtype=np.int32), pair)
    # both are local minima of the expansion moves; from GCO's start (all 0) they are the same one
    assert cut_energy(ours, cost, edges, weights, pair) <= 1.02 * cut_energy(theirs, cost, edges, weights, pair)
    start = np.zeros(len(cost), dtype=np.int64)
    assert np.array_equal(restricted_expansion(edges, weights, cost, np.ones_like(cost, dtype=bool), start, 20, pair),
                          theirs)


def test_pair_costs_are_a_metric_over_the_used_classes() -> None:
    pair = gc.pair_costs(np.array([0, 3, 5, 9]), 2)
    assert pair.tolist() == [[0, 1, 1, 1], [1, 0, 2, 2], [1, 2, 0, 2], [1, 2, 2, 0]]
    assert (gc.pair_costs(np.array([3, 5]), 2) == [[0, 2], [2, 0]]).all()  # no gingiva used: teeth only
    assert (gc.pair_costs(np.arange(5), 1) == 1 - np.eye(5)).all()  # 1: Potts
    for i, j, k in itertools.product(range(4), repeat=3):
        assert pair[i, k] <= pair[i, j] + pair[j, k]


def _strip(rows: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A flat grid: columns 0-3 tooth 1, column 4 a strip of gingiva the network calls gingiva at 0.6
    (0.2 each tooth), columns 5-8 tooth 2; every edge weighs the same."""
    cols = 9
    y, x = np.mgrid[0:rows, 0:cols]
    vertices = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], 1).astype(np.float64)
    idx = np.arange(rows * cols).reshape(rows, cols)
    quads = np.stack([idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()], 1)
    faces = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    probs = np.full((rows * cols, 3), 0.01)
    probs[x.ravel() < 4, 1] = 0.98
    probs[x.ravel() > 4, 2] = 0.98
    probs[x.ravel() == 4] = [0.6, 0.2, 0.2]
    return probs, vertices, faces, np.tile([0.0, 0.0, 1.0], (rows * cols, 1))


def test_a_strip_of_gum_between_two_teeth_is_kept_only_with_pair_cost_2() -> None:
    """The behaviour the switch is for: under Potts the strip costs one boundary more as gingiva than as a
    tooth and is handed to a tooth; with a boundary between two teeth costing two, the network decides."""
    probs, vertices, faces, normals = _strip()
    strip = vertices[:, 0] == 4
    for coarse_first in (True, False):
        potts = gc.graph_cut(probs, vertices, faces, normals, smoothing=1.0, coarse_first=coarse_first)
        kept = gc.graph_cut(probs, vertices, faces, normals, smoothing=1.0, coarse_first=coarse_first,
                            tooth_pair_cost=2)
        assert (potts[strip] > 0).all()
        assert (kept[strip] == 0).all()
        assert np.array_equal(kept[~strip], probs[~strip].argmax(1))  # the teeth themselves stay
    assert (gc.graph_cut(probs, vertices, faces, normals, smoothing=0.3)[strip] == 0).all()  # a weaker cut keeps it too


def test_pair_cost_2_through_the_fine_pass(fine_scan: dict[str, np.ndarray]) -> None:
    """On a fine mesh (coarse cells, then the restricted expansion) the cut with tooth pairs at 2 ends near
    one cut of every vertex under the same energy, and ``infer.graph_cut_tooth_pair_cost`` reaches it."""
    from pointmamba.inference.pipeline import refine

    s = fine_scan
    args = (s["probs"], s["vertices"], s["faces"], s["normals"])
    pair = gc.pair_costs(np.arange(17), 2)
    one = gc.graph_cut(*args, smoothing=3.0, coarse_first=False, tooth_pair_cost=2)
    two = gc.graph_cut(*args, smoothing=3.0, tooth_pair_cost=2)
    assert (two == one).mean() >= 0.995
    assert _energy(s, two, pair=pair) <= 1.001 * _energy(s, one, pair=pair)
    assert _energy(s, two, pair=pair) < _energy(s, gc.graph_cut(*args, smoothing=3.0), pair=pair)
    via = refine(*args, None, 17, {"graph_cut_tooth_pair_cost": 2, "graph_cut_density_power": 0.0,
                                   "graph_cut_fine_cycles": gc.MAX_CYCLES})
    assert np.array_equal(via, two)


@pytest.mark.parametrize("bad", [0, 3, 1.5, True, "2"])
def test_tooth_pair_cost_must_be_1_or_2(bad: object) -> None:
    probs = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match="tooth_pair_cost"):
        gc.graph_cut(probs, np.eye(3), np.array([[0, 1, 2]]), np.eye(3), tooth_pair_cost=bad)


@pytest.fixture(scope="module")
def fine_scan() -> dict[str, np.ndarray]:
    """The sample jaw subdivided twice (86k vertices, about 6 a network cell), its labels carried over,
    and noisy probabilities from them: a fine mesh whose cut takes the coarse-then-fine path."""
    from pointmamba.data.dataset import preprocess_scan
    from pointmamba.data.mesh import apply_transform, subdivide, vertex_normals

    scan = load_scan(SAMPLE)
    arrays = preprocess_scan(scan)
    vertices = apply_transform(scan.vertices, arrays["transform"])
    faces = scan.faces
    classes = fdi_to_class(scan.labels, scan.jaw, 17)
    for _ in range(2):
        vertices, faces, parents = subdivide(vertices, faces)
        classes = np.concatenate([classes, classes[parents[:, 0]]])
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(17) * 0.3, size=len(classes)) * 0.5
    probs[np.arange(len(classes)), classes] += 0.5
    blur = rng.random(len(classes)) < 0.15
    probs[blur] = rng.dirichlet(np.ones(17) * 0.3, size=int(blur.sum()))
    return {"vertices": vertices, "faces": faces, "normals": vertex_normals(vertices, faces), "probs": probs,
            "classes": classes}


def _energy(s: dict[str, np.ndarray], labels: np.ndarray, smoothing: float = 3.0, pair: np.ndarray | None = None) -> int:
    """The cut's integer energy of ``labels``, as graph_cut scores it (every class is used here)."""
    unary = np.round(-np.log(np.clip(s["probs"], 1e-6, 1.0)) * 100).astype(np.int64)
    edges = gc.mesh_edges(s["faces"], len(s["vertices"]))
    w = gc.edge_weights(s["vertices"], s["normals"], edges)
    return cut_energy(labels, unary, edges, np.clip(np.round(w * smoothing * 100), 1, 2**30).astype(np.int64), pair)


def test_coarse_then_fine_cut_matches_one_cut_of_every_vertex(fine_scan: dict[str, np.ndarray]) -> None:
    s = fine_scan
    args = (s["probs"], s["vertices"], s["faces"], s["normals"])
    cells = np.unique(np.floor(s["vertices"] / gc.COARSE_CELL_MM), axis=0)
    assert len(s["vertices"]) >= gc.COARSE_MIN_VERTICES * len(cells)  # the coarse-then-fine path runs
    one = gc.graph_cut(*args, smoothing=3.0, coarse_first=False)
    two = gc.graph_cut(*args, smoothing=3.0)
    assert (two == one).mean() >= 0.995
    assert _energy(s, two) <= 1.001 * _energy(s, one)
    assert (two == s["classes"]).mean() >= (one == s["classes"]).mean() - 0.002
    assert (two == s["classes"]).mean() > (s["probs"].argmax(1) == s["classes"]).mean()  # it did smooth


def test_coarse_pass_alone_would_be_worse(fine_scan: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fine pass matters: without it (no candidates but the cell's label) boundaries sit on the cells."""
    s = fine_scan
    args = (s["probs"], s["vertices"], s["faces"], s["normals"])
    two = gc.graph_cut(*args, smoothing=3.0)
    monkeypatch.setattr(gc, "CANDIDATE_CELLS", 0)
    monkeypatch.setattr(gc, "CANDIDATE_NATS", -1.0)
    coarse = gc.graph_cut(*args, smoothing=3.0)
    assert _energy(s, two) < _energy(s, coarse)


def test_fine_cycles_stop_the_fine_pass_early(fine_scan: dict[str, np.ndarray]) -> None:
    """``fine_cycles`` cuts the fine pass short: from the same start every applied move lowers the energy, so
    one cycle ends at or above two, two at or above running to convergence, and MAX_CYCLES is the default."""
    s = fine_scan
    args = (s["probs"], s["vertices"], s["faces"], s["normals"])
    full = gc.graph_cut(*args, smoothing=3.0)
    one = gc.graph_cut(*args, smoothing=3.0, fine_cycles=1)
    two = gc.graph_cut(*args, smoothing=3.0, fine_cycles=2)
    assert np.array_equal(gc.graph_cut(*args, smoothing=3.0, fine_cycles=gc.MAX_CYCLES), full)
    assert (one != full).any()  # this mesh needs more than one cycle, so the switch is seen
    assert _energy(s, one) >= _energy(s, two) >= _energy(s, full)
    assert (one == full).mean() >= 0.995


def test_fine_cycles_leave_a_coarse_mesh_alone() -> None:
    """A mesh too coarse for two passes (the decimated scans, as the network was trained on) is one cut:
    the fine pass's cycles change nothing there."""
    from pointmamba.data.dataset import preprocess_scan
    from pointmamba.data.mesh import apply_transform, vertex_normals

    scan = load_scan(SAMPLE)
    vertices = apply_transform(scan.vertices, preprocess_scan(scan)["transform"])
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(17) * 0.3, size=len(vertices)) * 0.5
    probs[np.arange(len(vertices)), fdi_to_class(scan.labels, scan.jaw, 17)] += 0.5
    args = (probs, vertices, scan.faces, vertex_normals(vertices, scan.faces))
    assert np.array_equal(gc.graph_cut(*args, smoothing=3.0, fine_cycles=1), gc.graph_cut(*args, smoothing=3.0))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_fine_cycles_must_be_a_positive_integer(bad: object) -> None:
    probs = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match="fine_cycles"):
        gc.graph_cut(probs, np.eye(3), np.array([[0, 1, 2]]), np.eye(3), fine_cycles=bad)


def test_the_infer_option_reaches_the_fine_pass(fine_scan: dict[str, np.ndarray]) -> None:
    """``infer.graph_cut_fine_cycles`` as a user sets it (the inference options) is the cut's ``fine_cycles``."""
    from pointmamba.inference.pipeline import refine

    s = fine_scan
    args = (s["probs"], s["vertices"], s["faces"], s["normals"])
    labels = {}
    for n in (1, 20):
        labels[n] = refine(*args, None, 17, {"graph_cut_fine_cycles": n, "graph_cut_density_power": 0.0,
                                             "graph_cut_tooth_pair_cost": 1})
        assert np.array_equal(labels[n], gc.graph_cut(*args, smoothing=3.0, fine_cycles=n))
    assert (labels[1] != labels[20]).any()
