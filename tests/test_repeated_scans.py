"""``data.scan_repeats``: chosen training scans drawn k times an epoch, each draw with its own randomness;
``{}`` leaves the training set as it was."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import ConfigError, load_config
from pointmamba.data.repeated_scans import RepeatedScans, repeat_counts
from pointmamba.training.data_builders import build_dataset
from pointmamba.training.trainer import Trainer

from support.tiny import tiny_overrides, write_synthetic

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


def test_counts_by_scan_and_by_patient() -> None:
    names = ["A_lower", "A_upper", "B_lower", "B_upper"]
    assert repeat_counts(names, {}) == [1, 1, 1, 1]
    assert repeat_counts(names, {"A": 3, "B_upper": 2}) == [3, 3, 1, 2]
    with pytest.raises(ValueError, match="'C_upper' is not a training scan"):
        repeat_counts(names, {"C_upper": 2})


@pytest.mark.parametrize("value", ["{A: 0}", "{A: 1.5}", "{A: true}", "[A, 2]", "x"])
def test_bad_values_are_one_line_config_errors(value: str) -> None:
    with pytest.raises(ConfigError, match="scan_repeats") as info:
        load_config(None, [f"data.scan_repeats={value}"])
    assert "\n" not in str(info.value)


def test_each_draw_has_its_own_randomness_and_the_first_is_the_plain_item(synth: Path, tmp_path: Path) -> None:
    cfg = load_config(None, tiny_overrides(synth, tmp_path) + ["data.scan_repeats={SYN00001_lower: 3}"])
    dataset = build_dataset(cfg, "train", train=True)
    drawn = RepeatedScans(dataset, cfg["data"]["scan_repeats"])
    assert len(drawn) == len(dataset) + 2
    dataset.set_epoch(0)
    copies = [k for k, (i, _) in enumerate(drawn.order) if dataset.names[i] == "SYN00001_lower"]
    items = [drawn[k] for k in copies]
    plain = dataset[dataset.names.index("SYN00001_lower")]
    for key in ("coord", "feat", "segment"):  # the first draw is the item without repeats, bit for bit
        assert np.array_equal(np.asarray(items[0][key]), np.asarray(plain[key]))
    assert not np.array_equal(items[1]["coord"], items[0]["coord"]) and not np.array_equal(items[2]["coord"], items[1]["coord"])
    again = RepeatedScans(dataset, cfg["data"]["scan_repeats"])  # seeded: the same draws again
    assert np.array_equal(again[copies[2]]["coord"], items[2]["coord"])
    drawn.set_epoch(1)  # a new epoch, new randomness
    assert not np.array_equal(drawn[copies[2]]["coord"], items[2]["coord"])


def test_training_takes_the_extra_draws(synth: Path, tmp_path: Path) -> None:
    """config -> dataset -> loader -> model: one epoch of 2 scans, one drawn 3 times, is 4 items, 2 steps
    of batch 2; without repeats 1 step."""
    steps = {}
    for name, extra in (("plain", []), ("repeats", ["data.scan_repeats={SYN00000_upper: 3}"])):
        cfg = load_config(None, tiny_overrides(synth, tmp_path / name, epochs=1)
                          + ["data.train_names=[SYN00000_upper, SYN00001_lower]", "train.val_interval=0"] + extra)
        trainer = Trainer(cfg)
        try:
            trainer.train()
            steps[name] = trainer.iteration
        finally:
            trainer.close()
        record = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[-1])
        assert math.isfinite(record["train_loss"])
    assert steps == {"plain": 1, "repeats": 2}
