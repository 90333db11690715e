"""Distillation (``train.distill_from``): the teacher's probabilities are each of its networks' own on the
student's points, the loss is the documented one, a teacher the student cannot feed is refused in one
line, and a run records what the teacher saw as its own training scans."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba import build_model
from pointmamba.checkpoints.checkpoint import load_checkpoint, save_checkpoint
from pointmamba.checkpoints.shipped import export_compact
from pointmamba.config import ConfigError, input_features, load_config
from pointmamba.data import collate, load_scan
from pointmamba.data.dataset import make_item, preprocess_scan
from pointmamba.training.distillation import Teacher, distillation_loss

from support.tiny import TINY_MODEL, run_training, tiny_overrides, write_synthetic

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")
WITH_COORDS = TINY_MODEL + ["data.grid_size=0.6"]
NO_COORDS = WITH_COORDS + ["data.coord_feature=false", "model.in_channels=3"]


def _saved(path: Path, overrides: list[str], seed: int, train_scans: list[str] | None = None) -> Path:
    cfg = load_config(None, overrides)
    torch.manual_seed(seed)
    state = {"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}}
    if train_scans is not None:
        state["train_scans"] = train_scans
    save_checkpoint(state, path)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(a model file of two averaged tiny networks, with and without coordinates; its first network alone;
    a synthetic data set)."""
    tmp = tmp_path_factory.mktemp("distill")
    synth = write_synthetic(tmp / "synth", count=3, vertices=2000)
    first = _saved(tmp / "coords.pth", WITH_COORDS, 0, ["SYN00002_upper"])
    second = _saved(tmp / "free.pth", NO_COORDS, 1, ["SYN00002_lower"])
    both = export_compact(load_checkpoint(first), tmp / "pair.pth",
                          average_with=[(load_checkpoint(second), None)])
    return both, first, synth


def _batch(data: dict, scan_path: Path):
    scan = load_scan(scan_path)
    arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
    items = [make_item(arrays, name=scan.name, num_classes=data["num_classes"], grid_size=data["grid_size"],
                       align=data["align"], mode="test", rng=np.random.default_rng(0), **input_features(data))]
    return collate(items)


def test_the_teacher_gives_each_networks_own_probabilities_on_the_students_points(pair) -> None:
    both, _, synth = pair
    scan = next(iter(sorted(synth.rglob("SYN00000_upper.obj"))))
    student = load_config(None, WITH_COORDS)
    teacher = Teacher(both, student, CPU)
    assert len(teacher) == 2
    batch = _batch(student["data"], scan)
    feat = batch.feat.clone()
    got = teacher.probabilities(batch, temperature=2.0)
    assert torch.equal(batch.feat, feat)  # the student's features are given back
    expected = []
    for net, cfg in teacher.members:  # each network on a batch of its own input layout
        with torch.no_grad():
            expected.append(torch.softmax(net(_batch(cfg["data"], scan)).float() / 2.0, 1))
    assert (expected[0] - expected[1]).abs().max() > 1e-3  # two different networks: the check can fail
    torch.testing.assert_close(got, (expected[0] + expected[1]) / 2, rtol=0, atol=1e-6)


def test_the_loss_is_t_squared_kl_from_the_teacher() -> None:
    g = torch.Generator().manual_seed(0)
    logits, teacher = torch.randn(50, 17, generator=g), torch.softmax(torch.randn(50, 17, generator=g), 1)
    for t in (1.0, 3.0):
        s = torch.log_softmax(logits.double() / t, 1)
        reference = t * t * (teacher.double() * (teacher.double().log() - s)).sum(1).mean()
        assert float(distillation_loss(logits, teacher, t)) == pytest.approx(float(reference), rel=1e-5)
    assert float(distillation_loss(teacher.log(), teacher)) == pytest.approx(0.0, abs=1e-6)


def test_a_teacher_the_student_cannot_feed_is_refused_in_one_line(pair, tmp_path: Path) -> None:
    both, _, _ = pair
    with pytest.raises(ConfigError, match=r"takes the coords as input.*set data\.coord_feature: true"):
        Teacher(both, load_config(None, NO_COORDS), CPU)
    with pytest.raises(ConfigError, match=r"data\.grid_size=0\.6, the student 0\.5"):
        Teacher(both, load_config(None, TINY_MODEL + ["data.grid_size=0.5"]), CPU)
    with pytest.raises(ConfigError, match="train.distill_weight"):
        load_config(None, ["train.distill_weight=1.5"])


def test_a_distilled_run_learns_the_documented_loss_and_owns_the_teachers_scans(pair, tmp_path: Path) -> None:
    from pointmamba.training.trainer import Trainer

    both, _, synth = pair
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "w", epochs=1) + [
        f"train.distill_from={both}", "train.distill_weight=0.75", "train.distill_temperature=2.0"])
    trainer = Trainer(cfg)
    try:
        batch = next(iter(trainer.train_loader))
        torch.manual_seed(5)
        with torch.no_grad():
            logits = trainer.model(batch)
            soft = trainer.teacher.probabilities(batch, 2.0)
        target = batch.extra["segment"]
        expected = 0.25 * float(torch.nn.functional.cross_entropy(logits, target, ignore_index=-100)) \
            + 0.75 * float(distillation_loss(logits, soft, 2.0))
        torch.manual_seed(5)
        assert trainer.train_step(batch) == pytest.approx(expected, rel=1e-5)
        # what the teacher's networks trained on is fit, not held out, for this run too
        assert {"SYN00002_upper", "SYN00002_lower"} <= set(trainer.train_scans)
    finally:
        trainer.close()
    finished = run_training(load_config(None, tiny_overrides(synth, tmp_path / "w2", epochs=1) + [
        f"train.distill_from={both}"]))
    assert np.isfinite(finished.last_finite_loss)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "w2" / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    assert {"train/loss", "train/loss_labels", "train/loss_teacher"} <= set(events.Tags()["scalars"])


def test_the_recipe_can_learn_from_the_shipped_pair() -> None:
    """The shipped pair's two layouts (coordinates, normals, jaw; normals, jaw) out of the recipe's input."""
    recipe = load_config(Path(__file__).resolve().parents[1] / "configs" / "shared_data_recipe.yaml")
    teacher = Teacher("pretrained", recipe, CPU)
    assert teacher.columns == [list(range(7)), [3, 4, 5, 6]]
