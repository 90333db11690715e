"""bench/gpu_train_fit.py: the epochs that fit in a device call, read from real probe runs of the trainer."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pointmamba.config import load_config
from pointmamba.training.trainer import Trainer
from support.tiny import tiny_overrides, write_synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gpu_train_fit  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def probe(synth: Path, work_dir: Path, extra: list[str]) -> Path:
    """One epoch capped at one step, as bench/gpu_train.sh runs its probes."""
    cfg = load_config(None, tiny_overrides(synth, work_dir, epochs=1) + ["train.max_steps_per_epoch=1",
                                                                         "train.val_interval=0"] + extra)
    trainer = Trainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    return work_dir


def test_probe_gives_a_full_epochs_steps_not_the_capped_ones(tmp_path: Path) -> None:
    synth = write_synthetic(tmp_path / "synth")
    # 2 patients x 2 jaws = 4 training scans; one scan drawn 3 times makes 6 draws
    plain = probe(synth, tmp_path / "probe_plain", [])
    batch3 = probe(synth, tmp_path / "probe_batch3", ["train.batch_size=3"])
    repeats = probe(synth, tmp_path / "probe_repeats", ["data.scan_repeats={SYN00000_upper: 3}"])
    seconds, steps = gpu_train_fit.probe_timing(plain, probe_steps=1)
    assert seconds > 0 and steps == 2
    assert gpu_train_fit.probe_timing(batch3, probe_steps=1)[1] == 2  # 4 scans / 3 a step: 2 steps
    assert gpu_train_fit.probe_timing(repeats, probe_steps=1)[1] == 3  # 6 draws / 2 a step
    # seconds per step scale with the probe's step count
    assert gpu_train_fit.probe_timing(plain, probe_steps=4)[0] == pytest.approx(seconds / 4)


def test_epochs_that_fit() -> None:
    # 0.6 s a step, 80 steps: 50.4 s an epoch with the margin
    assert gpu_train_fit.epochs_that_fit(0.6, 80, 448) == 8
    assert gpu_train_fit.epochs_that_fit(0.6, 80, 50.4 * 28 + 1) == 28
    assert gpu_train_fit.epochs_that_fit(0.6, 80, 10) == 1  # never zero: the run still starts


def test_failed_probe_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "probe_x").mkdir()
    with pytest.raises(ValueError, match="probe_x/metrics.jsonl: no epoch recorded"):
        gpu_train_fit.probe_timing(tmp_path / "probe_x", 40)
