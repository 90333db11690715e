"""Engine hooks: small objects the trainer calls at fixed points; their state is checkpointed."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trainer import Trainer


class Hook:
    """Override what you need. ``trainer`` exposes model, optimizer, epoch, iteration, writer, cfg."""

    name = "hook"

    def before_train(self, trainer: "Trainer") -> None: ...

    def before_epoch(self, trainer: "Trainer") -> None: ...

    def before_step(self, trainer: "Trainer") -> None: ...

    def after_backward(self, trainer: "Trainer") -> None:
        """Gradients are populated (before clipping and the optimizer step)."""

    def after_step(self, trainer: "Trainer", loss: float) -> None: ...

    def after_epoch(self, trainer: "Trainer") -> None:
        """Called after validation and after the epoch's checkpoint is written."""

    def after_train(self, trainer: "Trainer") -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
