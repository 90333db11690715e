#!/usr/bin/env python3
"""The recipe's training step on its real scans, taken apart: loader, step, dispatched ops, GPU busy time.

    python bench/train_step.py                                   # the recipe (split B), its own device
    python bench/train_step.py --backends torch gather --json F  # each sparse-conv backend in turn
    python bench/train_step.py --config CFG --set data.num_workers=8 --steps 30
    python bench/train_step.py --backends gather --trainer        # and tools/train.py's own step beside it
    python bench/train_step.py --backends gather --amp on off on off   # bf16 autocast against float32, interleaved

Issue 45 asks for a 0.12 s recipe step on a lent GPU; with the Triton scan it stayed at 0.5-0.67 s, though
the same network trains synthetic 96k-point batches at 0.29 s a step (``docs/results/gpu/README.md``). These
rows say where the time goes, one row per ``POINTMAMBA_BACKEND_SPCONV`` value asked (the scan and conv1d
stay as the environment sets them):

- ``loader_s``: seconds per batch of the training DataLoader alone (``data.num_workers`` as configured,
  workers started before the clock);
- ``step_s``: median seconds of a training step on batches already loaded, as the trainer runs it (forward
  under its autocast, the loss, backward, grad clip, fused AdamW), the device synchronised around each;
- ``ops`` / ``host_waits``: aten calls dispatched in one step (a TorchDispatchMode count: on CUDA each is a
  kernel launch or a view) and those that make the host wait for the device (``.item()``, ``nonzero``,
  ``unique``);
- ``first_step_s``: the first step, compiles included (Triton, numba);
- CUDA only, from ``torch.profiler`` over 3 steps: ``gpu_busy_s`` (kernel time per step), ``kernels`` per
  step, and the ten kernels and ten CPU ops that take longest (in the JSON).

Reading: ``step_s`` well above ``gpu_busy_s`` means the step waits on the host (launches, Python, waits),
not on the GPU's arithmetic; ``loader_s`` above ``step_s`` means the loader starves it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402

tune_cpu_runtime()  # as tools/ do, before torch is imported

import torch  # noqa: E402

from gpu_check import sync  # noqa: E402 - bench/, this script's folder
from pointmamba.utils.op_count import OpCount  # noqa: E402

RECIPE = ROOT / "configs" / "shared_data_recipe_split2.yaml"


def make_step(cfg: dict[str, Any], device: torch.device):  # noqa: ANN201
    """The trainer's step (loss, backward, clip, optimizer) on a fresh seeded network of ``cfg``, bare: no
    class or scan weights in the loss, no hooks, checks or logs (``--trainer`` times those too).

    (``torch.compile`` on each Mamba block failed its pre-registered rule on an H200, 0.78x the eager step:
    ``docs/results/gpu/README.md``; the option is at commit 7610f60.)"""
    from pointmamba.models.network import build_model
    from pointmamba.training.loss import segmentation_loss
    from pointmamba.training.optim import build_optimizer
    from pointmamba.utils.device import autocast

    torch.manual_seed(cfg["seed"])
    model = build_model(cfg).to(device).train()
    optimizer = build_optimizer(model, cfg)
    t = cfg["train"]
    amp = bool(t["amp"]) and device.type == "cuda"

    def step(batch: Any) -> float:
        with autocast(device, amp):
            logits = model(batch)
        loss = segmentation_loss(logits, batch.extra["segment"], t["label_smoothing"])
        loss.backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())  # the trainer reads the loss every step too

    return step


def make_trainer_step(cfg: dict[str, Any], device: torch.device):  # noqa: ANN201
    """The trainer's own ``train_step`` (its hooks, the non-finite check, the scheduler, TensorBoard's loss
    line) on a fresh seeded network of ``cfg``, writing to a temporary work dir: what ``tools/train.py``
    pays a step beyond :func:`make_step`."""
    import tempfile

    from pointmamba.training.trainer import Trainer

    work_dir = Path(tempfile.mkdtemp(prefix="train_step_")) / "run"
    trainer = Trainer({**cfg, "work_dir": str(work_dir), "train": {**cfg["train"], "progress": False, "device": device.type}})
    return trainer.train_step


def loader_seconds(dataset: Any, cfg: dict[str, Any], batches: int) -> tuple[float, list[Any]]:
    """Seconds per batch of a training DataLoader over ``dataset``, and the batches it gave."""
    from torch.utils.data import DataLoader

    from pointmamba.data import collate

    loader = DataLoader(dataset, batch_size=cfg["train"]["batch_size"], shuffle=True, collate_fn=collate,
                        num_workers=cfg["data"]["num_workers"], generator=torch.Generator().manual_seed(0))
    def endless():  # noqa: ANN202 - a small set runs out of batches before the steps do
        while True:
            yield from loader

    it = endless()
    got = [next(it)]  # the workers' start is not the steady state
    t0 = time.perf_counter()
    got += [next(it) for _ in range(batches)]
    return (time.perf_counter() - t0) / batches, got


def cuda_profile(step: Any, batches: list[Any], device: torch.device) -> dict[str, Any]:
    """Kernel time and count per step, and the longest kernels and CPU ops, over ``len(batches)`` steps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for b in batches:
            step(b)
        sync(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    n = len(batches)
    averages = prof.key_averages()
    top_gpu = sorted(averages, key=lambda e: -e.self_device_time_total)[:10]
    top_cpu = sorted(averages, key=lambda e: -e.self_cpu_time_total)[:10]
    return {"gpu_busy_s": sum(e.device_time_total for e in kernels) / 1e6 / n, "kernels": len(kernels) / n,
            "top_kernels": [[e.key, e.count // n, e.self_device_time_total / 1e3 / n] for e in top_gpu],
            "top_cpu_ops": [[e.key, e.count // n, e.self_cpu_time_total / 1e3 / n] for e in top_cpu]}


def measure(cfg: dict[str, Any], device: torch.device, backend_name: str, steps: int, dataset: Any,
            trainer: bool = False) -> dict[str, Any]:
    """One row: ``POINTMAMBA_BACKEND_SPCONV=backend_name`` for the step (``trainer``: the trainer's own)."""
    os.environ["POINTMAMBA_BACKEND_SPCONV"] = backend_name
    # batches of its own (the same scans each row): a batch keeps the neighbour maps and curve routes built
    # for it, which would spare the next row their cost
    loader_s, batches = loader_seconds(dataset, cfg, steps)
    batches = [b.to(device) for b in batches]
    step = make_trainer_step(cfg, device) if trainer else make_step(cfg, device)
    sync(device)
    t0 = time.perf_counter()
    step(batches[0])  # compiles (Triton, numba) and builds caches outside the step's clock
    sync(device)
    first_s = time.perf_counter() - t0
    seconds = []
    for b in batches[1:]:
        sync(device)
        t0 = time.perf_counter()
        step(b)
        sync(device)
        seconds.append(time.perf_counter() - t0)
    with OpCount() as count:
        step(batches[0])
    row: dict[str, Any] = {
        "spconv": backend_name, "step": "trainer" if trainer else "bare", "device": str(device),
        "steps": len(seconds), "first_step_s": first_s,
        "points_per_step": statistics.mean(len(b) for b in batches), "loader_s": loader_s,
        "step_s": statistics.median(seconds), "step_min_s": min(seconds),
        "ops": sum(count.ops.values()), "host_waits": count.host_waits,
        "top_ops": count.ops.most_common(12),
    }
    if device.type == "cuda":
        row.update(cuda_profile(step, batches[1:4], device))
    return row


AMP_RULE = 0.90  # float32 trains the GPU recipe at most at this fraction of bf16's step (docs/results/gpu/log.md)


def amp_verdict(rows: list[dict[str, Any]]) -> str | None:
    """The pre-registered rule on rows of both kinds (``--amp on off ...``): float32's mean step against bf16
    autocast's; None where the rows are not of both kinds (on the CPU every row is float32)."""
    bf16 = [r["step_s"] for r in rows if r["amp"]]
    fp32 = [r["step_s"] for r in rows if not r["amp"]]
    if not bf16 or not fp32:
        return None
    fp32_s, bf16_s = statistics.mean(fp32), statistics.mean(bf16)
    ratio = fp32_s / bf16_s
    return (f"verdict: float32 {fp32_s:.3f} s a step against bf16 {bf16_s:.3f} s, "
            f"{ratio:.2f}x: " + ("float32 trains the GPU recipe (train.amp=false)" if ratio <= AMP_RULE
                                 else f"bf16 autocast stays (the rule asks <= {AMP_RULE:.2f}x)"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=RECIPE)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per backend (default 20)")
    parser.add_argument("--backends", nargs="+", default=["torch", "gather"], help="POINTMAMBA_BACKEND_SPCONV values")
    parser.add_argument("--device", default="auto", help="auto (cuda where available), cpu or cuda")
    parser.add_argument("--trainer", action="store_true",
                        help="after each backend's row, one with tools/train.py's own step (hooks, checks, logs)")
    parser.add_argument("--amp", nargs="+", choices=("on", "off"), default=None,
                        help="rows with train.amp on / off, in this order, for each backend (default: the "
                             "config's); the casts of bf16 autocast are ~1.1k of a step's dispatched ops")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step compiles)")

    from pointmamba.config import load_config
    from pointmamba.ops import backend
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.set)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    dataset = build_dataset(cfg, "train", True)
    if hasattr(dataset, "set_epoch"):
        dataset.set_epoch(0)
    saved = os.environ.get("POINTMAMBA_BACKEND_SPCONV")
    rows = []
    try:
        amps = [a == "on" for a in args.amp] if args.amp else [bool(cfg["train"]["amp"])]
        for name, amp, trainer in [(n, a, t) for n in args.backends for a in amps
                                   for t in ((False, True) if args.trainer else (False,))]:
            row = measure({**cfg, "train": {**cfg["train"], "amp": amp}}, device, name, args.steps, dataset, trainer)
            row["backends"] = backend.backends(device)
            row["amp"] = amp and device.type == "cuda"  # autocast runs on CUDA only
            rows.append(row)
            gpu = f", GPU busy {row['gpu_busy_s']:.3f} s, {row['kernels']:.0f} kernels" if "gpu_busy_s" in row else ""
            print(f"spconv={name:7s} {row['step']:7s} {row['device']}{' bf16' if row['amp'] else ''}: step {row['step_s']:.3f} s "
                  f"(min {row['step_min_s']:.3f}, first {row['first_step_s']:.1f}), "
                  f"loader {row['loader_s']:.3f} s/batch, {row['points_per_step']:.0f} points, "
                  f"{row['ops']} ops, {row['host_waits']} host waits{gpu}", flush=True)
    finally:
        if saved is None:
            os.environ.pop("POINTMAMBA_BACKEND_SPCONV", None)
        else:
            os.environ["POINTMAMBA_BACKEND_SPCONV"] = saved
    verdict = amp_verdict(rows) if args.amp else None
    if verdict:
        print(verdict)
    elif args.amp and device.type != "cuda":
        print("verdict: none (autocast runs on CUDA only: every row here is float32)")
    if args.json:
        env = {"torch": torch.__version__, "cuda": torch.version.cuda,
               "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else None,
               "config": str(args.config), "overrides": args.set}
        args.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
