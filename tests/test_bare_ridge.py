"""Teeth invented on a bare ridge: the flattened arch, the counts of the check, the "no tooth" evidence in
the instance numbering (exact against brute force in float64: tests/test_tooth_shape.py; off or sure of
every tooth changes nothing, a
phantom the shape calls ridge becomes gingiva while real teeth keep their numbers), the classifier's
"no tooth" output in the model file (an older file calls everything a tooth), and the user's path:
config -> tools/train_tooth_shape.py -> tools/bare_ridge_check.py / Segmenter with infer.tooth_weight."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.data import load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import apply_transform
from pointmamba.evaluation.arch_priors import default_priors
from pointmamba.evaluation.bare_ridge import kept_teeth, ridge_arch, ridge_result, ridge_summary
from pointmamba.evaluation.tooth_numbering import number_instances
from pointmamba.evaluation.tooth_shape import (crop_probabilities, load_shape_model, position_probabilities,
                                               ridge_crops, save_shape_model, scan_crops)
from pointmamba.models.tooth_shape import ToothShapeNet

from test_tooth_numbering import _random_arch

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "MSN021" / "MSN021_lower.obj"


@pytest.fixture(scope="module")
def scan():
    return load_scan(SAMPLE)


def test_ridge_arch_flattens_all_but_the_kept_teeth(scan) -> None:
    keep = kept_teeth(scan.labels, 2, scan.name)
    assert len(keep) == 2 and np.array_equal(keep, kept_teeth(scan.labels, 2, scan.name))  # seeded by the name
    assert not np.array_equal(keep, kept_teeth(scan.labels, 2, "another_lower"))
    reduced, flat = ridge_arch(scan, keep)
    assert sorted(np.unique(reduced.labels[reduced.labels > 0]).tolist()) == keep.tolist()
    np.testing.assert_array_equal(flat, (scan.labels > 0) & ~np.isin(scan.labels, keep))
    transform = preprocess_scan(scan)["transform"]
    before, after = (apply_transform(s.vertices.astype(np.float64), transform) for s in (scan, reduced))
    # the crowns came down onto the gum line (1.8-5.8 mm on average here), the kept teeth untouched
    for t in np.unique(scan.labels[flat]):
        on = scan.labels == t
        assert after[on, 2].mean() < before[on, 2].mean() - 1.5
    np.testing.assert_allclose(after[~flat], before[~flat], atol=1e-6)
    none, flat_all = ridge_arch(scan, kept_teeth(scan.labels, 0, scan.name))
    assert not (none.labels > 0).any() and flat_all.sum() == (scan.labels > 0).sum()


def test_ridge_result_counts_phantoms_ridge_and_kept_teeth(scan) -> None:
    keep = np.array([31, 47])
    reduced, flat = ridge_arch(scan, keep)
    predicted = reduced.labels.copy()
    phantom = np.flatnonzero(scan.labels == 35)
    predicted[phantom] = 35  # a tooth drawn on 35's flattened place
    predicted[scan.labels == 31] = 41  # a kept tooth with the wrong number
    # a tooth number spilling a little onto the ridge is no phantom: most of it is the kept tooth
    spill = np.flatnonzero(scan.labels == 36)[:5]
    predicted[spill] = 47
    result = ridge_result(scan.name, reduced.labels, flat, predicted, keep)
    assert result.phantoms == [35] and result.kept_right == 1
    assert result.ridge_called_tooth == pytest.approx((len(phantom) + 5) / flat.sum())
    summary = ridge_summary([result, ridge_result("b", reduced.labels, flat, reduced.labels, keep)])
    assert summary["arches_without_phantom"] == 1 and summary["phantom_teeth"] == 1
    assert summary["kept_teeth"] == 4 and summary["kept_teeth_right"] == 3


def test_tooth_evidence_off_or_sure_of_every_tooth_changes_nothing() -> None:
    rng = np.random.default_rng(8)
    instances = _random_arch(rng, 5)
    gum = rng.uniform(0.02, 0.6, 5)
    evidence = rng.dirichlet(np.full(16, 0.3), 5) * (1 - gum[:, None])
    priors = default_priors("upper")
    old = number_instances(instances, evidence, gum, priors)
    off = number_instances(instances, evidence, gum, priors, tooth_evidence=rng.uniform(0, 1, 5), tooth_weight=0.0)
    assert off.options == old.options and off.cost == old.cost
    np.testing.assert_array_equal(off.posterior, old.posterior)
    # sure it is a tooth everywhere (p = 1): nothing changes, bit for bit (the term is one-sided)
    sure = number_instances(instances, evidence, gum, priors, tooth_evidence=np.ones(5), tooth_weight=3.0)
    assert sure.options == old.options and sure.cost == old.cost
    np.testing.assert_array_equal(sure.posterior, old.posterior)


def test_a_phantom_the_shape_calls_ridge_becomes_gingiva(scan) -> None:
    """Five teeth of a real arch the network is sure of, the middle one drawn on bare ridge: with the
    shape's "no tooth" it is gingiva, and the real teeth keep their numbers."""
    from pointmamba.data import fdi_to_class
    from pointmamba.evaluation.tooth_numbering import arch_classes, measure_instances

    aligned = apply_transform(scan.vertices.astype(np.float64), preprocess_scan(scan)["transform"])
    teeth = [42, 43, 44, 45, 46]
    instances, _ = measure_instances(aligned, [np.flatnonzero(scan.labels == t) for t in teeth])
    cls = arch_classes(17, scan.jaw).tolist()
    truth = [cls.index(int(fdi_to_class(np.array([teeth[i.key]]), scan.jaw, 17)[0])) for i in instances]
    evidence = np.full((5, 16), 0.05 / 15)
    evidence[np.arange(5), truth] = 0.9
    gum = np.full(5, 0.05)
    priors = default_priors(scan.jaw)
    plain = number_instances(instances, evidence, gum, priors)
    assert [o and o[0] for o in plain.options] == truth
    tooth = np.full(5, 0.99)
    tooth[2] = 0.01
    shaped = number_instances(instances, evidence, gum, priors, tooth_evidence=tooth, tooth_weight=4.0)
    assert shaped.options[2] is None and shaped.posterior[2, 0] > 0.9
    assert [o and o[0] for k, o in enumerate(shaped.options) if k != 2] == [a for k, a in enumerate(truth) if k != 2]


