"""Training a network on a teacher's probabilities as well as on the labels (``train.distill_from``).

Issue 45 asks whether one network can carry the averaged pair's accuracy at half its prediction time. The
student is trained on ``(1 - w) * cross-entropy(labels) + w * T^2 * KL(teacher || student)`` per point, the
teacher's probabilities those of its averaged networks on the very points of the training batch (the same
augmentation, the same grid sample), each network fed its own input channels from the student's: the
student's inputs must hold every channel a teacher network takes (``data.coord_feature``,
``data.jaw_feature``), on the same grid. ``w`` is ``train.distill_weight``, ``T`` ``train.distill_temperature``
(Hinton et al.'s ``T^2`` keeps the soft term's gradient scale as ``T`` changes).

Whether a student is kept is decided by the rule written down before its runs: docs/results/distillation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..config import ConfigError, input_columns


class Teacher:
    """The averaged networks of a model file, predicting on a student's training batches."""

    def __init__(self, checkpoint: str | Path, student: dict[str, Any], device: torch.device) -> None:
        from ..checkpoints.checkpoint import load_checkpoint
        from ..checkpoints.shipped import resolve_checkpoint
        from ..inference.averaged_networks import inference_members
        from ..inference.pipeline import load_trained
        from .training_scans import of_state

        path = resolve_checkpoint(None if str(checkpoint) == "pretrained" else checkpoint)
        state = load_checkpoint(path)  # read once: the networks and the scans each saw
        model, cfg = load_trained(path, device, state=state)
        # each network's training scans (None: unknown): the student's run owns them
        self.training_scans = [of_state(m) for m in [state] + list(state.get("average_with") or [])]
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        self.members = inference_members(model, {**cfg, "infer": {"average_networks": True}})
        self.columns = [_columns(student["data"], c["data"], f"{path} (network {k})")
                        for k, (_, c) in enumerate(self.members, 1)]
        self.path = path

    def __len__(self) -> int:
        return len(self.members)

    @torch.no_grad()
    def probabilities(self, batch: Any, temperature: float = 1.0) -> Tensor:
        """(N, C) float32: the mean over the teacher's networks of ``softmax(logits / temperature)`` on the
        rows of ``batch`` (a student's batch; its features are restored afterwards)."""
        feat = batch.feat
        total = None
        try:
            for (net, _), cols in zip(self.members, self.columns):
                batch.feat = feat[:, cols]
                probs = torch.softmax(net(batch).float() / temperature, dim=1)
                total = probs if total is None else total + probs
        finally:
            batch.feat = feat
        assert total is not None
        return total / len(self.members)


def _columns(student: dict[str, Any], teacher: dict[str, Any], where: str) -> list[int]:
    """The columns of the student's input that a teacher network takes, in its order; ConfigError naming
    the key where the student lacks a channel or the points differ."""
    for key in ("num_classes", "grid_size", "align"):
        if student.get(key) != teacher.get(key):
            raise ConfigError(f"train.distill_from: {where} has data.{key}={teacher.get(key)!r}, the student "
                              f"{student.get(key)!r}: a teacher must see the student's points and classes")
    try:
        return input_columns(student, teacher)
    except KeyError as exc:
        part = exc.args[0]
        key = {"coords": "data.coord_feature", "jaw": "data.jaw_feature"}[part]
        raise ConfigError(f"train.distill_from: {where} takes the {part} as input, the student does not: "
                          f"set {key}: true (the student's inputs must hold every teacher's)") from None


def distillation_loss(logits: Tensor, teacher_probs: Tensor, temperature: float = 1.0) -> Tensor:
    """``T^2 * mean over points of KL(teacher || softmax(logits / T))`` (nats)."""
    log_student = F.log_softmax(logits.float() / temperature, dim=1)
    kl = F.kl_div(log_student, teacher_probs, reduction="none").sum(1)
    return temperature ** 2 * kl.mean()
