"""Diagnostics hook: TensorBoard tags, records armed only on interval steps, flags, and the trainer path."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.tensorboard import SummaryWriter

from pointmamba import build_model
from pointmamba.training.diagnostics import DiagnosticsHook, grad_ratios, param_group
from pointmamba.point.batch import PointBatch

from support.tiny import TINY_MODEL_SECTION as TINY



pytestmark = pytest.mark.usefixtures("one_thread")


def _events(logdir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def _batch(seed: int = 0) -> PointBatch:
    g = torch.Generator().manual_seed(seed)
    coords = [torch.rand(300, 3, generator=g) * 15, torch.rand(200, 3, generator=g) * 15]
    return PointBatch.from_list(coords, grid_size=0.5)


class _Trainer(SimpleNamespace):
    """The attributes a hook reads from the trainer (net, writer, iteration, epoch, log)."""

    def log(self, msg: str) -> None:
        self.lines.append(msg)


def _step(hook: DiagnosticsHook, trainer: _Trainer) -> None:
    hook.before_step(trainer)
    trainer.net(_batch(trainer.iteration)).logsumexp(1).mean().backward()
    hook.after_backward(trainer)
    hook.after_step(trainer, 0.0)
    trainer.net.zero_grad(set_to_none=True)
    trainer.iteration += 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Three steps with interval 2: step 2 is a diagnostics step, 1 and 3 are not."""
    torch.manual_seed(0)
    net = build_model(TINY)
    logdir = tmp_path_factory.mktemp("tb")
    writer = SummaryWriter(str(logdir))
    trainer = _Trainer(net=net, writer=writer, iteration=0, epoch=0, lines=[])
    hook = DiagnosticsHook(interval=2)
    armed = []
    for _ in range(3):
        hook.before_step(trainer)
        armed.append([m.record is not None for _, m in net.relpos_modules()])
        trainer.net(_batch(trainer.iteration)).logsumexp(1).mean().backward()
        hook.after_backward(trainer)
        hook.after_step(trainer, 0.0)
        trainer.net.zero_grad(set_to_none=True)
        trainer.iteration += 1
    writer.close()
    return SimpleNamespace(net=net, hook=hook, trainer=trainer, armed=armed, acc=_events(logdir))


def test_writes_expected_tags(run):
    names = [n for n, _ in run.net.relpos_modules()]
    assert names == ["enc0.order0", "enc1.order0", "dec0.order0"]
    scalars = set(run.acc.Tags()["scalars"])
    for n in names:
        for key in ("feat_min", "feat_max", "feat_mean", "feat_std", "dist_emb_mean", "dist_emb_std",
                    "dir_emb_mean", "dir_emb_std", "gate_min", "gate_mean", "gate_max", "contrib_ratio",
                    "scale", "dist_norm_mean", "dist_clip_frac", "norm_scale", "enabled", "ramp"):
            assert f"diag/{n}/{key}" in scalars, f"missing diag/{n}/{key}"
    for g in ("relpos", "cpe", "mixer", "head", "other"):
        for kind in ("grad_ratio", "grad_norm", "param_norm", "flags/exploding", "flags/vanishing"):
            assert f"diag/{kind}/{g}" in scalars
    assert "diag/hook_ms" in scalars
    hists = set(run.acc.Tags()["histograms"])
    assert {f"diag/{n}/{h}" for n in names for h in ("gate", "dist_norm")} <= hists
    # only step 2 (of 1, 2, 3) is a diagnostics step
    assert [e.step for e in run.acc.Scalars("diag/enc0.order0/gate_mean")] == [2]
    assert [e.step for e in run.acc.Scalars("diag/grad_ratio/relpos")] == [2]


