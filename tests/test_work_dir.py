"""A previous run is never replaced by accident; a mismatched model says which keys differ; best.pth
survives a kill between the two checkpoint saves."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pointmamba import build_model
from pointmamba.config import load_config
from pointmamba.training import trainer as trainer_module
from pointmamba.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from pointmamba.evaluation.inference import load_trained
from pointmamba.training.trainer import Trainer
from pointmamba.training.work_dir import WorkDirError

from support.tiny import tiny_overrides, write_synthetic
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


def previous_run(work: Path) -> dict[str, bytes]:
    work.mkdir(parents=True)
    files = {"last.pth": b"old last", "best.pth": b"old best", "metrics.jsonl": b'{"epoch": 1}\n',
             "config.yaml": b"old: config\n"}
    for name, data in files.items():
        (work / name).write_bytes(data)
    return files


def unchanged(work: Path, files: dict[str, bytes]) -> bool:
    return all((work / name).read_bytes() == data for name, data in files.items())


def test_training_refuses_a_work_dir_with_a_previous_run(tmp_path: Path, synth: Path) -> None:
    work = tmp_path / "w"
    files = previous_run(work)
    cfg = load_config(None, tiny_overrides(synth, work, epochs=1))
    with pytest.raises(WorkDirError, match=r"holds a previous run \(last.pth, best.pth, metrics.jsonl\): pass "
                                           r"--resume to continue it or --overwrite to replace it"):
        Trainer(cfg)
    assert unchanged(work, files)
    config = tmp_path / "c.yaml"
    config.write_text("")
    code, _, err = run_tool("train", "--config", config, "--work-dir", work, "--set", *tiny_overrides(synth, work))
    assert code == 2 and "holds a previous run" in err and "Traceback" not in err
    assert unchanged(work, files)

    trainer = Trainer(cfg, overwrite=True)  # asked for: the old run's files go, the new config is written
    trainer.close()
    assert not any((work / n).exists() for n in ("last.pth", "best.pth", "metrics.jsonl"))
    assert "old: config" not in (work / "config.yaml").read_text()


def test_resume_with_another_model_names_the_keys_and_keeps_config_yaml(tmp_path: Path, synth: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    trained = load_config(None, tiny_overrides(synth, work))
    save_checkpoint({"model": build_model(trained).state_dict(), "config": trained}, work / "last.pth")
    (work / "config.yaml").write_text("the run's config\n")
    other = load_config(None, tiny_overrides(synth, work) + ["model.enc_channels=[32,32]", "model.d_state=8"])
    with pytest.raises(CheckpointError) as info:
        Trainer(other, resume=True)
    msg = str(info.value)
    assert "model.d_state: checkpoint 4, config 8" in msg and "model.enc_channels: checkpoint [16, 16], config [32, 32]" in msg
    assert "\n" not in msg and len(msg) < 400
    assert (work / "config.yaml").read_text() == "the run's config\n"

    # tools/test.py builds the model from its --config: the same one-line message
    with pytest.raises(CheckpointError) as info:
        load_trained(work / "last.pth", torch.device("cpu"), config=other)
    assert "model.enc_channels" in str(info.value) and len(str(info.value)) < 400
    # a checkpoint without a config: torch's size-mismatch dump becomes one summary line
    save_checkpoint({"model": build_model(trained).state_dict()}, tmp_path / "bare.pth")
    with pytest.raises(CheckpointError, match=r"weights do not fit the model config: \d+ shape mismatch") as info:
        load_trained(tmp_path / "bare.pth", torch.device("cpu"), config=other)
    assert len(str(info.value)) < 400

    with pytest.raises(WorkDirError, match="nothing to resume"):
        Trainer(load_config(None, tiny_overrides(synth, tmp_path / "empty")), resume=True)


def test_best_checkpoint_survives_a_kill_between_the_two_saves(tmp_path: Path, synth: Path, monkeypatch) -> None:
    work = tmp_path / "w"
    cfg = load_config(None, tiny_overrides(synth, work, epochs=3) + ["train.max_steps_per_epoch=1"])

    def improving_validation(trainer: Trainer) -> None:  # every epoch a new best: both files are written
        trainer.validate = lambda: {"val_loss": 1.0, "val_miou": 0.1 * (trainer.epoch + 1), "val_accuracy": 0.5,
                                    "val_mdice": 0.1, "val_iou": []}

    calls = []
    real_save = trainer_module.save_checkpoint

    def killed_at_fourth_save(state, path):
        calls.append(Path(path).name)
        if len(calls) == 4:  # epoch 2, between its two saves; kill -9 mid-write leaves a temp file
            (Path(path).parent / f".{Path(path).name}.x1y2.tmp").write_bytes(b"")
            raise KeyboardInterrupt
        real_save(state, path)

    monkeypatch.setattr(trainer_module, "save_checkpoint", killed_at_fourth_save)
    trainer = Trainer(cfg)
    improving_validation(trainer)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    trainer.close()
    best, last = load_checkpoint(work / "best.pth"), load_checkpoint(work / "last.pth")
    assert best["best_miou"] >= last["best_miou"], "last.pth records a best that no best.pth holds"
    log = (work / "train.log").read_text()
    assert "epoch 1/3" in log and "epoch 2/3" not in log, "the log claims a save that did not finish"

    monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
    trainer = Trainer(cfg, resume=True)
    improving_validation(trainer)
    trainer.train()
    trainer.close()
    assert not list(work.glob(".*.tmp"))
    assert load_checkpoint(work / "best.pth")["epoch"] == 3 == load_checkpoint(work / "last.pth")["epoch"]
    assert [json.loads(ln)["epoch"] for ln in (work / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert "saved best.pth, last.pth" in (work / "train.log").read_text()
