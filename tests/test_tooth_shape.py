"""The tooth-shape evidence: crops in a tooth's own frame (invariant to where the scan lies and to which
side the tooth is on), area-weighted sampling, the DP with shape evidence (exact against brute force in
float64; off or uniform, the old numbering bit for bit; a counting error the shape contradicts is
mended), the model file's round trip and errors, and the tool's path: config -> train -> infer."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import apply_transform
from pointmamba.evaluation.arch_priors import LOG_EPS, default_priors
from pointmamba.evaluation.tooth_numbering import measure_instances, number_instances, number_teeth
from pointmamba.evaluation.tooth_shape import (arch_shape_evidence, load_shape_model, position_probabilities,
                                               sample_surface, save_shape_model, scan_crops, tooth_crop,
                                               tooth_transform)
from pointmamba.models.tooth_shape import ToothShapeNet

from test_tooth_numbering import OPTIONS, _path_cost, _random_arch

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"


def _sample(name: str = "MSN021_lower"):
    scan = load_scan(SAMPLES / name.split("_")[0] / f"{name}.obj")
    aligned = apply_transform(scan.vertices.astype(np.float64), preprocess_scan(scan)["transform"])
    return scan, aligned


def _turn(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


def test_a_crop_does_not_move_with_the_scan() -> None:
    """Turned about the occlusal axis and shifted, every tooth's crop is the same (same seed)."""
    scan, aligned = _sample()
    crops, positions = scan_crops(aligned, scan.faces, scan.labels, scan.jaw, seed=3)
    moved = aligned @ _turn(37.0).T + np.array([12.0, -5.0, 3.0])
    # the arch frame's centre is found from the teeth, so it moves with them
    crops2, positions2 = scan_crops(moved, scan.faces, scan.labels, scan.jaw, seed=3)
    np.testing.assert_array_equal(positions, positions2)
    np.testing.assert_allclose(crops, crops2, atol=1e-4)
    assert sorted(positions.tolist()) == sorted((np.unique(scan.labels[scan.labels > 0]) % 10).tolist())


def test_a_tooth_and_its_mirror_image_on_the_other_side_crop_alike() -> None:
    scan, aligned = _sample()
    tooth = np.flatnonzero(scan.labels == 36)
    flip = np.diag([-1.0, 1.0, 1.0])
    tangent, centre = np.array([0.8, 0.6]), np.array([0.5, -10.0])
    origin, rot = tooth_transform(aligned, tooth, tangent, centre, -1)
    # mirrored, the arch still runs from its -x end to its +x end: the tangent's y flips, not its x
    origin_m, rot_m = tooth_transform(aligned @ flip, tooth, tangent * [1, -1], centre * [-1, 1], +1)
    np.testing.assert_allclose((aligned[tooth] - origin) @ rot.T, (aligned[tooth] @ flip - origin_m) @ rot_m.T,
                               atol=1e-9)
    # the crop: centred on the tooth, unit normals, sampled over its surface only
    crop = tooth_crop(aligned, scan.faces, tooth, tangent, centre, -1, np.random.default_rng(0))
    assert np.abs(crop[:, :3].mean(0)).max() < 1.0 and np.abs(crop[:, :2]).max() < 8.0
    np.testing.assert_allclose(np.linalg.norm(crop[:, 3:], axis=1), 1.0, atol=1e-5)
    # the same tooth as a +x side tooth is its mirror image: distal (x) flips, nothing else
    other = tooth_crop(aligned, scan.faces, tooth, tangent, centre, +1, np.random.default_rng(0))
    np.testing.assert_allclose(other[:, [0, 3]], -crop[:, [0, 3]], atol=1e-5)
    np.testing.assert_allclose(other[:, [1, 2, 4, 5]], crop[:, [1, 2, 4, 5]], atol=1e-5)


