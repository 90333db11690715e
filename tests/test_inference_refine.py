"""Inference refinements on real scans: graph cut, jaw restriction, instance numbering options, render."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pointmamba.data import class_colors, fdi_to_class, load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import apply_transform
from pointmamba.inference.graph_cut import graph_cut
from pointmamba.inference.pipeline import refine


def _scan(scans_dir: Path, name: str):
    scan = load_scan(scans_dir / name.split("_")[0] / f"{name}.obj")
    arrays = preprocess_scan(scan)
    aligned = apply_transform(scan.vertices, arrays["transform"])
    aligned -= aligned.mean(0)
    normals = apply_transform(arrays["normals"].astype(np.float64), arrays["transform"], direction=True)
    return scan, aligned, normals, fdi_to_class(scan.labels, scan.jaw, 17)


def _soft(classes: np.ndarray, p: float, num_classes: int = 17) -> np.ndarray:
    probs = np.full((len(classes), num_classes), (1 - p) / (num_classes - 1))
    probs[np.arange(len(classes)), classes] = p
    return probs


def test_graph_cut_repairs_noisy_labels(scans_dir: Path) -> None:
    scan, aligned, normals, classes = _scan(scans_dir, "MSN021_lower")
    rng = np.random.default_rng(0)
    noisy = classes.copy()
    flip = rng.random(len(classes)) < 0.2
    noisy[flip] = rng.integers(0, 17, flip.sum())
    before = (noisy == classes).mean()
    after = (graph_cut(_soft(noisy, 0.5), aligned, scan.faces, normals, smoothing=1.0) == classes).mean()
    assert before < 0.85 and after > 0.95


def test_33_class_prediction_stays_in_the_scans_jaw(scans_dir: Path) -> None:
    scan, aligned, normals, _ = _scan(scans_dir, "MSN022_upper")
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(33), size=scan.num_vertices)
    probs[:, 17:] *= 5  # a model that prefers lower-jaw classes on an upper scan
    options = {"graph_cut": False, "instance_numbering": False}
    out = refine(probs / probs.sum(1, keepdims=True), aligned, scan.faces, normals, "upper", 33, options)
    assert out.max() <= 16


def test_options_left_out_take_their_documented_defaults(scans_dir: Path) -> None:
    """A caller's partial ``infer`` dict means the defaults for the rest (instance numbering on), not
    "off" for every key it does not name."""
    from pointmamba.inference.config import INFER_DEFAULTS

    scan, aligned, normals, classes = _scan(scans_dir, "MSN022_upper")
    c11, c12 = fdi_to_class(np.array([11, 12]), "upper", 17)
    shifted = np.where(classes == c11, c12, classes)  # two teeth called 12: only the numbering separates them
    probs = _soft(shifted, 0.3)
    partial = {"graph_cut": True, "graph_cut_smoothing": INFER_DEFAULTS["graph_cut_smoothing"]}
    full = refine(probs, aligned, scan.faces, normals, "upper", 17, dict(INFER_DEFAULTS))
    np.testing.assert_array_equal(refine(probs, aligned, scan.faces, normals, "upper", 17, partial), full)
    off = refine(probs, aligned, scan.faces, normals, "upper", 17, {**INFER_DEFAULTS, "instance_numbering": False})
    assert (off != full).any()  # the numbering changes labels here, so leaving it out would show


def test_evidence_weight_sets_network_against_arch_priors() -> None:
    """``infer.numbering_evidence_weight`` reaches the instance numbering: a network that shifts one side of
    an intact upper arch back by one number (11 called 12, ..., 17 called 18), at 0.5 against 0.3 for the
    right number, is followed where its evidence weighs much, and overruled by the arch priors (tooth widths,
    spacing, missing-tooth rates) where it weighs little."""
    from pointmamba.inference.config import INFER_DEFAULTS

    samples = Path(__file__).resolve().parents[1] / "data" / "samples"  # in the checkout: runs in CI too
    scan, aligned, normals, classes = _scan(samples, "MSN022_upper")
    side = [int(c) for c in fdi_to_class(np.arange(11, 19), "upper", 17)]
    shift = dict(zip(side[:-1], side[1:]))
    assert all((classes == c).any() for c in side[:7]) and not (classes == side[7]).any()
    probs = _soft(classes, 0.8)
    for c, wrong in shift.items():
        ids = classes == c
        probs[ids] = 0.2 / 15
        probs[ids, c], probs[ids, wrong] = 0.3, 0.5
    def numbers(weight: float) -> list[int]:
        out = refine(probs, aligned, scan.faces, normals, "upper", 17,
                     {**INFER_DEFAULTS, "numbering_evidence_weight": weight})
        return [int(np.bincount(out[classes == c], minlength=17).argmax()) for c in side[:7]]
    # a central incisor touching 21 stays 11 at any weight (the spacing prior: no position skipped without
    # a gap); 12-17 follow the network's shift where its evidence weighs much
    assert numbers(20.0) == side[:1] + side[2:]
    assert numbers(0.5) == side[:7]


def test_touching_nu_keeps_the_teeth_behind_a_space() -> None:
    """``infer.numbering_touching_nu`` reaches the instance numbering: with the left first premolar (24) cut
    out of an intact upper arch and a network that counts teeth (each tooth behind the space read 0.7 as the
    number one forward, 0.25 as its own), the heavy-tailed spacing of the first numbering (3 degrees of
    freedom) reads the space as two touching teeth and moves 25-27 forward; 10 keeps their numbers."""
    from pointmamba.inference.config import INFER_DEFAULTS

    samples = Path(__file__).resolve().parents[1] / "data" / "samples"
    scan, aligned, normals, classes = _scan(samples, "MSN022_upper")
    gone = classes == int(fdi_to_class(np.array([24]), "upper", 17)[0])
    keep = ~gone
    new_id = np.cumsum(keep) - 1
    faces = new_id[scan.faces[keep[scan.faces].all(1)]]
    aligned, normals, classes = aligned[keep], normals[keep], classes[keep]
    behind = [int(c) for c in fdi_to_class(np.array([24, 25, 26, 27]), "upper", 17)]
    probs = _soft(classes, 0.95)
    for forward, own in zip(behind, behind[1:]):
        ids = classes == own
        probs[ids] = 0.05 / 15
        probs[ids, own], probs[ids, forward] = 0.25, 0.7

    def numbers(nu: float) -> list[int]:
        out = refine(probs, aligned, faces, normals, "upper", 17, {**INFER_DEFAULTS, "numbering_touching_nu": nu})
        return [int(np.bincount(out[classes == c], minlength=17).argmax()) for c in behind[1:]]
    assert numbers(3.0) == behind[:3]  # moved one forward, as the removal check saw held out
    assert numbers(10.0) == behind[1:]


def test_class_prior_reaches_the_numbering_and_keeps_an_intact_arch() -> None:
    """``infer.numbering_class_prior`` reaches the instance numbering (its energies move, rarer classes'
    evidence weighing more) and an intact arch the network reads right keeps every number."""
    from pointmamba.inference.config import INFER_DEFAULTS
    from pointmamba.inference.pipeline import refine_either_jaw

    samples = Path(__file__).resolve().parents[1] / "data" / "samples"
    scan, aligned, normals, classes = _scan(samples, "MSN022_upper")
    probs = _soft(classes, 0.6)
    out = {}
    for power in (0.0, 0.5):
        labels, numbering, _ = refine_either_jaw(probs, aligned, scan.faces, normals, "upper", 17,
                                                 {**INFER_DEFAULTS, "numbering_class_prior": power})
        out[power] = labels, numbering
    np.testing.assert_array_equal(out[0.0][0], out[0.5][0])
    teeth = np.unique(classes[classes > 0])
    assert all(np.bincount(out[0.5][0][classes == c], minlength=17).argmax() == c for c in teeth)
    assert abs(out[0.0][1].log_z - out[0.5][1].log_z) > 0.5  # the energies moved (about 1.3 nats here)


def test_render_writes_a_picture_with_reference(scans_dir: Path, tmp_path: Path) -> None:
    from PIL import Image

    from pointmamba.inference.render import render_segmentation

    scan, aligned, _, classes = _scan(scans_dir, "MSN021_lower")
    colors = class_colors(17)
    path = render_segmentation(tmp_path / "x.png", aligned, scan.faces, scan.labels, colors, classes, "t")
    pair = render_segmentation(tmp_path / "y.png", aligned, scan.faces, scan.labels, colors, classes, "t",
                               scan.labels, classes)
    single, double = Image.open(path), Image.open(pair)
    assert double.size[1] > 1.5 * single.size[1]  # reference row above the prediction
    pixels = np.asarray(single.convert("RGB")).reshape(-1, 3)
    assert len(np.unique(pixels, axis=0)) > 200  # shaded triangles, not a flat fill


def test_side_by_side_puts_pictures_left_to_right(tmp_path: Path) -> None:
    from PIL import Image

    from pointmamba.inference.render import side_by_side

    Image.new("RGB", (30, 20), (255, 0, 0)).save(tmp_path / "a.png")
    Image.new("RGB", (10, 40), (0, 0, 255)).save(tmp_path / "b.png")
    out = np.asarray(Image.open(side_by_side([tmp_path / "a.png", tmp_path / "b.png"], tmp_path / "ab.png")))
    assert out.shape == (40, 40, 3)
    assert (out[:20, :30] == [255, 0, 0]).all() and (out[20:, :30] == 255).all()  # below the short one: white
    assert (out[:, 30:] == [0, 0, 255]).all()


