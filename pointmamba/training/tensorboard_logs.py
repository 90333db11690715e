"""What the trainer writes to TensorBoard beside its scalars: the config and its hyperparameters, per-tooth
IoU under FDI names, and a picture of one validation prediction.

Tags: ``config`` (text: the resolved config as YAML); the HPARAMS tab (every config key with a number, switch
or word as its value, lists as text; metrics ``val/miou``, ``val/loss``, ``train/epoch_loss``);
``val_iou/<jaw>/<FDI>`` (``val_iou/upper/21``, ``val_iou/lower/gingiva``: a class id is another tooth in
each jaw); ``val/prediction`` (image: the first validation scan, reference above and prediction below, wrong
vertices black, also kept as ``<work dir>/val_pictures/epoch_NNN.png``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

HPARAM_METRICS = ("val/miou", "val/loss", "train/epoch_loss")
"""Scalars the HPARAMS tab shows beside each run's hyperparameters (their latest values)."""


def hparam_values(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config flattened to ``section.key: value`` with values TensorBoard's hparams accept (numbers,
    bools, text); lists, dicts and None as text."""
    from ..config import flatten

    out: dict[str, Any] = {}
    for key, value in flatten({k: v for k, v in cfg.items() if not k.startswith("_")}).items():
        out[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    return out


def log_config(writer: Any, cfg: dict[str, Any]) -> None:
    """The resolved config as text and as hyperparameters (HPARAMS tab, in the run's own folder)."""
    import yaml
    from torch.utils.tensorboard.summary import hparams

    text = yaml.safe_dump({k: v for k, v in cfg.items() if not k.startswith("_")}, sort_keys=False)
    writer.add_text("config", "".join("    " + line + "\n" for line in text.splitlines()))  # a Markdown code block
    experiment, start, end = hparams(hparam_values(cfg), {m: 0.0 for m in HPARAM_METRICS})
    file_writer = writer._get_file_writer()  # add_hparams would open a second run folder; these go in this one
    for summary in (experiment, start, end):
        file_writer.add_summary(summary)


def fdi_tag_names(num_classes: int, jaw: str) -> list[str]:
    """Per class id, its name in ``jaw``: the FDI number, or ``gingiva`` for class 0."""
    from ..data.fdi import class_to_fdi

    fdi = class_to_fdi(np.arange(num_classes), jaw if num_classes == 17 else None, num_classes)
    return ["gingiva" if f == 0 else str(int(f)) for f in fdi]


def log_class_iou(writer: Any, iou_by_jaw: dict[str, list[float]], num_classes: int, step: int) -> None:
    """``val_iou/<jaw>/<FDI>`` for every class present in that jaw's validation scans."""
    for jaw, ious in iou_by_jaw.items():
        for name, value in zip(fdi_tag_names(num_classes, jaw), ious):
            if value == value:  # NaN: the class is absent from this jaw's targets and predictions
                writer.add_scalar(f"val_iou/{jaw}/{name}", value, step)


@torch.no_grad()
def log_val_picture(writer: Any, net: torch.nn.Module, dataset: Any, cfg: dict[str, Any], device: torch.device,
                    path: Path, epoch: int, step: int) -> Path:
    """Predict the first validation scan, render it (``inference/render.py``: reference above, prediction
    below) to ``path`` and add it to TensorBoard as ``val/prediction``."""
    from PIL import Image

    from ..data import class_colors, class_to_fdi, collate, fdi_to_class, load_scan
    from ..inference.pipeline import predict_batch
    from ..inference.render import render_segmentation

    num_classes = cfg["data"]["num_classes"]
    was_training = net.training
    net.eval()
    try:
        batch, logits = predict_batch(net, collate([dataset[0]]), device)
    finally:
        net.train(was_training)
    classes = logits.argmax(1)[batch.extra["vertex_row"]].cpu().numpy()
    scan = load_scan(dataset.paths[0])
    jaw = scan.jaw or batch.extra["jaw"][0]
    fdi = class_to_fdi(classes, jaw, num_classes)
    reference = None if scan.labels is None else np.asarray(scan.labels, dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    render_segmentation(path, dataset.aligned_vertices(0), scan.faces, fdi, class_colors(num_classes), classes,
                        f"{dataset.names[0]} ({jaw}), epoch {epoch}", reference,
                        None if reference is None else fdi_to_class(reference, jaw, num_classes))
    with Image.open(path) as image:
        writer.add_image("val/prediction", np.asarray(image.convert("RGB")), step, dataformats="HWC")
    return path