def test_surface_samples_follow_area_not_vertices() -> None:
    # two triangles, areas 1 and 3: the small one holds 3 of the 6 vertices' weight in a vertex sampler
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0], [10, 0, 0], [13, 0, 0], [10, 2, 0]], dtype=np.float64)
    f = np.array([[0, 1, 2], [3, 4, 5]])
    pts, nrm = sample_surface(v, f, np.arange(6), 20000, np.random.default_rng(0))
    share_big = (pts[:, 0] >= 10).mean()
    assert share_big == pytest.approx(0.75, abs=0.015)
    np.testing.assert_allclose(np.abs(nrm[:, 2]), 1.0)
    # a piece with no faces inside it: its vertices, zero normals (no made-up direction)
    pts, nrm = sample_surface(v, f, np.array([0, 3]), 10, np.random.default_rng(0))
    assert set(map(tuple, pts.tolist())) <= {(0.0, 0.0, 0.0), (10.0, 0.0, 0.0)} and not nrm.any()


def _shape_cost(shape: np.ndarray, weight: float, options) -> float:
    log_s = np.log(np.maximum(shape, LOG_EPS))
    return sum(weight * (log_s[i].max() - (log_s[i, o[0]] + log_s[i, o[1]]) / 2) for i, o in enumerate(options)
               if o is not None)


@pytest.mark.parametrize("seed, tooth_weight", [(0, 0.0), (1, 1.7), (2, 0.0), (3, 1.7)])
def test_dp_with_shape_evidence_is_exact(seed: int, tooth_weight: float) -> None:
    """Brute force over every numbering in float64: the DP's minimum and posteriors include the shape term,
    and the "no tooth" term (tooth options pay -w log p(tooth), gingiva nothing more)."""
    rng = np.random.default_rng(100 + seed)
    n = 2 if seed < 2 else 3
    instances = _random_arch(rng, n)
    gum = rng.uniform(0.02, 0.6, n)
    evidence = rng.dirichlet(np.full(16, 0.3), n) * (1 - gum[:, None])
    shape = arch_shape_evidence(rng.dirichlet(np.full(8, 0.5), n), rng.dirichlet(np.full(8, 0.5), n))
    tooth = rng.uniform(0.02, 0.98, n)
    priors, weight, temperature = default_priors("upper"), 1.3, 1.4
    result = number_instances(instances, evidence, gum, priors, temperature, shape, weight, tooth, tooth_weight)
    costs = {o: _path_cost(instances, evidence, gum, priors, o) + _shape_cost(shape, weight, o)
             + sum(-tooth_weight * np.log(tooth[i]) for i, opt in enumerate(o) if opt is not None)
             for o in itertools.product(OPTIONS, repeat=n)}
    best = min(costs, key=costs.get)
    assert result.cost == pytest.approx(costs[best], abs=1e-9)
    finite = {k: v for k, v in costs.items() if np.isfinite(v)}
    w = np.exp(-(np.array(list(finite.values())) - min(finite.values())) / temperature)
    w /= w.sum()
    expected = np.zeros((n, 17))
    for p, opts in zip(w, finite):
        for i, opt in enumerate(opts):
            if opt is None:
                expected[i, 0] += p
            else:
                expected[i, 1 + opt[0]:2 + opt[1]] += p
    np.testing.assert_allclose(result.posterior, expected, atol=1e-9)


def test_shape_evidence_off_or_uniform_changes_nothing() -> None:
    rng = np.random.default_rng(7)
    instances = _random_arch(rng, 5)
    gum = rng.uniform(0.02, 0.6, 5)
    evidence = rng.dirichlet(np.full(16, 0.3), 5) * (1 - gum[:, None])
    priors = default_priors("lower")
    old = number_instances(instances, evidence, gum, priors)
    for shape, weight in ((rng.dirichlet(np.ones(8), 5), 0.0), (np.full((5, 8), 1 / 8), 2.0)):
        new = number_instances(instances, evidence, gum, priors, 1.0, arch_shape_evidence(shape, shape[::-1]), weight)
        assert new.options == old.options and new.cost == old.cost
        np.testing.assert_array_equal(new.posterior, old.posterior)


