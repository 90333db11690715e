"""The warm-up switch: RelPos off for the first N epochs, then on (optionally ramped in over M epochs)."""
from __future__ import annotations

from typing import Any

from .hooks import Hook, TrainerView


def relpos_factor(epoch: int, warmup_epochs: int, ramp_epochs: int) -> float:
    """Multiplier of the RelPos contribution in ``epoch`` (0-based): 0 while warming up, then a linear
    ramp reaching 1 in the M-th epoch after the switch, then 1."""
    if epoch < warmup_epochs:
        return 0.0
    if ramp_epochs <= 0:
        return 1.0
    return min(1.0, (epoch - warmup_epochs + 1) / ramp_epochs)


def set_relpos_factor(model: Any, factor: float) -> float:
    """Switch every RelPos module of ``model`` off (factor 0) or on with its contribution times ``factor``."""
    for _, module in model.relpos_modules():
        module.enabled = factor > 0.0
        module.ramp = factor
    return factor


class WarmupSwitch(Hook):
    """Sets ``enabled``/``ramp`` of every RelPos module at the start of each epoch (buffers: checkpoints
    carry them, so a plain ``load_state_dict`` restores the state).

    The state is a pure function of the epoch, so a resumed run lands in the same state; the last
    applied factor is still checkpointed so logs and checks can see it.
    """

    name = "warmup"

    def __init__(self, warmup_epochs: int, ramp_epochs: int = 0) -> None:
        if warmup_epochs < 0 or ramp_epochs < 0:
            raise ValueError("warmup.epochs and warmup.ramp_epochs must be >= 0")
        self.warmup_epochs = warmup_epochs
        self.ramp_epochs = ramp_epochs
        self.factor: float | None = None

    def apply(self, model: Any, epoch: int) -> float:
        return set_relpos_factor(model, relpos_factor(epoch, self.warmup_epochs, self.ramp_epochs))

    def before_epoch(self, trainer: TrainerView) -> None:
        factor = self.apply(trainer.net, trainer.epoch)
        if factor != self.factor and trainer.net.relpos_modules():
            trainer.log(f"warm-up switch: epoch {trainer.epoch}: RelPos {'on' if factor > 0 else 'off'}"
                        + (f", contribution x{factor:.2f}" if 0 < factor < 1 else ""))
        self.factor = factor
        if trainer.writer is not None:
            trainer.writer.add_scalar("warmup/relpos_factor", factor, trainer.iteration)

    def state_dict(self) -> dict[str, Any]:
        return {"factor": self.factor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.factor = state.get("factor")
