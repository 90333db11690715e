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
from pointmamba.checkpoints.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from pointmamba.inference.pipeline import load_trained
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


# ------------------------------------------------------------------------------ second round
def train_cli(tmp_path: Path, *args) -> tuple[int, str, str]:
    """tools/train.py with an empty config file and ``args``."""
    config = tmp_path / "empty.yaml"
    config.write_text("")
    return run_tool("train", "--config", config, *args)


def test_one_training_per_work_dir(tmp_path: Path, synth: Path) -> None:
    """Two trainings started in one work dir both ran, mixing metrics, logs and checkpoints. The first
    holds an flock; the second stops in one line; a closed or failed run releases it."""
    work = tmp_path / "w"
    cfg = load_config(None, tiny_overrides(synth, work, epochs=1))
    first = Trainer(cfg)
    try:
        with pytest.raises(WorkDirError, match=rf"work dir {work} is in use by another training \(pid \d+\)"):
            Trainer(cfg)
        code, _, err = train_cli(tmp_path, "--set", *tiny_overrides(synth, work))
        assert code == 2 and "in use by another training" in err
    finally:
        first.close()
    with pytest.raises(WorkDirError, match="nothing to resume"):  # a failed start releases the lock too
        Trainer(load_config(None, tiny_overrides(synth, tmp_path / "w2")), resume=True)
    Trainer(load_config(None, tiny_overrides(synth, tmp_path / "w2"))).close()
    Trainer(cfg, overwrite=True).close()


def test_overwrite_removes_only_what_a_run_writes(tmp_path: Path, synth: Path) -> None:
    """--overwrite deleted the whole tb/ folder, files it did not write included (and left the old run's
    diagnostics.jsonl to be appended to)."""
    work = tmp_path / "w"
    previous_run(work)
    (work / "diagnostics.jsonl").write_text('{"step": 1}\n')
    (work / "notes.md").write_text("mine")
    (work / "tb" / "other_run").mkdir(parents=True)
    (work / "tb" / "events.out.tfevents.1.host.1.0").write_bytes(b"old events")
    (work / "tb" / "other_run" / "events.out.tfevents.2.host.2.0").write_bytes(b"another run's events")
    (work / "tb" / "readme.txt").write_text("mine")
    Trainer(load_config(None, tiny_overrides(synth, work, epochs=1)), overwrite=True).close()
    assert not any((work / n).exists() for n in ("last.pth", "best.pth", "metrics.jsonl", "diagnostics.jsonl"))
    assert not (work / "tb" / "events.out.tfevents.1.host.1.0").exists()
    assert (work / "notes.md").read_text() == "mine" and (work / "tb" / "readme.txt").read_text() == "mine"
    assert (work / "tb" / "other_run" / "events.out.tfevents.2.host.2.0").read_bytes() == b"another run's events"
    assert "1 TensorBoard event file(s) in tb/" in (work / "train.log").read_text()