def test_shape_mends_a_counted_shift() -> None:
    """A lower arch whose right first premolar was taken out, and whose teeth behind it the network numbers
    one position forward, sure of it (as it does where an extraction space has closed): the network alone
    keeps the shift; with each tooth's shape as evidence the numbers come back."""
    from pointmamba.evaluation.tooth_numbering import arch_classes

    scan, aligned = _sample()
    cls = arch_classes(17, scan.jaw).tolist()
    teeth = [int(t) for t in np.unique(scan.labels) if t > 0]
    index = {t: cls.index(int(fdi_to_class(np.array([t]), scan.jaw, 17)[0])) for t in teeth}
    premolar = next(t for t in teeth if index[t] >= 8 and t % 10 == 4)
    kept = [t for t in teeth if t != premolar]
    instances, _ = measure_instances(aligned, [np.flatnonzero(scan.labels == t) for t in kept])
    truth = [index[kept[inst.key]] for inst in instances]
    said = [a - 1 if a > index[premolar] else a for a in truth]  # counted: one position forward
    evidence = np.full((len(instances), 16), 0.1 / 15)
    evidence[np.arange(len(instances)), said] = 0.9
    gum = np.full(len(instances), 0.001)
    priors = default_priors(scan.jaw)
    wrong = number_instances(instances, evidence, gum, priors)
    assert [o and o[0] for o in wrong.options] == said  # the network alone keeps the shift
    position = [a - 7 if a >= 8 else 8 - a for a in truth]
    shape = np.full((len(instances), 8), 0.1 / 7)
    shape[np.arange(len(instances)), np.array(position) - 1] = 0.9
    mended = number_instances(instances, evidence, gum, priors, 1.0, arch_shape_evidence(shape, shape), 3.0)
    assert [o and o[0] for o in mended.options] == truth, str(([o for o in mended.options], truth, said))


