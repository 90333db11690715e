"""What a training run leaves for its user to read: TensorBoard tags under FDI names, the loss every step, the
config as hyperparameters, a picture of a validation prediction, diagnostics that stay quiet on a healthy run
and flag an exploding one, and the training scans recorded in the checkpoint (warned about when scored)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pointmamba.config import load_config
from pointmamba.training.trainer import Trainer, TrainingDiverged

from support.tiny import tiny_overrides, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def _events(logdir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


def _train(synth: Path, work: Path, *extra: str) -> Trainer:
    trainer = Trainer(load_config(None, tiny_overrides(synth, work, epochs=2) + list(extra)))
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer


@pytest.fixture(scope="module")
def healthy(synth: Path, tmp_path_factory: pytest.TempPathFactory) -> Trainer:
    """2 epochs of 2 steps at the tiny runs' lr, diagnostics on every step, the default TensorBoard interval."""
    return _train(synth, tmp_path_factory.mktemp("healthy"), "train.log_interval=10", "diagnostics.interval=1")


def test_tensorboard_shows_what_a_user_reads(healthy: Trainer) -> None:
    acc = _events(healthy.work_dir / "tb")
    scalars = set(acc.Tags()["scalars"])
    # the loss every step: 4 steps give 4 points (every 10th step gave none)
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3, 4]
    # per-class IoU under the FDI names of the jaw (the val scan is an upper jaw)
    assert {"val_iou/upper/gingiva", "val_iou/upper/11", "val_iou/upper/21", "val_iou/upper/28"} <= scalars
    assert not [t for t in scalars if t.startswith("val_iou/class_") or t.startswith("val_iou/lower/")]
    # the config as text and as hyperparameters in the run's own folder
    assert "config/text_summary" in acc.Tags()["tensors"]
    hparams = acc.PluginTagToContent("hparams")
    assert {"_hparams_/experiment", "_hparams_/session_start_info"} <= set(hparams)
    from tensorboard.plugins.hparams import plugin_data_pb2

    start = plugin_data_pb2.HParamsPluginData.FromString(hparams["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["train.lr"].number_value == pytest.approx(0.01)
    assert start.hparams["model.enc_channels"].string_value == "[16, 16]"
    assert sorted(p.name for p in (healthy.work_dir / "tb").iterdir()) == [
        p.name for p in (healthy.work_dir / "tb").glob("events.out.tfevents.*")]  # no second run folder
    # a picture of the first val scan's prediction at each validation, in TensorBoard and on disk
    images = acc.Images("val/prediction")
    assert [e.step for e in images] == [2, 4] and images[0].width > 500 and images[0].height > 500
    assert sorted(p.name for p in (healthy.work_dir / "val_pictures").iterdir()) == ["epoch_001.png", "epoch_002.png"]


def test_a_healthy_run_raises_no_alarm(healthy: Trainer) -> None:
    lines = [json.loads(x) for x in (healthy.work_dir / "diagnostics.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and {"head", "cpe", "mixer"} <= set(lines[0]["groups"])
    assert all(not x["flags"]["exploding"] and not x["flags"]["vanishing"] for x in lines), lines
    assert lines[0]["groups"]["head"]["ratio"] > 0.1  # what the single 0.1 threshold flagged on every step
    assert "EXPLODING" not in (healthy.work_dir / "train.log").read_text()


def test_an_exploding_run_is_flagged(synth: Path, tmp_path: Path) -> None:
    """lr x100 (1.0 instead of 0.01): the weights and gradients blow up within two steps."""
    try:
        _train(synth, tmp_path, "train.lr=1.0", "diagnostics.interval=1", "train.max_steps_per_epoch=2")
    except TrainingDiverged:
        pass  # the loss may turn non-finite soon after: the flag came before
    lines = [json.loads(x) for x in (tmp_path / "diagnostics.jsonl").read_text().splitlines()]
    assert not lines[0]["flags"]["exploding"]  # the first step is the reference
    flagged = [x for x in lines[1:] if x["flags"]["exploding"]]
    assert flagged and flagged[0]["step"] == 2, [x["flags"] for x in lines]
    assert max(flagged[0]["groups"][g]["growth"] for g in flagged[0]["flags"]["exploding"]) > 10
    assert "EXPLODING: " in (tmp_path / "train.log").read_text()


# ---------------------------------------------------------------------------------------------- training scans
def test_checkpoints_record_their_training_scans(healthy: Trainer, tmp_path: Path) -> None:
    from pointmamba.checkpoints.shipped import export_compact
    from pointmamba.checkpoints.checkpoint import load_checkpoint

    for name in ("last.pth", "best.pth"):
        assert load_checkpoint(healthy.work_dir / name)["train_scans"] == [
            "SYN00000_lower", "SYN00000_upper", "SYN00001_lower", "SYN00001_upper"]
    exported = export_compact(load_checkpoint(healthy.work_dir / "last.pth"), tmp_path / "model.pth")
    assert load_checkpoint(exported)["train_scans"] == load_checkpoint(healthy.work_dir / "last.pth")["train_scans"]


def test_test_tool_warns_on_training_scans_and_writes_under_work_dirs(healthy: Trainer, tmp_path: Path) -> None:
    """Scoring a training scan names it; the default output lies under ./work_dirs, beside no checkpoint."""
    work = healthy.work_dir
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "test.py"), str(work / "config.yaml"),
                           "--checkpoint", str(work / "last.pth"), "--split", "val", "--no-progress",
                           "--set", "data.val_names=[SYN00001_upper, SYN00002_upper]", "infer.mirror_tta=false"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warning = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning: 1 of the 2 scored scan(s)")]
    assert len(warning) == 2 and "SYN00001_upper" in warning[0] and "SYN00002" not in warning[0], proc.stderr[-2000:]
    out = tmp_path / "work_dirs" / work.name / "test_val"
    assert json.loads((out / "metrics.json").read_text())["overall"]["num_scans"] == 2
    assert not (work / "test_val").exists()
    assert "it/s]" not in proc.stderr  # --no-progress


def test_default_test_output_is_never_inside_the_package() -> None:
    from pointmamba.cli._common import default_out_dir
    from pointmamba.checkpoints.shipped import DEFAULT_MODEL

    assert default_out_dir(DEFAULT_MODEL, "test_test") == Path("work_dirs/teeth17_shared_data/test_test")
    assert default_out_dir(Path("work_dirs/cpe/best.pth"), "test_val") == Path("work_dirs/cpe/test_val")


def test_shipped_model_training_scans_come_from_its_config(scans_dir: Path) -> None:
    """The shipped model records no list; its config (train_split all over two data roots) determines it."""
    from pointmamba.checkpoints.shipped import DEFAULT_MODEL
    from pointmamba.training.training_scans import of_checkpoints, warning_line

    scans, unknown = of_checkpoints([DEFAULT_MODEL])
    if scans is None:
        pytest.skip("the shipped model's data roots are not here")
    assert not unknown and "every scan under ../shared/data/scans, ../shared/data/iosseg" in scans.source
    assert len(scans.among(sorted(scans.parts[0][0]))) == 187  # the model card's 187 scans
    line = warning_line(DEFAULT_MODEL, ["MSN021_lower", "NEW001_upper"], scans, unknown)
    assert line.startswith("warning: 1 of the 2 scored scan(s)") and "MSN021_lower" in line and "NEW001" not in line


def test_derived_training_scans_follow_split_files_exclusions_and_jaw(tmp_path: Path) -> None:
    from pointmamba.training.training_scans import derive_from_config

    (tmp_path / "train.txt").write_text("P1\nP2_upper\n")
    cfg = {"data": {"root": str(tmp_path), "train_split": "train", "split_dir": None, "train_names": None,
                    "train_exclude": ["P2_upper"], "jaw": None}}
    scans = derive_from_config(cfg)
    assert scans.among(["P1_upper", "P1_lower", "P2_upper", "P3_upper"]) == ["P1_upper", "P1_lower"]
    cfg["data"]["jaw"] = "lower"
    assert derive_from_config(cfg).among(["P1_upper", "P1_lower"]) == ["P1_lower"]
    cfg["data"]["root"] = str(tmp_path / "absent")
    assert derive_from_config(cfg) is None  # not determined here: the tools say so instead of guessing


def test_predict_with_a_reference_warns_on_a_training_scan(healthy: Trainer, synth: Path, tmp_path: Path) -> None:
    from pointmamba.data import find_scans

    scans = find_scans(synth)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "predict.py"), str(scans["SYN00001_lower"]),
                           str(scans["SYN00002_upper"]), "--checkpoint", str(healthy.work_dir / "last.pth"),
                           "--reference", "auto", "--out", str(tmp_path / "out"), "--no-progress",
                           "--set", "infer.mirror_tta=false"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warning = [ln for ln in proc.stderr.splitlines() if "were among the training scans of last.pth" in ln]
    assert len(warning) == 1 and "1 of the 2 scored scan(s)" in warning[0], proc.stderr[-2000:]
    assert "SYN00001_lower" in warning[0] and "SYN00002" not in warning[0]