def test_links_and_foreign_directories_are_refused(tmp_path: Path, synth: Path) -> None:
    """A work dir that is a link (to /, say), one full of someone else's files, and links planted under a
    run's file names were all accepted: config.yaml was written and train.log appended through the links."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    home = tmp_path / "home"
    (home / "photos").mkdir(parents=True)
    (home / "config.yaml").write_text("the user's own")
    (tmp_path / "link").symlink_to(home)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "config.yaml").symlink_to(victim)
    (planted / "train.log").symlink_to(victim)
    cases = {tmp_path / "link": f"work dir {tmp_path / 'link'} is a symbolic link (to {home})",
             home: f"work dir {home} is not empty and holds no training run (config.yaml, photos)",
             planted: "config.yaml is a symbolic link", victim: "is a file, not a directory",
             Path("/proc/no/such/dir"): "cannot create it"}
    for work, message in cases.items():
        with pytest.raises(WorkDirError) as info:
            Trainer(load_config(None, tiny_overrides(synth, work, epochs=1)))
        assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
        code, _, err = train_cli(tmp_path, "--set", *tiny_overrides(synth, work))
        assert code == 2 and message in err and "Traceback" not in err
    assert victim.read_text() == "precious" and (home / "config.yaml").read_text() == "the user's own"
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml", "photos"]


def test_resume_dead_ends_are_gone(tmp_path: Path, synth: Path) -> None:
    """Killed while writing best.pth in epoch 1: metrics.jsonl and no checkpoint. Plain training said
    'pass --resume', --resume said 'nothing to resume'. Now plain training starts fresh over it; a run with
    best.pth only resumes from that."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "metrics.jsonl").write_text('{"epoch": 1, "train_loss": 9.0}\n')
    (work / ".best.pth.x1y2.tmp").write_bytes(b"half a checkpoint")
    cfg = load_config(None, tiny_overrides(synth, work, epochs=1) + ["train.max_steps_per_epoch=1"])
    trainer = Trainer(cfg)
    trainer.train()
    trainer.close()
    lines = (work / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["train_loss"] != 9.0
    assert "removed what a run that saved no checkpoint left" in (work / "train.log").read_text()
    assert not list(work.glob(".*.tmp"))
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "metrics.jsonl").write_text('{"epoch": 1, "train_loss": 9.0}\n')
    with pytest.raises(WorkDirError, match=r"nothing to resume: no last.pth or best.pth .*train without --resume"):
        Trainer(load_config(None, tiny_overrides(synth, killed)), resume=True)

    (work / "last.pth").unlink()  # killed between the two saves of epoch 1: best.pth only
    more = load_config(None, tiny_overrides(synth, work, epochs=2) + ["train.max_steps_per_epoch=1"])
    trainer = Trainer(more, resume=True)
    assert trainer.epoch == 1
    trainer.train()
    trainer.close()
    assert load_checkpoint(work / "last.pth")["epoch"] == 2
    assert f"resumed from {work / 'best.pth'}" in (work / "train.log").read_text()


def test_metrics_cut_short_or_foreign_are_handled_by_name(tmp_path: Path, synth: Path) -> None:
    """A last line cut short (a full disk) stopped --resume with a JSON error naming no file; a line
    without 'epoch' ended in a KeyError in train and ablate."""
    from pointmamba.cli.ablate import read_metrics

    work = tmp_path / "w"
    cfg = load_config(None, tiny_overrides(synth, work, epochs=1) + ["train.max_steps_per_epoch=1"])
    trainer = Trainer(cfg)
    trainer.train()
    trainer.close()
    metrics = work / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + '{"epoch": 2, "train_lo')
    trainer = Trainer(load_config(None, tiny_overrides(synth, work, epochs=2) + ["train.max_steps_per_epoch=1"]), resume=True)
    trainer.train()
    trainer.close()
    assert [json.loads(ln)["epoch"] for ln in metrics.read_text().splitlines()] == [1, 2]
    assert f"warning: {metrics}: line 2 is cut short" in (work / "train.log").read_text()

    metrics.write_text(metrics.read_text() + '{"train_loss": 1.0}\n')
    with pytest.raises(ValueError, match=rf"{metrics}: line 3 has no epoch number"):
        read_metrics(metrics)
    code, _, err = train_cli(tmp_path, "--resume", "--set", *tiny_overrides(synth, work, epochs=3))
    assert code == 2 and f"{metrics}: line 3 has no epoch number" in err and "Traceback" not in err


def test_a_nan_loss_is_written_as_strict_json_and_read_back_as_nan(tmp_path: Path) -> None:
    """A diverged run's NaN loss or gradient norm must not make metrics.jsonl unreadable to strict JSON
    readers (issue 46: no NaN in any file); the run's own readers still see NaN."""
    import math

    from pointmamba.utils.atomic_file import append_text
    from pointmamba.training.work_dir import json_line, read_jsonl, read_metrics

    path = tmp_path / "metrics.jsonl"
    append_text(path, json_line({"epoch": 1, "train_loss": float("nan"), "lr": 1e-3,
                                 "groups": {"head": float("inf"), "cpe": 0.5}}))
    line = path.read_text()

    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON constant {token} in {line!r}")

    json.loads(line, parse_constant=refuse)
    record = read_metrics(path)[0]
    assert math.isnan(record["train_loss"]) and record["lr"] == 1e-3
    assert math.isnan(read_jsonl(path)[0]["groups"]["head"]) and read_jsonl(path)[0]["groups"]["cpe"] == 0.5
