"""Warm-up switch: RelPos off (bit-identical to a model without it) before the switch, on after, ramped,
logged, and restored on resume."""
from __future__ import annotations

import pytest
import torch

from pointmamba import build_model
from pointmamba.training.warmup import WarmupSwitch, relpos_factor
from pointmamba.point.batch import PointBatch

from support.tiny import TINY_MODEL_SECTION as TINY, run_training as _run



pytestmark = pytest.mark.usefixtures("one_thread")


def _batch() -> PointBatch:
    g = torch.Generator().manual_seed(1)
    return PointBatch.from_list([torch.rand(300, 3, generator=g) * 15, torch.rand(200, 3, generator=g) * 15],
                                grid_size=0.5)


def test_factor_schedule():
    assert [relpos_factor(e, 2, 0) for e in range(4)] == [0.0, 0.0, 1.0, 1.0]
    assert [relpos_factor(e, 2, 4) for e in range(7)] == [0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert [relpos_factor(e, 0, 0) for e in range(2)] == [1.0, 1.0]
    with pytest.raises(ValueError):
        WarmupSwitch(-1)


@pytest.fixture(scope="module")
def nets():
    torch.manual_seed(0)
    with_relpos = build_model({**TINY, "position": "cpe+relpos"}).eval()
    without = build_model({**TINY, "position": "cpe"}).eval()
    missing, unexpected = without.load_state_dict(with_relpos.state_dict(), strict=False)
    assert not missing and unexpected and all("relpos" in k for k in unexpected)
    return with_relpos, without


def _out(net) -> torch.Tensor:
    with torch.no_grad():
        return net(_batch())


def test_bit_identical_to_relpos_off_before_switch_and_different_after(nets):
    net, cpe_only = nets
    reference = _out(cpe_only)
    switch = WarmupSwitch(warmup_epochs=2, ramp_epochs=2)
    outputs = {}
    for epoch in range(5):
        factor = switch.apply(net, epoch)
        assert all(m.enabled == (factor > 0) and m.ramp == factor for _, m in net.relpos_modules())
        outputs[epoch] = _out(net)
    assert torch.equal(outputs[0], reference) and torch.equal(outputs[1], reference)
    assert not torch.allclose(outputs[2], reference)  # epoch 2: on at half strength
    assert not torch.allclose(outputs[3], outputs[2])  # epoch 3: full strength
    assert torch.equal(outputs[3], outputs[4])
    for _, m in net.relpos_modules():  # full strength equals a model that never had a warm-up
        m.enabled, m.ramp = True, 1.0
    assert torch.equal(_out(net), outputs[3])


def test_no_relpos_gradients_while_off(nets):
    net, _ = nets
    WarmupSwitch(1).apply(net, 0)
    net.zero_grad(set_to_none=True)
    net(_batch()).sum().backward()
    grads = {n: p.grad for n, p in net.named_parameters()}
    assert all(g is None for n, g in grads.items() if "relpos" in n)
    assert any(g is not None for n, g in grads.items() if "relpos" not in n)
    WarmupSwitch(1).apply(net, 1)
    net.zero_grad(set_to_none=True)
    net(_batch()).sum().backward()
    assert all(p.grad is not None for n, p in net.named_parameters() if "relpos" in n)
    net.zero_grad(set_to_none=True)


# ---------------------------------------------------------------------------------------------- trainer
class _Probe:
    """Records (epoch, enabled of every RelPos, ramp) at each training step."""

    name = "probe"

    def __init__(self) -> None:
        self.seen: list[tuple[int, tuple[bool, ...], float]] = []

    def __getattr__(self, event):  # every other hook event: no-op
        if event.startswith("__"):
            raise AttributeError(event)
        return lambda *a, **k: None

    def before_step(self, trainer) -> None:
        mods = [m for _, m in trainer.net.relpos_modules()]
        self.seen.append((trainer.epoch, tuple(bool(m.enabled) for m in mods), float(mods[0].ramp)))

    def state_dict(self):
        return {}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from support.tiny import write_synthetic

    return write_synthetic(tmp_path_factory.mktemp("synth"))


def _cfg(synth, work):
    from pointmamba.config import load_config

    from support.tiny import tiny_overrides

    # factors per epoch: 0, 0, 0.5, 1
    return load_config(None, tiny_overrides(synth, work, epochs=4) + [
        "train.max_steps_per_epoch=1", "train.val_interval=0", "warmup.epochs=2", "warmup.ramp_epochs=2"])


class _Interrupt(_Probe):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def after_epoch(self, trainer) -> None:
        if trainer.epoch == self.after:
            raise KeyboardInterrupt


def _states(probe):
    return [(e, all(en), r) if all(en) == any(en) else (e, "mixed", r) for e, en, r in probe.seen]


def test_trainer_switches_logs_and_resumes(synth, tmp_path):
    full_probe = _Probe()
    full = _run(_cfg(synth, tmp_path / "full"), hooks=[full_probe])
    assert _states(full_probe) == [(0, False, 0.0), (1, False, 0.0), (2, True, 0.5), (3, True, 1.0)]
    log = (tmp_path / "full" / "train.log").read_text()
    assert "warm-up switch: epoch 0: RelPos off" in log
    assert "warm-up switch: epoch 2: RelPos on, contribution x0.50" in log
    assert "warm-up switch: epoch 3: RelPos on" in log

    for cut_after, expected in ((1, [(1, False, 0.0), (2, True, 0.5), (3, True, 1.0)]),  # resumed before the switch
                                (3, [(3, True, 1.0)])):  # resumed after it
        work = tmp_path / f"cut{cut_after}"
        with pytest.raises(KeyboardInterrupt):
            _run(_cfg(synth, work), hooks=[_Interrupt(cut_after)])
        probe = _Probe()
        resumed = _run(_cfg(synth, work), resume=True, hooks=[probe])
        assert _states(probe) == expected
        assert resumed.hooks[0].factor == 1.0
        a, b = full.net.state_dict(), resumed.net.state_dict()
        for key in a:  # the resumed run followed the same switch schedule: bit-identical weights
            assert torch.equal(a[key], b[key]), f"{key} differs after resuming at epoch {cut_after}"


def test_warmup_state_is_in_the_weights() -> None:
    """``enabled``/``ramp`` are buffers: a plain ``load_state_dict`` restores the state a model was trained in."""
    from pointmamba import build_model

    cfg = {"enc_channels": [8, 8], "enc_depths": [1, 1], "dec_channels": [8], "dec_depths": [1]}
    model = build_model(cfg)
    modules = [m for _, m in model.relpos_modules()]
    assert modules and all(bool(m.enabled) and float(m.ramp) == 1.0 for m in modules)
    for m in modules:
        m.enabled, m.ramp = True, 0.5  # plain values fill the buffers
    state = model.state_dict()
    assert len([k for k in state if k.endswith((".enabled", ".ramp"))]) == 2 * len(modules)
    fresh = build_model(cfg)
    fresh.load_state_dict(state)
    assert all(bool(m.enabled) and float(m.ramp) == 0.5 for _, m in fresh.relpos_modules())


@pytest.mark.parametrize("factor", [0.0, 0.5, None])
def test_old_checkpoint_gets_its_warmup_factor(factor: float | None) -> None:
    """Checkpoints from before the buffers kept the state as the hook's factor: loading puts it in the weights
    (a ``best.pth`` saved during warm-up evaluates with RelPos off; no factor: fully on)."""
    from pointmamba import build_model
    from pointmamba.checkpoints.checkpoint import upgrade_weights

    model = build_model({"enc_channels": [8, 8], "enc_depths": [1, 1], "dec_channels": [8], "dec_depths": [1]})
    old = {k: v for k, v in model.state_dict().items() if not k.endswith((".enabled", ".ramp"))}
    model.load_state_dict(old)  # plain torch loading of old weights: the defaults (on, 1)
    assert all(bool(m.enabled) and float(m.ramp) == 1.0 for _, m in model.relpos_modules())
    hooks = {} if factor is None else {"warmup": {"factor": factor}}
    model.load_state_dict(upgrade_weights({"model": old, "hooks": hooks}))
    expected = 1.0 if factor is None else factor
    assert all(bool(m.enabled) == (expected > 0) and float(m.ramp) == expected for _, m in model.relpos_modules())
