"""The dentition input (issue 43): a side of canine, one premolar-sized tooth, then molars is numbered
permanent (premolar 5, first molar 6) or mixed (4, 5, then first molar 6) as asked; ``auto`` picks one,
flags the scan naming both and gives each affected tooth the other reading's number; arches without the
pattern are numbered as without a dentition. Synthetic arches, and real val arches of 3D-IOSSeg through
the API and the command line (skipped without ../shared)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import class_to_fdi, fdi_to_class
from pointmamba.data.synthetic import synthetic_jaw
from pointmamba.inference.confidence import scan_confidence
from pointmamba.inference.dentition import read_dentition_file
from pointmamba.inference.tooth_numbering import number_teeth, numbered_instances

from support.tools import run_tool

SHARED_IOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "iosseg"
pytestmark = pytest.mark.usefixtures("one_thread")

# the synthetic lower arch below: 34 and 44 absent (and the third molars), so each side reads
# canine, one premolar-sized tooth (35: 6 mm), molar-sized teeth (36, 37: 9-10 mm)
PERMANENT = {31: 31, 32: 32, 33: 33, 35: 35, 36: 36, 37: 37, 41: 41, 42: 42, 43: 43, 45: 45, 46: 46, 47: 47}
MIXED = {**PERMANENT, 35: 34, 36: 35, 37: 36, 45: 44, 46: 45, 47: 46}


def _pattern_arch(missing=(34, 44, 38, 48)):
    scan = synthetic_jaw(0, "lower", n_vertices=8000, missing=missing, pose="canonical")
    classes = fdi_to_class(scan.labels, "lower", 17)
    probs = np.full((len(classes), 17), 0.2 / 16)
    probs[np.arange(len(classes)), classes] = 0.8
    return scan, classes, probs


def _numbers(truth_fdi: np.ndarray, fdi: np.ndarray) -> dict[int, int]:
    """The number each true tooth carries: the most common label on its vertices."""
    return {int(t): int(np.bincount(fdi[truth_fdi == t]).argmax()) for t in np.unique(truth_fdi) if t > 0}


@pytest.mark.parametrize("dentition, expected", [("permanent", PERMANENT), ("mixed", MIXED)])
def test_a_synthetic_pattern_arch_is_numbered_as_its_dentition_says(dentition: str, expected: dict) -> None:
    scan, classes, probs = _pattern_arch()
    labels, numbering = number_teeth(classes, probs, scan.vertices, scan.faces, "lower", 17, dentition=dentition)
    assert _numbers(scan.labels, class_to_fdi(labels, "lower", 17)) == expected
    assert numbering.dentition.used == dentition and sorted(numbering.dentition.sides) == [3, 4]
    instances, iprobs = numbered_instances(numbering, labels, 17, "lower")
    conf = scan_confidence(probs, labels, instances, "lower", scan.vertices, iprobs, dentition=numbering.dentition)
    assert conf.to_json()["dentition"]["used"] == dentition
    # read as mixed, the side's 4 and 5 are primary molars (marked in the JSON); permanent: none
    primary = sorted(t["fdi"] for t in conf.to_json()["teeth"] if t.get("primary"))
    assert primary == ([34, 35, 44, 45] if dentition == "mixed" else [])
    # what the given dentition explains is not flagged: no molar-sized "35" (mixed), no skipped 34 (permanent)
    assert not {"molar_sized", "skipped", "dentition"} & {k for k, _ in conf.findings}, conf.reasons


def test_auto_picks_one_reading_flags_the_scan_and_gives_the_other_as_alternative() -> None:
    scan, classes, probs = _pattern_arch()
    labels, numbering = number_teeth(classes, probs, scan.vertices, scan.faces, "lower", 17, dentition="auto")
    reading = numbering.dentition
    used, other = (PERMANENT, MIXED) if reading.used == "permanent" else (MIXED, PERMANENT)
    assert _numbers(scan.labels, class_to_fdi(labels, "lower", 17)) == used
    instances, iprobs = numbered_instances(numbering, labels, 17, "lower")
    conf = scan_confidence(probs, labels, instances, "lower", scan.vertices, iprobs, dentition=reading)
    assert conf.review and any(k == "dentition" for k, _ in conf.findings)
    text = dict(conf.findings)["dentition"]
    assert "permanent 33 35 36 37" in text and "mixed 33 34 35 36" in text, text
    alternatives = {t.fdi: t.alternative for t in conf.teeth}
    for true, number in used.items():
        assert alternatives[number] == (other[true] if other[true] != number else None), (true, alternatives)
    doc = conf.to_json()
    assert doc["dentition"]["requested"] == "auto" and doc["dentition"]["used"] == reading.used
    assert {t["fdi"]: t.get("alternative") for t in doc["teeth"]} == alternatives


@pytest.mark.parametrize("dentition", ["permanent", "mixed", "auto"])
def test_an_arch_without_the_pattern_is_numbered_as_without_a_dentition(dentition: str) -> None:
    scan, classes, probs = _pattern_arch(missing=(38, 48))  # both premolars: no side of the pattern
    before, _ = number_teeth(classes, probs, scan.vertices, scan.faces, "lower", 17)
    after, numbering = number_teeth(classes, probs, scan.vertices, scan.faces, "lower", 17, dentition=dentition)
    np.testing.assert_array_equal(after, before)
    assert numbering.dentition.used is None and numbering.dentition.finding() is None


def test_the_dentition_file_is_read_and_bad_rows_name_the_file(tmp_path: Path) -> None:
    good = tmp_path / "dentition.csv"
    good.write_text("scan,dentition\n# a comment\nIOS017_upper, permanent\n\nIOS009_lower,Mixed\n")
    assert read_dentition_file(good) == {"IOS017_upper": "permanent", "IOS009_lower": "mixed"}
    for text, says in (("IOS017_upper,adult\n", "unknown dentition 'adult'"),
                       ("IOS017_upper\n", "expected 'scan stem,dentition'"),
                       ("a,mixed\na,permanent\n", "given two dentitions")):
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(ValueError, match="bad.csv line"):
            read_dentition_file(bad)
        with pytest.raises(ValueError, match=says):
            read_dentition_file(bad)


def test_predict_refuses_a_bad_dentition_file_before_any_work(tmp_path: Path) -> None:
    bad = tmp_path / "dentition.csv"
    bad.write_text("MSN021_lower,adult\n")
    sample = Path(__file__).resolve().parents[1] / "data" / "samples" / "MSN021" / "MSN021_lower.obj"
    code, _, err = run_tool("predict", str(sample), "--out", str(tmp_path / "out"), "--dentition-file", str(bad))
    assert code == 2 and "dentition.csv line 1" in err and "unknown dentition 'adult'" in err, err
    assert not (tmp_path / "out" / "MSN021_lower.json").exists()


def _real(name: str) -> Path:
    path = SHARED_IOS / name.split("_")[0] / f"{name}.obj"
    if not path.is_file():
        pytest.skip(f"3D-IOSSeg scans not found at {SHARED_IOS} (../shared/data/iosseg beside the checkout)")
    return path


@pytest.fixture(scope="module")
def shipped():
    from pointmamba import Segmenter

    return Segmenter(device="cpu")


def test_a_real_val_arch_through_the_api_in_both_readings(shipped, tmp_path: Path) -> None:
    # IOS017_upper: an adult's first premolars taken out, spaces closed (13, 15, 16, 17 | 23, 25, 26, 27, 28);
    # read as counted (mixed) it is 13, 14, 15, 16 | 23, 24, 25, 26, 27
    path = _real("IOS017_upper")
    permanent = shipped(path, dentition="permanent")
    assert {13, 15, 16, 17, 23, 25, 26, 27} <= set(permanent.teeth) and not {14, 24} & set(permanent.teeth)
    assert permanent.to_json()["confidence"]["dentition"]["used"] == "permanent"
    mixed = shipped(path, dentition="mixed")
    assert {13, 14, 15, 16, 23, 24, 25, 26} <= set(mixed.teeth)
    auto = shipped(path)
    doc = auto.to_json()["confidence"]
    assert doc["dentition"]["requested"] == "auto" and auto.review
    assert any(f["kind"] == "dentition" for f in doc["findings"])
    assert any(t.get("alternative") for t in doc["teeth"])  # the other reading's numbers
    # flagged: by default no tooth reads as sure, each keeping its number's posterior beside its confidence
    assert doc["flagged_confidence_scale"] == 0.89
    assert all(t["confidence"] == pytest.approx(0.89 * t["posterior"], abs=1e-4) for t in doc["teeth"])
    used = doc["dentition"]["used"]
    if used == "as numbered":  # the network reads a side neither way: kept, flagged, not forced
        assert not any(np.array_equal(auto.labels, r.labels) for r in (permanent, mixed))
        assert "kept as numbered" in next(f["text"] for f in doc["findings"] if f["kind"] == "dentition")
    elif used == "permanent":
        np.testing.assert_array_equal(auto.labels, permanent.labels)
    else:  # auto's mixed reading is the adult numbering's; given mixed, a child's priors number the arch too
        from pointmamba import Segmenter

        adult = Segmenter(device="cpu", infer={"child_priors": False})(path, dentition="mixed")
        np.testing.assert_array_equal(auto.labels, adult.labels)
    # the review page carries each tooth's other number for its hover text
    from pointmamba.report import ReviewPage

    page = ReviewPage()
    page.add(auto)
    page.write(tmp_path / "index.html")
    text = "".join(p.read_text(errors="replace") for p in page.written)
    assert '"alternative":' in text and "other dentition" in text


def test_the_constructor_sets_the_dentition_and_a_call_overrides_it(shipped) -> None:
    from pointmamba import Segmenter

    path = _real("IOS017_upper")
    mixed = Segmenter(device="cpu", dentition="mixed")
    assert mixed.infer["dentition"] == "mixed"
    assert mixed(path).to_json()["confidence"]["dentition"]["used"] == "mixed"
    assert mixed(path, dentition="permanent").to_json()["confidence"]["dentition"]["used"] == "permanent"
    with pytest.raises(ValueError, match="unknown dentition 'adult'"):
        Segmenter(device="cpu", dentition="adult")


def test_predict_takes_the_dentition_and_the_dentition_file(tmp_path: Path) -> None:
    upper, lower = _real("IOS017_upper"), _real("IOS009_lower")
    table = tmp_path / "dentition.csv"
    table.write_text("scan,dentition\nIOS017_upper,permanent\nIOS009_lower,mixed\n")
    code, _, err = run_tool("predict", str(upper), str(lower), "--out", str(tmp_path / "file"),
                            "--dentition-file", str(table))
    assert code == 0, err
    first = json.loads((tmp_path / "file" / "IOS017_upper.json").read_text())
    second = json.loads((tmp_path / "file" / "IOS009_lower.json").read_text())
    assert first["confidence"]["dentition"]["used"] == "permanent" and 15 in first["labels"] and 14 not in first["labels"]
    # IOS009_lower is a child's arch: 33, primary molars 34, 35, first molar 36 on both sides
    assert second["confidence"]["dentition"]["used"] == "mixed" and {34, 35, 36, 44, 45, 46} <= set(second["labels"])
    assert 37 not in second["labels"] and 47 not in second["labels"]
    import csv

    table = {r["output"]: r for r in csv.DictReader((tmp_path / "file" / "summary.csv").open())}
    assert table["IOS017_upper"]["dentition"] == "permanent (given)" and table["IOS009_lower"]["dentition"] == "mixed (given)"
    code, _, err = run_tool("predict", str(upper), "--out", str(tmp_path / "flag"), "--dentition", "mixed")
    assert code == 0, err
    doc = json.loads((tmp_path / "flag" / "IOS017_upper.json").read_text())
    assert doc["confidence"]["dentition"]["used"] == "mixed" and 14 in doc["labels"]


def test_the_test_summary_reports_the_three_groups_of_the_pattern() -> None:
    from pointmamba.evaluation.scan_summary import summarize, summary_table

    def row(name, miou, pattern, given=None, review=False):
        return {"name": name, "source": "s", "jaw": "lower", "few_teeth": False, "third_molar": False,
                "lone_premolar": pattern, "miou": miou, "miou_given": given, "review": review,
                "review_given": False if pattern else None}

    rows = [row("a", 0.9, False), row("b", 0.95, False, review=True), row("c", 0.4, True, 0.9, True),
            row("d", 0.5, True, 0.8, True)]
    summary = summarize(rows)
    assert summary["no lone premolar side"]["mean_scan_miou"] == pytest.approx(0.925)
    assert summary["lone premolar side"]["mean_scan_miou"] == pytest.approx(0.45)
    assert summary["lone premolar side"]["flagged"] == 1.0 and summary["no lone premolar side"]["flagged"] == 0.5
    assert summary["lone premolar side, dentition given"]["mean_scan_miou"] == pytest.approx(0.85)
    assert summary["lone premolar side, dentition given"]["flagged"] == 0.0  # the given run's own flag
    assert "| lone premolar side, dentition given | 2 | 0.8500 |" in summary_table(summary)


def test_auto_keeps_a_side_the_network_reads_neither_way_and_flags_it() -> None:
    """Canine, one premolar-sized tooth the network calls 4, then molars 6, 7 (a second premolar missing):
    neither reading. ``auto`` keeps the numbering as the network and the arch priors give it, flags the scan
    naming both readings and offers the cheaper one as each tooth's alternative; a given dentition forces it."""
    scan, classes, probs = _pattern_arch()
    called = classes.copy()
    for true, said in ((35, 34), (45, 44)):
        called[scan.labels == true] = fdi_to_class(np.array([said]), "lower", 17)[0]
    probs = np.full((len(called), 17), 0.2 / 16)
    probs[np.arange(len(called)), called] = 0.8
    plain, _ = number_teeth(called, probs, scan.vertices, scan.faces, "lower", 17)
    numbers = _numbers(scan.labels, class_to_fdi(plain, "lower", 17))
    assert (numbers[35], numbers[36], numbers[45], numbers[46]) == (34, 36, 44, 46), numbers  # neither reading
    labels, numbering = number_teeth(called, probs, scan.vertices, scan.faces, "lower", 17, dentition="auto")
    np.testing.assert_array_equal(labels, plain)
    reading = numbering.dentition
    assert reading.neither and reading.used is None and reading.alternative is not None
    instances, iprobs = numbered_instances(numbering, labels, 17, "lower")
    conf = scan_confidence(probs, labels, instances, "lower", scan.vertices, iprobs, dentition=reading)
    assert conf.review and "kept as numbered" in dict(conf.findings)["dentition"]
    assert conf.to_json()["dentition"]["used"] == "as numbered"
    assert any(t.alternative for t in conf.teeth)
    forced, _ = number_teeth(called, probs, scan.vertices, scan.faces, "lower", 17, dentition="permanent")
    assert _numbers(scan.labels, class_to_fdi(forced, "lower", 17)) == PERMANENT
