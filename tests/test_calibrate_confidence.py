"""python -m pointmamba.research.calibrate_confidence: the flagged / unflagged table, its counts, the tooth table and the plot."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import read_labels
from pointmamba.data.teeth3ds import instances_from_labels

from support.tiny import untrained_checkpoint
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


def test_calibration_counts_wrong_teeth_and_scans(scans_dir: Path, tmp_path: Path) -> None:
    ckpt = untrained_checkpoint(tmp_path / "tiny.pth")
    for patient in ("MSN001", "MSN003"):
        shutil.copytree(scans_dir / patient, tmp_path / "val" / patient)
    code, out, err = run_tool("calibrate_confidence", tmp_path / "val", "--checkpoint", ckpt, "--out", tmp_path / "c",
                              "--set", "infer.graph_cut=false")
    assert code == 0, err
    report = json.loads((tmp_path / "c" / "calibration.json").read_text())
    table = report["table"]
    assert table["flagged"]["scans"] + table["unflagged"]["scans"] == 4
    with open(tmp_path / "c" / "teeth.csv", newline="") as fh:
        teeth = list(csv.DictReader(fh))
    assert len(teeth) == report["teeth"]["count"] and sum(t["wrong"] == "True" for t in teeth) == report["teeth"]["wrong"]
    assert all((t["wrong"] == "True") == (t["fdi"] != t["reference"]) for t in teeth)
    with open(tmp_path / "c" / "scans.csv", newline="") as fh:
        scans = list(csv.DictReader(fh))
    for s in scans:  # a scan is wrong when one of its teeth is
        assert (s["wrong"] == "True") == any(t["wrong"] == "True" for t in teeth if t["scan"] == s["scan"])
    assert sum(s["wrong"] == "True" for s in scans) == table["flagged"]["wrong"] + table["unflagged"]["wrong"]
    assert report["rules"]["review_below"] == 0.65
    row = next(r for r in report["sweep"] if r["review_below"] == 0.65)
    assert row["flagged_scans"] == table["flagged"]["scans"]
    assert sum(r["teeth"] for r in report["reliability"]) == report["teeth"]["count"]
    assert (tmp_path / "c" / "reliability.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "c" / "calibration.md").read_text()
    assert "most common reference label on its vertices" in md and "| flagged for review |" in md
    assert f"flagged: {table['flagged']['wrong']}/{table['flagged']['scans']} wrong" in out

    (tmp_path / "val" / "MSN003" / "MSN003_upper.json").unlink()
    code, _, err = run_tool("calibrate_confidence", tmp_path / "val", "--checkpoint", ckpt, "--out", tmp_path / "d")
    assert code == 2 and "MSN003_upper.obj: no label file MSN003_upper.json beside it" in err
    assert not (tmp_path / "d").exists()


def test_truth_matches_the_reference_labels_of_a_real_scan(scans_dir: Path) -> None:
    from pointmamba.inference.confidence import tooth_truth

    ref = read_labels(scans_dir / "MSN001" / "MSN001_lower.json")
    instances = instances_from_labels(ref.labels)
    truth = tooth_truth(instances, ref.labels)
    assert sorted(truth.values()) == sorted(set(ref.labels.tolist()) - {0})
    renamed = np.where(ref.labels == 31, 48, ref.labels)  # tooth 31 predicted as 48: the last instance
    instances = instances_from_labels(renamed)
    assert tooth_truth(instances, ref.labels)[int(instances.max())] == 31


def test_the_table_counts_the_checks_on_the_whole_arch_as_the_tools_flag_does() -> None:
    """A scan flagged only by a check on the whole arch (a tooth lost at the end) counts as flagged, as
    tools/predict.py shows it; the confidence-only row leaves such checks out."""
    import numpy as np

    from pointmamba.inference.confidence import ReviewRules, ScanConfidence, ToothConfidence
    from pointmamba.research.calibrate_confidence import flagged

    lost = ("lost_end", "7.0 mm of tooth-like surface behind 16 left as gingiva")
    teeth = [ToothConfidence(fdi, k + 1, 0.99, fdi + 1, 0.01, 100) for k, fdi in enumerate((11, 12, 13, 21, 22, 23))]
    scan = {"confidence": ScanConfidence(teeth, [lost]), "jaw": "upper", "aligned": None,
            "instances": np.repeat(np.arange(1, 7), 100), "arch_findings": [lost]}
    assert flagged(scan, ReviewRules()) == [lost]
    assert flagged(scan, ReviewRules(), whole_arch=False) == []
    assert flagged({**scan, "arch_findings": []}, ReviewRules()) == []


def test_the_tooth_auc_is_reported_from_the_confidence_and_from_the_posteriors() -> None:
    """A wrong tooth at posterior 0.99 in a flagged scan: its posterior outranks three right 0.95 teeth of an
    unflagged scan (AUC 0.125 with the tie), its lowered confidence 0.881 does not (0.875)."""
    from pointmamba.inference.confidence import ReviewRules, ScanConfidence, ToothConfidence
    from pointmamba.research.calibrate_confidence import summarize

    lost = ("lost_end", "7.0 mm of tooth-like surface behind 16 left as gingiva")
    sure = [ToothConfidence(fdi, k + 1, 0.95, fdi + 1, 0.05, 100) for k, fdi in enumerate((11, 12, 13))]
    doubted = [ToothConfidence(fdi, k + 1, 0.99 * 0.89, fdi + 1, 0.01, 100, posterior=0.99) for k, fdi in enumerate((21, 22))]

    def record(name, teeth, wrong, findings):
        rows = [{"scan": name, "fdi": t.fdi, "wrong": w, "confidence": t.confidence, "posterior": t.number_posterior}
                for t, w in zip(teeth, wrong)]
        return {"name": name, "teeth": rows, "wrong": any(wrong), "missed": [], "jaw": "upper", "aligned": None,
                "confidence": ScanConfidence(teeth, findings), "instances": np.repeat(np.arange(1, len(teeth) + 1), 100),
                "arch_findings": findings}

    scans = [record("a", sure, [False] * 3, []), record("b", doubted, [True, False], [lost])]
    report = summarize(scans, ReviewRules(), bins=10)
    assert report["ranking_auc_posterior"] == pytest.approx(0.125)
    assert report["ranking_auc"] == pytest.approx(0.875)
