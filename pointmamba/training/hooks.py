"""Engine hooks: small objects the trainer calls at fixed points; their state is checkpointed.

Imports go one way: the trainer imports the hooks (this module, ``warmup``, ``diagnostics``), never the
reverse. What a hook may use of the trainer is :class:`TrainerView`, a protocol the trainer satisfies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from torch import nn


class TrainerView(Protocol):
    """The trainer as hooks see it (``pointmamba.training.trainer.Trainer`` has all of it)."""

    net: nn.Module  # the bare model (not DDP-wrapped)
    cfg: dict[str, Any]
    epoch: int  # 0-based epoch in progress
    iteration: int  # optimizer steps done
    steps_per_epoch: int
    writer: Any  # TensorBoard SummaryWriter on the main process, else None
    work_dir: Path

    def log(self, msg: str) -> None: ...


class Hook:
    """Override what you need. ``trainer`` exposes model, optimizer, epoch, iteration, writer, cfg."""

    name = "hook"

    def before_train(self, trainer: TrainerView) -> None: ...

    def before_epoch(self, trainer: TrainerView) -> None: ...

    def before_step(self, trainer: TrainerView) -> None: ...

    def after_backward(self, trainer: TrainerView) -> None:
        """Gradients are populated (before clipping and the optimizer step)."""

    def after_step(self, trainer: TrainerView, loss: float) -> None: ...

    def after_epoch(self, trainer: TrainerView) -> None:
        """Called after validation and after the epoch's checkpoint is written."""

    def after_train(self, trainer: TrainerView) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