def test_model_file_round_trip_and_errors(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ToothShapeNet(width=16).eval()
    crops = np.random.default_rng(0).normal(size=(5, 256, 6)).astype(np.float32)
    path = tmp_path / "shape.pth"
    save_shape_model(path, model, {"seed": 0})
    loaded = load_shape_model(path)
    np.testing.assert_array_equal(position_probabilities(model, crops, "upper"),
                                  position_probabilities(loaded, crops, "upper"))
    assert not np.allclose(position_probabilities(loaded, crops, "upper"),
                           position_probabilities(loaded, crops, "lower"))  # the jaw is an input
    other = tmp_path / "other.pth"
    torch.save({"model": {}}, other)
    with pytest.raises(ValueError, match="other.pth: not a tooth-shape model"):
        load_shape_model(other)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a file torch reads")
    with pytest.raises(ValueError, match="junk.pth: not a tooth-shape model"):
        load_shape_model(junk)
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        load_shape_model(tmp_path / "missing.pth")


def test_train_then_segment_with_shape_evidence(tmp_path: Path) -> None:
    """The user's path: a config's scans -> tools/train_tooth_shape.py -> predict with infer.shape_weight."""
    from support.tiny import untrained_checkpoint, write_synthetic

    root = write_synthetic(tmp_path / "syn")
    out = tmp_path / "shape.pth"
    cmd = [sys.executable, str(ROOT / "tools" / "train_tooth_shape.py"), "--config", str(ROOT / "configs" / "base.yaml"),
           "--out", str(out), "--epochs", "2", "--copies", "1", "--width", "16", "--set", f"data.root={root}",
           "data.train_names=[SYN00000, SYN00001]", "data.val_names=[SYN00002]", f"data.cache_dir={root / '.cache'}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "val: " in run.stdout and out.is_file()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "exists" in again.stderr  # never over a file without --overwrite
    # seeded: a second run writes the same weights, bit for bit
    twin = tmp_path / "twin.pth"
    run = subprocess.run([str(twin) if a == str(out) else a for a in cmd], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    first, second = (torch.load(p, weights_only=True)["state_dict"] for p in (out, twin))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)

    from pointmamba import Segmenter

    ckpt = untrained_checkpoint(tmp_path / "net.pth")
    scan = load_scan(root / "SYN00002" / "SYN00002_upper.obj")
    plain = Segmenter(ckpt, infer={"mirror_tta": False})(scan)
    shaped = Segmenter(ckpt, infer={"mirror_tta": False, "shape_weight": 1.0, "shape_model": str(out)})(scan)
    conf = [[t.confidence for t in r.confidence.teeth] for r in (plain, shaped)]
    assert len(conf[0]) == len(conf[1]) > 0 and conf[0] != conf[1]  # the shape evidence took part
    with pytest.raises(ValueError, match="infer.shape_model"):
        Segmenter(ckpt, infer={"shape_weight": 1.0})(scan)

    # a model file holding the shape network uses it at its stored weight unless infer says otherwise
    packed = tmp_path / "packed.pth"
    export = [sys.executable, str(ROOT / "tools" / "export_model.py"), str(ckpt), "--out", str(packed),
              "--tooth-shape", str(out), "--shape-weight", "1.0"]
    run = subprocess.run(export, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    from pointmamba.evaluation.inference import shape_setting

    segmenter = Segmenter(packed, infer={"mirror_tta": False})
    assert segmenter.config["_tooth_shape"] == str(packed)
    assert shape_setting({"shape_model": str(packed), "shape_weight": None})[1] == 1.0
    assert shape_setting({"shape_model": str(packed), "shape_weight": 0.0}) == (None, 0.0, 0.0)
    # (the packed file's network is float16: compared with the same file, the shape network named)
    packed_result = segmenter(scan)
    named = Segmenter(packed, infer={"mirror_tta": False, "shape_weight": 1.0, "shape_model": str(out)})(scan)
    off = Segmenter(packed, infer={"mirror_tta": False, "shape_weight": 0.0})(scan)
    np.testing.assert_array_equal(packed_result.labels, named.labels)
    confidences = [[t.confidence for t in r.confidence.teeth] for r in (packed_result, named, off)]
    assert confidences[0] == confidences[1] != confidences[2]
    assert shape_setting({"shape_model": None, "shape_weight": None}) == (None, 0.0, 0.0)  # no network: off
    bad = subprocess.run(export[:-4] + ["--shape-weight", "2", "--overwrite"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "--shape-weight and --tooth-weight need --tooth-shape" in bad.stderr
    # a model file (here one holding two averaged networks) gets the shape network added, its networks kept
    pair, repacked = tmp_path / "pair.pth", tmp_path / "repacked.pth"
    run = subprocess.run(export[:4] + [str(pair), "--average-with", str(ckpt)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    run = subprocess.run([export[0], export[1], str(pair), "--out", str(repacked), "--tooth-shape", str(out),
                          "--shape-weight", "1.0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    before, after = (torch.load(p, weights_only=True) for p in (pair, repacked))
    assert "tooth_shape" not in before and after["tooth_shape"]["meta"]["weight"] == 1.0
    for a, b in [(before, after), (before["average_with"][0], after["average_with"][0])]:
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    refused = subprocess.run([export[0], export[1], str(pair), "--out", str(tmp_path / "x.pth")], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode == 2 and "already holds 2 averaged networks" in refused.stderr


def test_shape_floor_one_is_the_uniform_and_changes_nothing() -> None:
    """infer.shape_floor mixes the classifier's probabilities with the uniform: all of it (1) is no evidence."""
    scan, aligned = _sample()
    classes = fdi_to_class(scan.labels, scan.jaw, 17)
    probs = np.full((len(classes), 17), 0.2 / 16)
    probs[np.arange(len(classes)), classes] = 0.8
    torch.manual_seed(0)
    net = ToothShapeNet(width=16).eval()  # untrained: arbitrary, far from uniform evidence
    off = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17)[1]
    uniform = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17, shape_model=net, shape_weight=2.0,
                           shape_floor=1.0)[1]
    used = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17, shape_model=net, shape_weight=2.0)[1]
    assert uniform.options == off.options
    np.testing.assert_allclose(uniform.posterior, off.posterior, atol=1e-12)
    assert not np.allclose(used.posterior, off.posterior, atol=1e-6)
