"""Per-tooth confidence and the review findings (pointmamba/inference/confidence.py) on arches built
with known widths and spacing, so each finding can be made to fire and to stay quiet."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pointmamba.data import fdi_to_class, read_labels
from pointmamba.data.teeth3ds import instances_from_labels
from pointmamba.inference.confidence import ReviewRules, scan_confidence, tooth_truth
from pointmamba.data.arch import TEXTBOOK_WIDTH_MM

LOWER = [37, 36, 35, 34, 33, 32, 31, 41, 42, 43, 44, 45, 46, 47]  # along the arch from -x to +x


def arch(numbers: list[int], jaw: str = "lower", widths: dict[int, float] | None = None,
         gaps: dict[int, float] | None = None, per_tooth: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Teeth as point blocks laid along a semicircle (crowns +z, incisors +y) in arch order, each as wide as
    its number's typical width (or ``widths``), with ``gaps`` mm of space after a tooth. Returns the
    vertices (V, 3) with a ring of gingiva below and the FDI label of every vertex."""
    typical = TEXTBOOK_WIDTH_MM[jaw]
    width = [(widths or {}).get(n, typical[n % 10 - 1]) for n in numbers]
    space = [(gaps or {}).get(n, 0.0) for n in numbers]
    total = sum(width) + sum(space)
    radius = total / np.pi
    pts, labels = [], []
    s = 0.0
    rng = np.random.default_rng(0)
    for n, w, g in zip(numbers, width, space):
        t = s + rng.uniform(0.02, 0.98, per_tooth) * w  # arc length along the arch
        angle = np.pi - t / radius  # from -x to +x
        depth = rng.uniform(-2.5, 2.5, per_tooth)
        r = radius + depth
        pts.append(np.stack([r * np.cos(angle), r * np.sin(angle), rng.uniform(0, 6, per_tooth)], 1))
        labels.append(np.full(per_tooth, n))
        s += w + g
    ring = np.linspace(0, np.pi, 200)
    pts.append(np.stack([(radius + 6) * np.cos(ring), (radius + 6) * np.sin(ring), np.full(200, -3.0)], 1))
    labels.append(np.zeros(200, dtype=int))
    return np.concatenate(pts), np.concatenate(labels)


def probs_for(labels: np.ndarray, jaw: str, sure: float = 0.9, num_classes: int = 17) -> np.ndarray:
    """Per-vertex probabilities putting ``sure`` on the vertex's class, the rest spread evenly."""
    classes = fdi_to_class(labels, jaw, num_classes)
    p = np.full((len(labels), num_classes), (1 - sure) / (num_classes - 1))
    p[np.arange(len(labels)), classes] = sure
    return p


def confidence(labels, aligned, jaw="lower", probs=None, **kw):
    probs = probs_for(labels, jaw) if probs is None else probs
    classes = fdi_to_class(labels, jaw, probs.shape[1])
    return scan_confidence(probs, classes, instances_from_labels(labels), jaw, aligned, **kw)


def kinds(conf) -> set[str]:
    return {k for k, _ in conf.findings}


def test_tooth_confidence_is_its_mean_probability_over_the_jaws_teeth_with_the_runner_up() -> None:
    aligned, labels = arch(LOWER)
    probs = probs_for(labels, "lower", sure=0.5)
    c35, c34 = fdi_to_class([35, 34], "lower")
    rows = np.flatnonzero(labels == 35)
    probs[rows] = 0.0
    probs[rows[:30], c35], probs[rows[:30], c34], probs[rows[:30], 0] = 0.6, 0.2, 0.2  # gingiva mass ignored
    probs[rows[30:], c35], probs[rows[30:], c34] = 0.4, 0.6
    conf = confidence(labels, aligned, probs=probs)
    tooth = conf.tooth(35)
    # mean over the tooth: 35 -> 0.5, 34 -> 0.4, gingiva 0.1 dropped: renormalized over the 16 teeth
    assert tooth.confidence == pytest.approx(0.5 / 0.9) and tooth.runner_up == 34
    assert tooth.runner_up_confidence == pytest.approx(0.4 / 0.9)
    assert [t.fdi for t in conf.teeth] == LOWER[::-1]  # arch order, the patient's right (4x) first
    assert conf.min_confidence == pytest.approx(min(t.confidence for t in conf.teeth))


