"""The model that ships with pointmamba, and the compact format it is stored in.

``DEFAULT_MODEL`` is what ``tools/predict.py`` and ``tools/test.py`` use without ``--checkpoint`` and what
``train.init_from: pretrained`` fine-tunes from. Its provenance (training data, recipe, measured
figures) is in ``MODEL_CARD.md`` beside it. A compact file holds float16 weights, the training config and
the RelPos warm-up state; nothing but tensors and plain values, so it loads with
``torch.load(weights_only=True)``, and ``load_trained`` reads it like any checkpoint. A file may hold more
networks under ``average_with``, whose probabilities inference averages with the first's
(``inference/averaged_networks.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = HERE / "teeth17_shared_data.pth"
FORMAT = "pointmamba-compact-1"


def resolve_checkpoint(name: str | Path | None) -> Path:
    """``None`` or ``"pretrained"``: the shipped model; anything else: that path."""
    if name is None or str(name) == "pretrained":
        if not DEFAULT_MODEL.is_file():
            raise FileNotFoundError(f"{DEFAULT_MODEL}: the shipped model is missing from this installation; "
                                    "pass --checkpoint FILE")
        return DEFAULT_MODEL
    return Path(name)


def export_compact(state: dict[str, Any], out: str | Path, provenance: dict[str, Any] | None = None,
                   average_with: list[tuple[dict[str, Any], dict[str, Any]]] | None = None) -> Path:
    """Write a checkpoint's weights as float16 with its config and warm-up state (no optimizer, no RNG);
    ``average_with``: more (checkpoint state, provenance) whose networks inference averages with it."""
    from .checkpoint import save_checkpoint

    compact = {"format": FORMAT, **_compact_network(state, provenance)}
    if average_with:  # the first network stays at the top: fine-tuning and older versions read it alone
        compact["average_with"] = [_compact_network(s, p) for s, p in average_with]
    save_checkpoint(compact, out)
    return Path(out)


def _compact_network(state: dict[str, Any], provenance: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "model": {k: (v.half() if v.is_floating_point() else v) for k, v in state["model"].items()},
        # no ``infer`` section: inference takes the installed version's defaults (and the user's --set)
        "config": {k: v for k, v in state["config"].items() if k != "infer"},
        "hooks": {"warmup": dict(state.get("hooks", {}).get("warmup", {}))},
        "epoch": int(state.get("epoch", 0)),
        "provenance": dict(provenance or {}),
        # the names of its training scans (training/training_scans.py); a file without them has them
        # derived from its config where that determines them
        **({"train_scans": list(state["train_scans"])} if isinstance(state.get("train_scans"), list) else {}),
    }
