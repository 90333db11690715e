"""Training engine: loss goes down, resume is bit-exact, DDP keeps ranks identical, clear errors."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pointmamba.config import load_config
from pointmamba.checkpoints.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from pointmamba.training.hooks import Hook
from pointmamba.training.trainer import Trainer, TrainingDiverged

from support.tiny import run_training as run, tiny_overrides, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


class Interrupt(Hook):
    """Simulates a kill right after an epoch's checkpoint was written."""

    def __init__(self, after_epoch: int) -> None:
        self.after = after_epoch

    def after_epoch(self, trainer: Trainer) -> None:
        if trainer.epoch == self.after:
            raise KeyboardInterrupt


def test_loss_decreases_and_resume_is_bit_exact(synth: Path, tmp_path: Path) -> None:
    over = ["train.max_steps_per_epoch=1", "train.val_interval=1"]
    cfg_full = load_config(None, tiny_overrides(synth, tmp_path / "full", epochs=3) + over)
    full = run(cfg_full)
    losses = [__import__("json").loads(ln)["train_loss"] for ln in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 3
    assert (tmp_path / "full" / "best.pth").is_file() and (tmp_path / "full" / "last.pth").is_file()
    for name in ("best.pth", "last.pth"):  # our checkpoints hold only tensors and plain data (no code)
        assert torch.load(tmp_path / "full" / name, weights_only=True)["epoch"] >= 1

    cfg_cut = load_config(None, tiny_overrides(synth, tmp_path / "cut", epochs=3) + over)
    with pytest.raises(KeyboardInterrupt):
        run(cfg_cut, hooks=[Interrupt(after_epoch=1)])
    assert load_checkpoint(tmp_path / "cut" / "last.pth")["epoch"] == 1
    resumed = run(cfg_cut, resume=True)
    assert resumed.iteration == full.iteration
    a, b = full.net.state_dict(), resumed.net.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs after resume"
    cut_lines = (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()
    assert len(cut_lines) == 3


def test_loss_goes_down_over_steps(synth: Path, tmp_path: Path) -> None:
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "w", epochs=6) + ["train.val_interval=0", "data.augment=false",
                                                                               "train.schedule=constant"])
    losses: list[float] = []

    class Record(Hook):
        def after_step(self, trainer: Trainer, loss: float) -> None:
            losses.append(loss)

    run(cfg, hooks=[Record()])
    print(f"losses: {[round(x, 3) for x in losses]}")
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3


def test_nonfinite_losses_stop_with_clear_message(synth: Path, tmp_path: Path) -> None:
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "nan", epochs=1) + ["train.max_nonfinite=2",
                                                                                 "train.val_interval=0"])

    class Poison(Hook):
        """Make every parameter NaN so every loss is non-finite."""

        def before_step(self, trainer: Trainer) -> None:
            with torch.no_grad():
                for p in trainer.net.parameters():
                    p.fill_(float("nan"))

    with pytest.raises(TrainingDiverged, match=r"stopped at step 0 .*2 non-finite losses in a row.*last finite loss: None"):
        run(cfg, hooks=[Poison()])


def test_missing_data_and_bad_checkpoint_errors(tmp_path: Path) -> None:
    cfg = load_config(None, [f"data.root={tmp_path / 'nowhere'}", f"work_dir={tmp_path / 'w'}"])
    with pytest.raises(FileNotFoundError, match=r"data.root .*nowhere.* does not exist"):
        Trainer(cfg)
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match=r"bad.pth: not a readable checkpoint"):
        load_checkpoint(bad)
    save_checkpoint({"weights": 1}, tmp_path / "other.pth")
    with pytest.raises(CheckpointError, match=r"other.pth: not a pointmamba checkpoint"):
        load_checkpoint(tmp_path / "other.pth")
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.pth")


def test_cli_errors_are_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  epohcs: 3\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "train.py"), "--config", str(bad)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "unknown config key 'train.epohcs'" in proc.stderr and "epochs" in proc.stderr
    assert "Traceback" not in proc.stderr
    corrupt = tmp_path / "c.pth"
    corrupt.write_bytes(b"\x00" * 10)
    scan = tmp_path / "x_upper.obj"
    scan.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "predict.py"), str(scan), "--checkpoint", str(corrupt),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "c.pth: not a readable checkpoint" in proc.stderr


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_torchrun_two_gloo_processes_keep_identical_weights(synth: Path, tmp_path: Path) -> None:
    overrides = tiny_overrides(synth, tmp_path / "ddp", epochs=1) + ["train.max_steps_per_epoch=2", "train.val_interval=0",
                                                                     "train.batch_size=1"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
         str(ROOT / "tests" / "support" / "ddp_worker.py"), str(tmp_path / "ddp"), *overrides],
        capture_output=True, text=True, cwd=ROOT, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    w0 = torch.load(tmp_path / "ddp" / "rank0.pt", weights_only=True)
    w1 = torch.load(tmp_path / "ddp" / "rank1.pt", weights_only=True)
    assert w0["iteration"] == w1["iteration"] == 2
    init = torch.load(tmp_path / "ddp" / "rank0_init.pt", weights_only=True)
    changed = 0
    for key in w0["model"]:
        assert torch.equal(w0["model"][key], w1["model"][key]), f"{key} differs between ranks"
        changed += not torch.equal(w0["model"][key], init[key])
    assert changed > 0, "no weight moved: the steps did not train"


def test_optimizer_is_fused_where_possible():
    from pointmamba.config import TRAIN_DEFAULTS
    from pointmamba.training.optim import build_optimizer

    cfg = {"train": dict(TRAIN_DEFAULTS)}
    cpu = torch.nn.Linear(3, 2)
    assert build_optimizer(cpu, cfg).defaults.get("fused") is True
    meta = torch.nn.Linear(3, 2, device="meta")  # a device fused AdamW does not cover: the loop version
    assert not build_optimizer(meta, cfg).defaults.get("fused")