def test_values_are_sane(run):
    acc = run.acc
    v = lambda tag: acc.Scalars(tag)[0].value  # noqa: E731
    for n, m in run.net.relpos_modules():
        assert 0.0 <= v(f"diag/{n}/gate_min") <= v(f"diag/{n}/gate_mean") <= v(f"diag/{n}/gate_max") <= 1.0
        # fixed preset: gate bias -2 -> gates start around sigmoid(-2) = 0.12
        assert 0.03 < v(f"diag/{n}/gate_mean") < 0.3
        assert v(f"diag/{n}/scale") == pytest.approx(float(m.scale.detach()), rel=1e-6)
        assert v(f"diag/{n}/feat_min") <= v(f"diag/{n}/feat_mean") <= v(f"diag/{n}/feat_max")
        assert 0.0 < v(f"diag/{n}/contrib_ratio") < 1.0
        assert v(f"diag/{n}/enabled") == 1.0
    groups = run.hook.last["groups"]
    for g, s in groups.items():
        assert v(f"diag/grad_ratio/{g}") == pytest.approx(s["grad_norm"] / s["param_norm"], rel=1e-5)
        assert v(f"diag/flags/exploding/{g}") == float(s["ratio"] > run.hook.threshold(g))  # growth 1 on a first step


def test_records_armed_only_on_interval_steps(run):
    assert run.armed == [[False] * 3, [True] * 3, [False] * 3]
    assert all(m.record is None for _, m in run.net.relpos_modules())
    lines = [ln for ln in run.trainer.lines if ln.startswith("diag step")]
    assert len(lines) == 1 and "gate" in lines[0] and "grad/param" in lines[0] and "\n" not in lines[0]


def test_flags_and_disabled_relpos(tmp_path):
    """Tiny explode threshold flags every group; a switched-off RelPos has no stats and no relpos grads."""
    torch.manual_seed(0)
    net = build_model(TINY)
    for _, m in net.relpos_modules():
        m.enabled = False
    writer = SummaryWriter(str(tmp_path))
    trainer = _Trainer(net=net, writer=writer, iteration=0, epoch=0, lines=[])
    hook = DiagnosticsHook(interval=1, histograms=False, explode_ratio=1e-12, vanish_ratio=1e-13)
    _step(hook, trainer)
    writer.close()
    last = hook.last
    assert "relpos" not in last["groups"]  # no gradient while switched off: not reported as vanishing
    assert set(last["flags"]["exploding"]) == set(last["groups"]) and not last["flags"]["vanishing"]
    assert all("gate_mean" not in s and s["enabled"] == 0.0 for s in last["modules"].values())
    assert "relpos x3: off" in trainer.lines[-1] and "EXPLODING" in trainer.lines[-1]
    acc = _events(tmp_path)
    assert acc.Scalars("diag/flags/exploding/mixer")[0].value == 1.0
    assert "diag/grad_ratio/relpos" not in acc.Tags()["scalars"]
    assert not acc.Tags()["histograms"]


def test_param_groups_and_ratio():
    assert param_group("enc.0.position.relpos.0.gate.weight") == "relpos"
    assert param_group("enc.0.position.cpe.conv.weight") == "cpe"
    assert param_group("cpe_stem.conv.weight") == "cpe"
    assert param_group("enc.1.blocks.0.mixer.fwd.in_proj.weight") == "mixer"
    assert param_group("head.3.bias") == "head"
    assert param_group("enc.1.pool.proj.weight") == "other"
    lin = torch.nn.Linear(2, 2)
    lin.weight.grad = torch.ones(2, 2)
    ratios = grad_ratios(lin)
    assert list(ratios) == ["other"]  # bias has no grad: skipped, not counted as zero
    assert ratios["other"]["ratio"] == pytest.approx(2.0 / float(lin.weight.detach().norm()))


def test_bad_arguments():
    with pytest.raises(ValueError, match="interval"):
        DiagnosticsHook(interval=-1)
    with pytest.raises(ValueError, match="vanish_ratio"):
        DiagnosticsHook(interval=1, explode_ratio=1e-6, vanish_ratio=1e-5)