def test_instance_posteriors_replace_the_vertex_mean_for_the_teeth_they_name() -> None:
    aligned, labels = arch(LOWER)
    instances = instances_from_labels(labels)
    inst35 = int(instances[labels == 35][0])
    row = np.zeros(17)
    row[fdi_to_class([35, 34], "lower")] = [0.52, 0.41]
    row[0] = 0.07
    conf = confidence(labels, aligned, instance_probs={inst35: row}, rules=ReviewRules(review_below=0.6))
    t = conf.tooth(35)
    assert (t.confidence, t.runner_up) == (pytest.approx(0.52 / 0.93), 34)
    assert conf.tooth(36).confidence == pytest.approx(0.9 / (0.9 + 15 * 0.1 / 16))  # others: vertex means
    assert conf.review_line("MSN023_lower") == "MSN023_lower: review tooth 35 (0.56; 34: 0.44)"


def test_a_typical_arch_needs_no_review_and_each_finding_fires_on_its_own_defect() -> None:
    aligned, labels = arch(LOWER)
    clean = confidence(labels, aligned)
    assert not clean.review and clean.review_line("x") is None, clean.findings

    # a molar-sized "premolar": two teeth under one number
    aligned, labels = arch(LOWER, widths={35: 14.5})
    assert kinds(confidence(labels, aligned)) == {"wide"}
    # molars numbered one position forward (37 absent, each molar called by the number in front of it, as
    # where a premolar was extracted): a "35" as wide as a molar. A wide real premolar stays quiet.
    # (this small synthetic arch's curvature makes the measured widths about 0.9 times those laid out)
    aligned, labels = arch(LOWER[1:], widths={35: 11.0, 36: 11.0})
    found = confidence(labels, aligned)
    assert kinds(found) == {"molar_sized"} and found.reasons[0].startswith("tooth 35 ")
    assert "mm wide, a molar's width (typical 7.0): numbers shifted" in found.reasons[0]
    aligned, labels = arch(LOWER, widths={35: 9.5, 44: 9.5})
    assert not confidence(labels, aligned).review
    # a 2 mm tooth: a fragment, and (its centre 4.6 mm from 43's) perhaps a piece cut off its neighbour
    aligned, labels = arch(LOWER, widths={44: 2.0})
    found = confidence(labels, aligned)
    assert kinds(found) == {"narrow", "packed"} and dict(found.findings)["packed"].startswith("teeth 44 and 43 only 4.6 mm apart")
    # an 8 mm space between 33 and 34 numbered consecutively: a tooth missing there
    aligned, labels = arch(LOWER, gaps={34: 8.0})
    found = confidence(labels, aligned)
    assert kinds(found) == {"room"} and "between 33 and 34" in found.reasons[0]
    # 32 absent while 31 and 33 touch: numbers shifted
    numbers = [n for n in LOWER if n != 32]
    aligned, labels = arch(numbers)
    found = confidence(labels, aligned)
    assert kinds(found) == {"skipped"} and found.reasons[0].startswith("32 missing but 31 and 33 touch")
    # ... but with room for the missing tooth it is an ordinary gap
    aligned, labels = arch(numbers, gaps={33: TEXTBOOK_WIDTH_MM["lower"][1]})
    assert not confidence(labels, aligned).review
    # uncertain number
    aligned, labels = arch(LOWER)
    assert kinds(confidence(labels, aligned, probs=probs_for(labels, "lower", sure=0.3))) == {"uncertain"}


def test_two_instances_with_one_number_and_no_teeth_are_flagged() -> None:
    aligned, labels = arch(LOWER)
    instances = instances_from_labels(labels)
    instances[labels == 36] = instances.max() + 1  # 36's vertices as a separate instance ...
    labels36 = labels.copy()
    labels36[labels == 36] = 35  # ... numbered 35 as well
    probs = probs_for(labels36, "lower")
    conf = scan_confidence(probs, fdi_to_class(labels36, "lower"), instances, "lower", aligned)
    assert ("twice", "tooth 35 twice") in conf.findings
    none = scan_confidence(probs_for(labels * 0, "lower"), labels * 0, labels * 0, "lower", aligned)
    assert none.findings == [("none", "no tooth found")] and none.min_confidence is None


