"""How long ``pointmamba-ablate``'s runs will take, printed before the first one starts.

A run that already has epochs (an interrupted one, resumed) is timed by its own epochs (``epoch_s`` in its
metrics.jsonl). The others by one training step of the first config still to run, timed here after a warm-up
step (the first pays for compiling kernels and reading scans): seconds a step x steps an epoch x epochs left,
for each run (steps an epoch from each run's own training set, batch size and ``train.max_steps_per_epoch``).
Validation and the runs' start-up come on top; with ``--jobs N`` runs share the cores, so the wall time is
the sum over N at best.
"""
from __future__ import annotations

import math
import time
from typing import Any


def steps_per_epoch(cfg: dict[str, Any]) -> int:
    """Training steps an epoch of a run with resolved config ``cfg`` takes (one process)."""
    from pointmamba.training.data_builders import build_dataset

    train = build_dataset(cfg, "train", train=True)
    draws = len(train) + sum(max(0, int(n) - 1) for n in (cfg["data"].get("scan_repeats") or {}).values())
    steps = math.ceil(draws / cfg["train"]["batch_size"])
    cap = cfg["train"]["max_steps_per_epoch"]
    return min(steps, cap) if cap else steps


def time_one_step(cfg: dict[str, Any]) -> float:
    """Seconds one training step of ``cfg``'s model takes on its first batch here (the second of two steps:
    the first compiles and reads)."""
    import torch

    from pointmamba import build_model
    from pointmamba.data import collate
    from pointmamba.utils.device import resolve_device
    from pointmamba.training.data_builders import build_dataset
    from pointmamba.training.loss import segmentation_loss
    from pointmamba.training.optim import build_optimizer

    device = resolve_device(cfg["train"]["device"])
    train = build_dataset(cfg, "train", train=True)
    batch = collate([train[i] for i in range(min(len(train), cfg["train"]["batch_size"]))]).to(device)
    net = build_model(cfg).to(device).train()
    optimizer = build_optimizer(net, cfg)
    seconds = 0.0
    for _ in range(2):
        t0 = time.perf_counter()
        loss = segmentation_loss(net(batch), batch.extra["segment"], 0.0, None, None)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    return seconds


def estimate(plans: list[dict[str, Any]], jobs: int = 1) -> str | None:
    """One line for the runs of ``plans`` still to train (None when none is left)."""
    todo = [p for p in plans if p["status"] != "done"]
    if not todo:
        return None
    step_s: float | None = None
    total, probed = 0.0, None
    for plan in todo:
        left = plan["epochs"] - (plan["records"][-1]["epoch"] if plan["records"] else 0)
        timed = [float(r["epoch_s"]) for r in plan["records"] if r.get("epoch_s")]
        if timed:
            total += left * sum(timed) / len(timed)
            continue
        if step_s is None:
            probed = plan["name"]
            step_s = time_one_step(plan["cfg"])
        total += left * steps_per_epoch(plan["cfg"]) * step_s
    how = f"one training step of {probed} took {step_s:.2f} s here" if probed else "from their finished epochs"
    wall = total / max(jobs, 1)
    return (f"[ablate] time estimate: about {_duration(total)} of training for {len(todo)} run(s)"
            + (f", {_duration(wall)} or more with --jobs {jobs}" if jobs > 1 else "")
            + f" ({how}; validation and start-up come on top)")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
