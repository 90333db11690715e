"""Partial scans of a labelled arch (one side, the other side, the front teeth): which teeth each keeps,
the mesh it makes, the summary's figures, and a real arch cut and segmented by the shipped model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import load_scan
from pointmamba.evaluation.partial_scans import (PARTIAL_VARIANTS, PartialResult, partial_scan, partial_summary,
                                                 score_partial, variant_teeth)

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


@pytest.fixture(scope="module")
def scan():
    return load_scan(SAMPLES / "MSN022" / "MSN022_upper.obj")


def test_variant_teeth_by_jaw() -> None:
    upper = np.array([0, 11, 12, 13, 14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28])
    assert variant_teeth(upper, "upper", "side_right").tolist() == [11, 12, 13, 14, 15, 16, 17, 21]
    assert variant_teeth(upper, "upper", "side_left").tolist() == [11, 21, 22, 23, 24, 25, 26, 27, 28]
    assert variant_teeth(upper, "upper", "front").tolist() == [11, 12, 13, 14, 21, 22, 23, 24]
    lower = upper + np.where(upper > 0, 20, 0)  # 31.. on the left, 41.. on the right
    assert variant_teeth(lower, "lower", "side_right").tolist() == [31, 41, 42, 43, 44, 45, 46, 47, 48]
    with pytest.raises(ValueError, match="variant must be one of"):
        variant_teeth(upper, "upper", "quadrant")
    with pytest.raises(ValueError, match="needs the jaw"):
        variant_teeth(upper, None, "front")


def test_partial_scan_is_the_teeth_and_their_gingiva(scan) -> None:
    from scipy.spatial import cKDTree

    for variant in PARTIAL_VARIANTS:
        part = partial_scan(scan, variant)
        want = variant_teeth(scan.labels, scan.jaw, variant)
        assert np.unique(part.labels[part.labels > 0]).tolist() == want.tolist()
        assert part.jaw == scan.jaw and part.id_patient == scan.id_patient
        # every vertex of the kept teeth, and no other tooth's
        for t in want:
            assert (part.labels == t).sum() == (scan.labels == t).sum()
        # its faces are the scan's faces between kept vertices, renumbered
        assert part.faces.max() < part.num_vertices and part.num_faces > 0
        tree = cKDTree(scan.vertices)
        d, idx = tree.query(part.vertices)
        assert d.max() == 0 and (scan.labels[idx] == part.labels).all()
        original = {tuple(sorted(f)) for f in idx[part.faces].tolist()}
        assert original <= {tuple(sorted(f)) for f in scan.faces.tolist()}
        # the gingiva kept is the gingiva whose nearest tooth vertex (in the whole scan) is a kept tooth's
        teeth = scan.labels > 0
        nearest = scan.labels[teeth][cKDTree(scan.vertices[teeth]).query(scan.vertices)[1]]
        gum_kept = (scan.labels == 0) & np.isin(nearest, want)
        assert 0 < gum_kept.sum() < (scan.labels == 0).sum() and (part.labels == 0).sum() == gum_kept.sum()
    few = load_scan(SAMPLES / "MSN022" / "MSN022_upper.obj")
    few.labels = np.where(np.isin(few.labels, [11, 21, 22]), few.labels, 0)
    assert partial_scan(few, "side_right") is None and partial_scan(few, "side_left") is not None  # 11 + 21: too few


def test_summary_figures() -> None:
    rows = [PartialResult("a", "front", 10, 4, m, 0.9, flag, "", {}) for m, flag in
            ((0.95, False), (0.9, True), (0.5, True), (0.3, False))]
    s = partial_summary(rows)
    assert set(s) == {"all", "front"} and s["all"] == s["front"]
    e = s["all"]
    assert e["scans"] == 4 and e["mean"] == pytest.approx(0.6625) and e["kept"] == 0.5 and e["flagged"] == 0.5
    assert e["below_kept"] == 2 and e["below_kept_flagged"] == 1 and e["kept_flagged"] == 1
    assert e["p10"] == pytest.approx(np.percentile([0.95, 0.9, 0.5, 0.3], 10))
    assert partial_summary([]) == {}


def test_a_real_partial_scan_through_the_shipped_model(scan) -> None:
    import torch

    from pointmamba.checkpoints.shipped import resolve_checkpoint
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.data import fdi_to_class
    from pointmamba.inference.pipeline import load_trained, segment_scan

    model, cfg = load_trained(resolve_checkpoint(None), torch.device("cpu"))
    part = partial_scan(scan, "front")
    seen, preds = [], []

    def predict(s):
        seen.append(s)
        preds.append(segment_scan(model, s, cfg, torch.device("cpu")))
        return preds[-1]

    r = score_partial(scan.name, "front", part, predict, cfg["data"]["num_classes"])
    assert seen == [part] and r.vertices == part.num_vertices and r.teeth == 8
    pred = preds[0]  # scored again below, independently of score_partial
    cm = ConfusionMatrix(cfg["data"]["num_classes"]).update(pred.classes, fdi_to_class(part.labels, "upper", 17))
    assert r.miou == pytest.approx(cm.miou()) and 0.0 <= r.miou <= 1.0
    for t, p in r.wrong.items():  # each wrong tooth: most of its vertices carry another number
        vals, counts = np.unique(pred.fdi[part.labels == t], return_counts=True)
        assert vals[counts.argmax()] == p != t
    assert isinstance(r.review, bool)


def test_the_study_tool_on_a_sample_arch(tmp_path) -> None:
    """``python -m pointmamba.research.partial_scans`` on a sample with the shipped model: one row per variant,
    the summary's counts from those rows; a split scan without labels is a one-line error naming it."""
    import csv
    import json
    import shutil

    from support.tools import run_tool

    config = Path(__file__).resolve().parents[1] / "configs" / "shared_data_recipe_all.yaml"  # the shipped model's
    args = ("--config", config, "--split", "val", "--no-progress", "--set", f"data.root={SAMPLES}",
            "data.position_label_roots=[]", "data.val_names=[MSN021_lower]")
    code, out, err = run_tool("partial_scans", *args, "--out", tmp_path / "p")
    assert code == 0, err[-2000:]
    with open(tmp_path / "p" / "partial_scans.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["scan"], r["variant"]) for r in rows] == [("MSN021_lower", v) for v in PARTIAL_VARIANTS]
    assert [int(r["teeth"]) for r in rows] == [8, 8, 8]
    summary = json.loads((tmp_path / "p" / "partial_scans.json").read_text())["summary"]
    assert summary["all"]["scans"] == 3
    assert summary["all"]["mean"] == pytest.approx(np.mean([float(r["miou"]) for r in rows]))
    assert summary["all"]["below_kept"] == sum(float(r["miou"]) < 0.8 for r in rows)
    assert "| front | 1 |" in out

    bare = tmp_path / "bare" / "MSN021"
    bare.mkdir(parents=True)
    shutil.copy(SAMPLES / "MSN021" / "MSN021_lower.obj", bare)
    code, out, err = run_tool("partial_scans", *args[:-3], f"data.root={tmp_path / 'bare'}", "data.position_label_roots=[]",
                              "data.val_names=[MSN021_lower]", "--out", tmp_path / "q")
    assert code != 0 and "MSN021_lower.obj" in err and "label" in err
    assert not (tmp_path / "q").exists()
