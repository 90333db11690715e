"""Segmenting whole scans with a trained checkpoint: load, preprocess like the eval set, predict every vertex."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..config import ConfigError
from .checkpoint import CheckpointError, check_model_config, load_checkpoint, load_model_weights
from .evaluate import autocast
from .warmup import restore_relpos_state


@dataclass
class Prediction:
    """Per-vertex result for one scan: class ids, FDI labels, class probabilities, the aligned vertices."""

    classes: np.ndarray
    fdi: np.ndarray
    probs: np.ndarray
    aligned: np.ndarray


def load_trained(checkpoint: str | Path, device: torch.device,
                 config: dict[str, Any] | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """The trained network in eval mode, with RelPos in its trained warm-up state, and its config.

    ``config`` None builds the model from the config stored in the checkpoint; a resolved config (e.g.
    the one ``tools/test.py --config`` names) is used instead when given.
    """
    from .. import build_model

    state = load_checkpoint(checkpoint, map_location="cpu")
    if config is None:
        if "config" not in state:
            raise CheckpointError(f"{checkpoint}: no config stored in the checkpoint")
        config = state["config"]
    check_model_config(state, config, checkpoint)  # one line naming the keys, not torch's size-mismatch dump
    try:
        model = build_model(config)
    except ValueError as exc:
        raise ConfigError(f"{checkpoint}: config does not build a model: {exc}") from None
    load_model_weights(model, state["model"], checkpoint)
    restore_relpos_state(model, state)
    return model.to(device).eval(), config


@torch.no_grad()
def segment_scan(model: nn.Module, scan: Any, cfg: dict[str, Any], device: torch.device) -> Prediction:
    """Predict every vertex of ``scan`` (a ``pointmamba.data.Scan``) at full resolution.

    The scan is preprocessed exactly as the eval split is (canonical pose, centring, normals, grid
    sampling in test mode); every vertex takes the prediction of its voxel's representative point.
    """
    from ..data import class_to_fdi, collate
    from ..data.dataset import make_item, preprocess_scan

    d = cfg["data"]
    if d["num_classes"] == 17 and scan.jaw is None:
        raise ValueError(f"{scan.path}: jaw unknown: name the file *_upper / *_lower or pass --jaw upper|lower "
                         "(the 17-class model numbers teeth per jaw)")
    arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
    item = make_item(arrays, name=scan.name, num_classes=d["num_classes"], grid_size=d["grid_size"],
                     align=d["align"], mode="test")
    batch = collate([item]).to(device)
    with autocast(device, bool(cfg["train"]["amp"])):
        logits = model(batch)
    probs_rows = torch.softmax(logits.float(), 1)
    probs = probs_rows[batch.extra["inverse"]].cpu().numpy()
    classes = probs.argmax(1)
    fdi = class_to_fdi(classes, scan.jaw, d["num_classes"])
    transform = np.asarray(item["transform"])
    aligned = scan.vertices @ transform[:3, :3].T + transform[:3, 3]
    return Prediction(classes=classes, fdi=fdi, probs=probs, aligned=aligned)