def test_no_tooth_output_round_trip_and_older_files(tmp_path: Path, scan) -> None:
    torch.manual_seed(0)
    crops = np.random.default_rng(0).normal(size=(5, 256, 6)).astype(np.float32)
    model = ToothShapeNet(width=16, no_tooth=True).eval()
    save_shape_model(tmp_path / "ridge.pth", model, {})
    loaded = load_shape_model(tmp_path / "ridge.pth")
    assert loaded.no_tooth
    positions, tooth = crop_probabilities(loaded, crops, "lower")
    np.testing.assert_array_equal(tooth, crop_probabilities(model, crops, "lower")[1])
    np.testing.assert_allclose(positions.sum(1), 1.0)  # positions given "tooth"
    assert ((tooth > 0) & (tooth < 1)).all()
    # float64 reference: p(tooth) = 1 - softmax over the nine outputs at "no tooth"
    with torch.no_grad():
        logits = model(torch.from_numpy(crops), torch.zeros(5)).double()
    np.testing.assert_allclose(tooth, 1 - torch.softmax(logits, 1)[:, 8].numpy(), atol=1e-12)
    np.testing.assert_allclose(positions, torch.softmax(logits[:, :8], 1).numpy(), atol=1e-12)
    # a file of before (eight outputs, no "no_tooth" key) loads and calls every crop a tooth
    old = ToothShapeNet(width=16).eval()
    save_shape_model(tmp_path / "old.pth", old, {})
    state = torch.load(tmp_path / "old.pth", weights_only=True)
    del state["no_tooth"]
    torch.save(state, tmp_path / "old.pth")
    older = load_shape_model(tmp_path / "old.pth")
    assert not older.no_tooth
    np.testing.assert_array_equal(crop_probabilities(older, crops, "upper")[1], np.ones(5))
    np.testing.assert_array_equal(position_probabilities(older, crops, "upper"),
                                  position_probabilities(old, crops, "upper"))
    # ridge crops: seeded, and bare ridge has no crown where a tooth crop has one
    aligned = apply_transform(scan.vertices.astype(np.float64), preprocess_scan(scan)["transform"])
    ridge = ridge_crops(aligned, scan.faces, scan.labels, seed=4)
    np.testing.assert_array_equal(ridge, ridge_crops(aligned, scan.faces, scan.labels, seed=4))
    teeth, _ = scan_crops(aligned, scan.faces, scan.labels, scan.jaw)
    assert len(ridge) >= len(teeth) - 2 and ridge.shape[1:] == teeth.shape[1:]
    assert not np.array_equal(ridge, ridge_crops(aligned, scan.faces, scan.labels, seed=5))