def test_a_nearly_edentulous_arch_is_flagged_but_a_short_arch_is_not() -> None:
    # 37 and 47 alone, far apart (bare ridge between): a person must look, whatever the confidence
    aligned, labels = arch([37, 47], gaps={37: 60.0})
    found = confidence(labels, aligned)
    assert ("few", "only 2 teeth found: teeth on bare gingiva, or teeth missed?") in found.findings
    # an arch of 12 touching teeth (no second molars) is ordinary
    aligned, labels = arch([n for n in LOWER if n % 10 != 7])
    assert not confidence(labels, aligned).review
    # the limit is a rule, not a constant: 5 teeth pass with few_teeth=5
    aligned, labels = arch([33, 32, 31, 41, 42])
    assert "few" in kinds(confidence(labels, aligned))
    assert "few" not in kinds(confidence(labels, aligned, rules=ReviewRules(few_teeth=5)))


def test_removing_a_tooth_keeps_the_other_teeths_confidence() -> None:
    aligned, labels = arch(LOWER)
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(17), len(labels))
    before = confidence(labels, aligned, probs=probs)
    gone = labels.copy()
    gone[labels == 45] = 0
    after = confidence(gone, aligned, probs=probs)
    assert {t.fdi for t in after.teeth} == set(LOWER) - {45}
    for t in after.teeth:
        assert t.confidence == before.tooth(t.fdi).confidence


def test_33_class_probabilities_count_only_the_scans_jaw() -> None:
    aligned, labels = arch([17, 16, 15, 14, 13, 12, 11, 21, 22, 23, 24, 25, 26, 27], jaw="upper")
    probs = probs_for(labels, "upper", sure=0.6, num_classes=33)
    lower_cols = fdi_to_class([31, 41], "lower", 33)
    probs[:, lower_cols] += 0.3  # mass on the other jaw's numbers is no runner-up
    conf = confidence(labels, aligned, jaw="upper", probs=probs)
    assert all(t.runner_up < 30 for t in conf.teeth)
    assert conf.tooth(11).confidence == pytest.approx(0.6 / (0.6 + 15 * 0.4 / 32))


def test_truth_is_the_references_majority_label_per_instance() -> None:
    instances = np.array([0, 1, 1, 1, 2, 2, 2, 2])
    reference = np.array([0, 35, 35, 34, 0, 0, 0, 36])
    assert tooth_truth(instances, reference) == {1: 35, 2: 0}


def test_confidence_goes_in_the_json_beside_unchanged_teeth3ds_keys(tmp_path) -> None:
    from pointmamba.data.teeth3ds import save_labels

    aligned, labels = arch(LOWER)
    conf = confidence(labels, aligned, rules=ReviewRules(review_below=0.95))
    path = save_labels(tmp_path / "p.json", labels, "lower", "P", extra={"confidence": conf.to_json()})
    doc = json.loads(path.read_text())
    assert list(doc) == ["id_patient", "jaw", "labels", "instances", "confidence"]
    back = read_labels(path, len(labels))  # a Teeth3DS reader ignores the extra key
    assert (back.labels == labels).all() and (back.instances == instances_from_labels(labels)).all()
    c = doc["confidence"]
    assert c["review"] and c["findings"][0]["kind"] == "uncertain" and len(c["teeth"]) == len(LOWER)
    assert set(c["teeth"][0]) >= {"fdi", "confidence", "runner_up", "runner_up_confidence"}
    with pytest.raises(ValueError, match="replace Teeth3DS keys"):
        save_labels(tmp_path / "q.json", labels, "lower", "P", extra={"labels": []})


