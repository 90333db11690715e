"""Fine-tuning on a reviewer's corrections (``tools/train.py CONFIG --corrections DIR``, issue 47 item 2):
the command runs on a flat folder of meshes + the review page's JSON, trains on the corrected labels, and
refuses a JSON that does not fit its mesh in one line naming it, before any training."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.data.teeth3ds import read_labels, save_labels

from support.tiny import tiny_overrides, untrained_checkpoint, write_synthetic
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")
SCAN = "SYN00000_upper"
FAST = ["data.val_names=null", "train.val_interval=0", "data.augment=false", "train.batch_size=1",
        "train.lr=0.02", "train.schedule=constant", "train.class_balance=1.0"]
"""A tiny run that learns one scan in tens of steps (no augmentation, every tooth class weighed up)."""


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"), count=2, vertices=5000)


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth")


@pytest.fixture(scope="module")
def fitted(synth: Path, start: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model trained on the scan's own labels until it numbers teeth 11 and 21 apart."""
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer

    out = tmp_path_factory.mktemp("fitted")
    cfg = load_config(None, tiny_overrides(synth, out / "w", epochs=80) + FAST + [
        f"train.init_from={start}", f"data.train_names=[{SCAN}]"])
    trainer = Trainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    return out / "w" / "last.pth"


def reviewer_folder(synth: Path, folder: Path, stem: str, swap: bool) -> Path:
    """A flat folder as a reviewer has it: the scan's mesh under a vendor name and the page's JSON beside it,
    with teeth 11 and 17 renumbered into each other (``swap``) or the labels as they were."""
    folder.mkdir(parents=True)
    shutil.copyfile(synth / "SYN00000" / f"{SCAN}.obj", folder / f"{stem}.obj")
    original = read_labels(synth / "SYN00000" / f"{SCAN}.json")
    labels = original.labels.copy()
    if swap:
        labels[original.labels == 11], labels[original.labels == 17] = 17, 11
    save_labels(folder / f"{stem}.json", labels, "upper", stem)
    return folder


def fine_tune(synth: Path, start: Path, corrections: Path, out: Path, epochs: int, *extra: str) -> tuple[int, str]:
    config = out.parent / "tiny.yaml"
    config.write_text("train:\n  device: cpu\n")
    sets = tiny_overrides(synth, out, epochs=epochs) + FAST + [f"train.init_from={start}", *extra]
    code, _, err = run_tool("train", config, "--corrections", corrections, "--set", *sets)
    return code, err


def predicted_classes(checkpoint: Path, mesh: Path) -> np.ndarray:
    """The network's own class per vertex (no graph cut, no numbering): what training changed."""
    from pointmamba import build_model
    from pointmamba.data.dataset import preprocess
    from pointmamba.inference.pipeline import vertex_probabilities
    from pointmamba.checkpoints.checkpoint import checkpoint_config, load_checkpoint

    state = load_checkpoint(checkpoint)
    cfg = checkpoint_config(state, checkpoint)
    model = build_model(cfg)
    model.load_state_dict(state["model"])
    model.eval()
    probs, _ = vertex_probabilities(model, preprocess(mesh), mesh.stem, cfg, torch.device("cpu"))
    return probs.argmax(1)


def test_fine_tune_command_runs_on_a_flat_folder_and_writes_a_checkpoint_predict_reads(
        synth: Path, start: Path, tmp_path: Path) -> None:
    folder = reviewer_folder(synth, tmp_path / "reviewed", "Patient 7 maxilla", swap=True)
    code, err = fine_tune(synth, start, folder, tmp_path / "w", 1, "data.train_names=[SYN00001_upper]")
    assert code == 0, err[-2000:]
    log = (tmp_path / "w" / "train.log").read_text()
    assert "fine-tuning on 1 corrected scan(s)" in log and "Patient_7_maxilla_upper" in log
    assert "replay of 1 training scan(s)" in log and f"initialized from {start}" in log
    from pointmamba.checkpoints.checkpoint import load_checkpoint

    assert "Patient_7_maxilla_upper" in load_checkpoint(tmp_path / "w" / "last.pth")["train_scans"]
    code, _, err = run_tool("predict", folder / "Patient 7 maxilla.obj", "--jaw", "upper", "--checkpoint",
                            tmp_path / "w" / "last.pth", "--set", "infer.graph_cut=false", "--out", tmp_path / "p")
    assert code == 0, err[-2000:]