def test_train_with_ridge_then_check_and_segment(tmp_path: Path) -> None:
    """The user's path: config -> tools/train_tooth_shape.py (with "no tooth") -> tools/bare_ridge_check.py
    at two weights -> a Segmenter with infer.tooth_weight; the clear errors on the way."""
    from support.tiny import TINY_MODEL, untrained_checkpoint, write_synthetic

    root = write_synthetic(tmp_path / "syn")
    out = tmp_path / "shape.pth"
    base = [sys.executable, str(ROOT / "tools" / "train_tooth_shape.py"), "--config", str(ROOT / "configs" / "base.yaml"),
            "--epochs", "2", "--copies", "1", "--width", "16", "--set", f"data.root={root}",
            "data.train_names=[SYN00000, SYN00001]", "data.val_names=[SYN00002]", f"data.cache_dir={root / '.cache'}"]
    run = subprocess.run(base + ["--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "bare-ridge crops called no tooth" in run.stdout and load_shape_model(out).no_tooth
    plain = tmp_path / "plain.pth"
    run = subprocess.run(base + ["--out", str(plain), "--ridge-share", "0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not load_shape_model(plain).no_tooth and "no tooth" not in run.stdout

    ckpt = untrained_checkpoint(tmp_path / "net.pth")
    check = [sys.executable, str(ROOT / "tools" / "bare_ridge_check.py"), "--config", str(ROOT / "configs" / "base.yaml"),
             "--checkpoint", str(ckpt), "--keep", "0", "2", "--tooth-weights", "0", "50", "--out", str(tmp_path / "ridge"),
             "--set", *TINY_MODEL, "data.grid_size=0.6", f"data.root={root}", "data.val_names=[SYN00002]",
             f"data.cache_dir={root / '.cache'}", f"infer.shape_model={out}", "infer.mirror_tta=false"]
    run = subprocess.run(check, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = (tmp_path / "ridge" / "arches.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 2  # header, 2 jaws x 2 keep counts x 2 weights
    assert "| 2 | 50.0 |" in (tmp_path / "ridge" / "summary.md").read_text()
    bad = subprocess.run(check[:-2] + [f"infer.shape_model={plain}", "infer.mirror_tta=false", "--out",
                                       str(tmp_path / "ridge2")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "plain.pth: infer.tooth_weight > 0 needs a tooth-shape network" in bad.stderr

    from pointmamba import Segmenter

    scan = load_scan(root / "SYN00002" / "SYN00002_upper.obj")
    # a 2-epoch classifier may be sure of every piece (its bits depend on the thread count): the Segmenter
    # is checked with one that says p(tooth) = 1/2 for every crop, so the term must move the numbering
    half = tmp_path / "half.pth"
    net = ToothShapeNet(width=16, no_tooth=True).eval()
    last = net.head[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0] * 8 + [float(np.log(8.0))]))
    save_shape_model(half, net, {})
    np.testing.assert_allclose(crop_probabilities(load_shape_model(half), np.zeros((2, 256, 6), np.float32),
                                                  "upper")[1], 0.5, atol=1e-12)
    off = Segmenter(ckpt, infer={"mirror_tta": False, "shape_model": str(half)})(scan)
    strong = Segmenter(ckpt, infer={"mirror_tta": False, "shape_model": str(half), "tooth_weight": 50.0})(scan)
    assert (off.labels > 0).any()
    conf = [[t.confidence for t in r.confidence.teeth] for r in (off, strong)]
    assert conf[0] != conf[1]  # the "no tooth" evidence took part
    with pytest.raises(ValueError, match="infer.tooth_weight > 0 needs a tooth-shape network"):
        Segmenter(ckpt, infer={"tooth_weight": 1.0})(scan)
    # packed into a model file, the stored weight is used unless infer says otherwise
    packed = tmp_path / "packed.pth"
    export = [sys.executable, str(ROOT / "tools" / "export_model.py"), str(ckpt), "--out", str(packed),
              "--tooth-shape", str(half), "--tooth-weight", "50"]
    run = subprocess.run(export, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    from pointmamba.evaluation.inference import shape_setting

    model, weight, tooth = shape_setting({"shape_model": str(packed), "shape_weight": None, "tooth_weight": None})
    assert model is not None and weight == 0.0 and tooth == 50.0
    stored = Segmenter(packed, infer={"mirror_tta": False})(scan)
    zero = Segmenter(packed, infer={"mirror_tta": False, "tooth_weight": 0.0})(scan)
    assert [t.confidence for t in stored.confidence.teeth] != [t.confidence for t in zero.confidence.teeth]
    refused = subprocess.run(export[:5] + ["--tooth-shape", str(plain), "--tooth-weight", "1", "--overwrite"],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "needs a tooth-shape network with a 'no tooth' output" in refused.stderr