def test_a_flagged_scans_teeth_read_less_sure_and_the_flag_is_decided_from_their_posteriors() -> None:
    from pointmamba.inference.confidence import review_findings

    # 32 absent while 31 and 33 touch: flagged ("skipped"); one tooth, 35, also uncertain
    aligned, labels = arch([n for n in LOWER if n != 32])
    instances = instances_from_labels(labels)
    row = np.zeros(17)
    row[fdi_to_class([35, 34], "lower")] = [0.52, 0.41]
    inst35 = {int(instances[labels == 35][0]): row}
    plain = confidence(labels, aligned, instance_probs=inst35)
    folded = confidence(labels, aligned, instance_probs=inst35, flagged_scale=0.65)
    assert kinds(plain) == {"skipped", "uncertain"} and folded.findings == plain.findings
    assert folded.review_line("x") == plain.review_line("x")  # "tooth 35 (0.56; ...)": the posterior
    for p, f in zip(plain.teeth, folded.teeth):
        assert (f.fdi, f.posterior, f.number_posterior) == (p.fdi, p.confidence, p.confidence)
        assert f.confidence == pytest.approx(0.65 * p.confidence) and p.posterior is None
    assert folded.min_confidence == pytest.approx(0.65 * plain.min_confidence)
    # a tooth at 0.9 reads 0.585 < review_below, yet deciding the findings again (other thresholds, as the
    # calibration's sweep does) sees its posterior: no tooth turns "uncertain" from the scaling
    assert review_findings(folded.teeth, "lower", aligned, instances, ReviewRules()) == \
        review_findings(plain.teeth, "lower", aligned, instances, ReviewRules())
    doc = folded.to_json()
    assert doc["flagged_confidence_scale"] == 0.65 and doc["min_confidence"] == round(folded.min_confidence, 4)
    assert all(t["posterior"] == round(p.confidence, 4) for t, p in zip(doc["teeth"], plain.teeth))
    # an arch nobody needs to review keeps its posteriors, and its JSON has no trace of the scaling
    aligned, labels = arch(LOWER)
    clean, scaled = confidence(labels, aligned), confidence(labels, aligned, flagged_scale=0.65)
    assert not scaled.review and [t.confidence for t in scaled.teeth] == [t.confidence for t in clean.teeth]
    assert scaled.to_json() == clean.to_json() and "posterior" not in scaled.to_json()["teeth"][0]
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="flagged_scale must be in"):
            confidence(labels, aligned, flagged_scale=bad)


def test_flagged_confidence_scale_reaches_a_real_flagged_arch_through_the_api(tmp_path) -> None:
    """``infer.flagged_confidence_scale`` through :class:`Segmenter` on IOS017_upper (a val arch with the
    lone-premolar pattern, flagged under ``auto``): the labels and findings as without it, every tooth's
    confidence its posterior times the scale; a bad value fails before the model loads, naming the key."""
    from pathlib import Path

    from pointmamba import Segmenter

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "iosseg" / "IOS017" / "IOS017_upper.obj"
    if not path.is_file():
        pytest.skip(f"3D-IOSSeg scans not found at {path.parent.parent}")
    with pytest.raises(ValueError, match="infer.flagged_confidence_scale"):
        Segmenter(device="cpu", infer={"flagged_confidence_scale": 0.0})
    plain = Segmenter(device="cpu", infer={"flagged_confidence_scale": 1.0})(path)
    folded = Segmenter(device="cpu", infer={"flagged_confidence_scale": 0.65})(path)
    assert plain.review and plain.confidence.flagged_scale == 1.0
    np.testing.assert_array_equal(folded.labels, plain.labels)
    assert folded.confidence.findings == plain.confidence.findings
    assert [t.posterior for t in folded.confidence.teeth] == [t.confidence for t in plain.confidence.teeth]
    assert all(t.confidence == pytest.approx(0.65 * t.posterior) and t.confidence <= 0.65 for t in folded.confidence.teeth)
    assert folded.to_json()["confidence"]["flagged_confidence_scale"] == 0.65
    # the review page carries both numbers, and its hover text says why the confidence is lower
    from pointmamba.report import ReviewPage

    page = ReviewPage()
    page.add(folded)
    page.write(tmp_path / "index.html")
    text = "".join(p.read_text(errors="replace") for p in page.written)
    assert '"posterior":' in text and "before the scan's flag" in text