def test_it_trains_on_the_corrected_labels(synth: Path, fitted: Path, tmp_path: Path) -> None:
    """From a model that numbers the scan's teeth 11 and 17 right, the same run on the reviewer's JSON (11 and
    17 renumbered into each other) and on an uncorrected copy (same scan, seed and steps): only the corrected
    one comes to call those teeth by their new numbers. (A tiny model this short tells an incisor from a
    molar reliably, not yet 11 from 21.)"""
    from pointmamba.data.fdi import fdi_to_class

    runs = {}
    for swap in (True, False):
        folder = reviewer_folder(synth, tmp_path / f"r{swap}", "scan", swap=swap)
        code, err = fine_tune(synth, fitted, folder, tmp_path / f"w{swap}", 40, "data.train_names=[]", "train.lr=0.01")
        assert code == 0, err[-2000:]
        runs[swap] = predicted_classes(tmp_path / f"w{swap}" / "last.pth", folder / "scan.obj")
    labels = read_labels(synth / "SYN00000" / f"{SCAN}.json").labels
    region = np.isin(labels, [11, 17])
    wanted = fdi_to_class(np.where(labels == 11, 17, 11), "upper", 17)[region]  # each swapped vertex's new class
    before = (predicted_classes(fitted, synth / "SYN00000" / f"{SCAN}.obj")[region] == wanted).mean()
    corrected, uncorrected = ((runs[s][region] == wanted).mean() for s in (True, False))
    assert before < 0.2, before
    assert corrected > 0.6 and uncorrected < 0.2, (corrected, uncorrected)


def test_a_json_that_does_not_fit_its_mesh_stops_before_training_naming_it(synth: Path, start: Path,
                                                                           tmp_path: Path) -> None:
    folder = reviewer_folder(synth, tmp_path / "reviewed", "scan", swap=False)
    doc = json.loads((folder / "scan.json").read_text())
    doc["labels"], doc["instances"] = doc["labels"][:-3], doc["instances"][:-3]
    (folder / "scan.json").write_text(json.dumps(doc))
    code, err = fine_tune(synth, start, folder, tmp_path / "w", 1)
    assert code == 2 and "Traceback" not in err
    assert f"{folder / 'scan.json'}: labels: {len(doc['labels'])} labels but the mesh has" in err
    assert not (tmp_path / "w").exists()  # checked before the run started

    (folder / "scan.obj").unlink()
    code, err = fine_tune(synth, start, folder, tmp_path / "w", 1)
    assert code == 2 and f"{folder / 'scan.json'}: mesh: no mesh scan.obj/.ply/.stl beside it" in err


def test_a_corrected_training_scan_replaces_its_own_copy_in_the_replay(synth: Path, tmp_path: Path) -> None:
    """A reviewer who corrected one of the data set's own scans (Teeth3DS layout, same name): the training set
    holds it once, with the corrected labels, beside the other replayed scans."""
    from pointmamba.config import load_config
    from pointmamba.data.fdi import fdi_to_class
    from pointmamba.training.data_builders import build_dataset, corrections_overrides

    flat = reviewer_folder(synth, tmp_path / "flat", SCAN, swap=True)
    folder = tmp_path / "reviewed"
    (folder / "SYN00000").mkdir(parents=True)
    for f in flat.iterdir():
        f.rename(folder / "SYN00000" / f.name)
    overrides = tiny_overrides(synth, tmp_path / "w")  # replays SYN00000 and SYN00001, both jaws
    more, summary = corrections_overrides(load_config(None, overrides), folder)
    assert "replay of 3 training scan(s)" in summary and f"replace the training set's own of {SCAN}" in summary
    train = build_dataset(load_config(None, overrides + more), "train", train=True)
    assert sorted(train.names) == sorted(["SYN00000_lower", "SYN00001_upper", "SYN00001_lower", SCAN])
    corrected = read_labels(folder / "SYN00000" / f"{SCAN}.json").labels
    item = train.item(train.names.index(SCAN), np.random.default_rng(0))
    assert np.array_equal(item["vertex_segment"], fdi_to_class(corrected, "upper", 17))