# ---------------------------------------------------------------------------------------------- trainer
def test_trainer_writes_diagnostics(tmp_path_factory):
    """Through the Trainer (config switch): RelPos off in epoch 1 (warm-up), on in epoch 2."""
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer

    from support.tiny import tiny_overrides, write_synthetic

    root = write_synthetic(tmp_path_factory.mktemp("synth"))
    work = tmp_path_factory.mktemp("run")
    cfg = load_config(None, tiny_overrides(root, work, epochs=2) + [
        "train.max_steps_per_epoch=1", "train.val_interval=0", "diagnostics.interval=1", "warmup.epochs=1"])
    trainer = Trainer(cfg)
    try:
        assert [type(h).__name__ for h in trainer.hooks] == ["WarmupSwitch", "DiagnosticsHook"]
        trainer.train()
    finally:
        trainer.close()
    acc = _events(work / "tb")
    scalars = set(acc.Tags()["scalars"])
    names = [n for n, _ in trainer.net.relpos_modules()]
    assert names and all(f"diag/{n}/gate_mean" in scalars for n in names)
    assert [e.value for e in acc.Scalars(f"diag/{names[0]}/enabled")] == [0.0, 1.0]
    assert [e.step for e in acc.Scalars(f"diag/{names[0]}/gate_mean")] == [2]  # only once switched on
    assert [e.step for e in acc.Scalars("diag/grad_ratio/relpos")] == [2]
    assert [e.step for e in acc.Scalars("diag/grad_ratio/mixer")] == [1, 2]
    assert {f"diag/flags/{k}/{g}" for k in ("exploding", "vanishing") for g in ("cpe", "mixer", "head")} <= scalars
    log = (work / "train.log").read_text()
    assert log.count("diag step") == 2 and "relpos x" in log
    assert all(m.record is None for _, m in trainer.net.relpos_modules())


def test_off_by_default(tmp_path_factory):
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer

    from support.tiny import tiny_overrides, write_synthetic

    root = write_synthetic(tmp_path_factory.mktemp("synth"))
    work = tmp_path_factory.mktemp("run")
    cfg = load_config(None, tiny_overrides(root, work, epochs=1) + ["train.max_steps_per_epoch=1", "train.val_interval=0"])
    assert cfg["diagnostics"]["interval"] == 0
    trainer = Trainer(cfg)
    try:
        assert not any(type(h).__name__ == "DiagnosticsHook" for h in trainer.hooks)
        trainer.train()
    finally:
        trainer.close()
    assert not [t for t in _events(work / "tb").Tags()["scalars"] if t.startswith("diag/")]


def test_epoch_ends_at_init_and_each_epoch_end(tmp_path_factory):
    """``diagnostics.epoch_ends`` with interval 0: the first step and the last step of each epoch, in TensorBoard
    and in diagnostics.jsonl (one line each, with the epoch), which is what pointmamba-ablate tabulates."""
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer

    from support.tiny import tiny_overrides, write_synthetic

    root = write_synthetic(tmp_path_factory.mktemp("synth"))
    work = tmp_path_factory.mktemp("run")
    cfg = load_config(None, tiny_overrides(root, work, epochs=3) + [
        "train.max_steps_per_epoch=2", "train.val_interval=0", "diagnostics.epoch_ends=true"])
    trainer = Trainer(cfg)
    try:
        assert cfg["diagnostics"]["interval"] == 0 and trainer.steps_per_epoch == 2
        trainer.train()
    finally:
        trainer.close()
    lines = [json.loads(x) for x in (work / "diagnostics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["epoch"]) for x in lines] == [(1, 1), (2, 1), (4, 2), (6, 3)]
    names = [n for n, _ in trainer.net.relpos_modules()]
    assert all(0 < x["modules"][n]["gate_mean"] < 1 and x["modules"][n]["contrib_ratio"] > 0 for x in lines for n in names)
    assert all(x["groups"]["relpos"]["ratio"] > 0 for x in lines)
    acc = _events(work / "tb")
    assert [e.step for e in acc.Scalars(f"diag/{names[0]}/gate_mean")] == [1, 2, 4, 6]
