"""Optimizer and learning-rate schedule."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only: not on biases, norms, or parameters flagged
    ``_no_weight_decay`` (Mamba's A_log and D, RelPos scale and gate bias)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if getattr(p, "_no_weight_decay", False) or p.ndim <= 1 or name.endswith(".bias"):
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, cfg: dict[str, Any]) -> torch.optim.Optimizer:
    t = cfg["train"]
    if t["optimizer"] != "adamw":
        raise ValueError(f"train.optimizer: only 'adamw' is supported, got {t['optimizer']!r}")
    groups = param_groups(model, t["weight_decay"])
    return torch.optim.AdamW(groups, lr=t["lr"], betas=tuple(t["betas"]), **_fused_if_possible(groups))


def _fused_if_possible(groups: list[dict[str, Any]]) -> dict[str, bool]:
    """torch's fused AdamW where every parameter allows it (float, one CPU or CUDA device): one kernel
    instead of a loop of small ops per parameter. Measured on the default model, CPU, 2 threads: 7.9 ms
    per step instead of 44.6 ms. Deterministic, but not bit-identical to the loop implementation."""
    params = [p for g in groups for p in g["params"]]
    devices = {p.device.type for p in params}
    ok = bool(params) and len(devices) == 1 and devices <= {"cpu", "cuda"} and all(p.is_floating_point() for p in params)
    return {"fused": True} if ok else {}


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: dict[str, Any], total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """Per-step schedule: linear warm-up then cosine decay (``onecycle``/``cosine``) or constant."""
    t = cfg["train"]
    kind = t["schedule"]
    warm = max(1, int(total_steps * t["lr_warmup_pct"])) if kind != "constant" else 0
    total = max(total_steps, warm + 1)

    def factor(step: int) -> float:
        if kind == "constant":
            return 1.0
        if step < warm:
            return (step + 1) / warm
        progress = min(1.0, (step - warm) / max(1, total - warm))
        floor = 1e-3 if kind == "onecycle" else 0.0
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    if kind not in ("onecycle", "cosine", "constant"):
        raise ValueError(f"train.schedule must be onecycle, cosine or constant, got {kind!r}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
