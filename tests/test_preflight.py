"""Training checks every scan at start: a bad validation file stops it before the first epoch (and is in
train.log); mirrored training labels are warned about, scan by scan."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import load_config
from pointmamba.data import mirror_fdi, read_mesh, write_obj
from pointmamba.training.hooks import Hook
from pointmamba.data.preflight import InputError
from pointmamba.training.trainer import Trainer

from support.tiny import tiny_overrides, write_synthetic

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


def copy_of(synth: Path, tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(synth, root, ignore=shutil.ignore_patterns(".cache"))
    return root


class NoEpoch(Hook):
    def before_epoch(self, trainer: Trainer) -> None:
        raise AssertionError("training started")


def test_bad_validation_file_stops_training_at_start(synth: Path, tmp_path: Path) -> None:
    root = copy_of(synth, tmp_path)
    label = root / "SYN00002" / "SYN00002_upper.json"
    doc = json.loads(label.read_text())
    doc["labels"] = doc["labels"][:-5]
    label.write_text(json.dumps(doc))
    work = tmp_path / "w"
    with pytest.raises(InputError, match=r"validation set: .*SYN00002_upper.json: labels: \d+ labels but the mesh has"):
        Trainer(load_config(None, tiny_overrides(root, work)), hooks=[NoEpoch()])
    assert "SYN00002_upper.json: labels:" in (work / "train.log").read_text()

    v, f = read_mesh(root / "SYN00001" / "SYN00001_lower.obj")  # a training scan in metres
    write_obj(root / "SYN00001" / "SYN00001_lower.obj", v / 1000, f, precision=9)
    with pytest.raises(InputError, match=r"training set: .*SYN00001_lower.obj: .*looks like m, not mm"):
        Trainer(load_config(None, tiny_overrides(root, tmp_path / "w2")))


def test_mirrored_training_scans_are_warned_about(synth: Path, tmp_path: Path) -> None:
    root = copy_of(synth, tmp_path)
    label = root / "SYN00000" / "SYN00000_upper.json"
    doc = json.loads(label.read_text())
    doc["labels"] = mirror_fdi(np.array(doc["labels"])).tolist()
    label.write_text(json.dumps(doc))
    work = tmp_path / "w"
    trainer = Trainer(load_config(None, tiny_overrides(root, work)))
    trainer.close()
    warnings = [ln for ln in (work / "train.log").read_text().splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "SYN00000_upper.obj: quadrant 2 lies on the patient's right" in warnings[0]
