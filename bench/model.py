"""Speed and memory of the segmentation network on 2 CPU threads.

Figures: ``train_step_s`` (forward + backward + AdamW step on a 16k-point jaw), ``infer_120k_s`` (eval
forward, no grad, on a 120k-point jaw), ``peak_rss_gb`` (the process's peak resident memory).
Targets with the default config: train step <= 3 s, 120k inference <= 5 s. The jaw comes from
``pointmamba.data.synthetic_jaw`` when it exists, else from a horseshoe surface generated here.

    .venv/bin/python bench/model.py                   # readable table
    .venv/bin/python bench/model.py --json            # one JSON object of the figures
    .venv/bin/python bench/model.py --breakdown       # also time stem / stages / head
    .venv/bin/python bench/model.py --stages          # one train step's forward and backward, part by part
    .venv/bin/python bench/model.py --grid-size 0.6   # the numbering recipe's grid (default 0.2 mm)
    .venv/bin/python bench/model.py --set d_state=8   # a model config override (repeatable)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402

RUNTIME = tune_cpu_runtime()  # as tools/ do, before torch is imported (POINTMAMBA_CPU_TUNING=0 to measure without)

import numba  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from pointmamba.config import TRAIN_DEFAULTS  # noqa: E402
from pointmamba.training.optim import build_optimizer  # noqa: E402
from pointmamba.models.network import build_model, count_parameters  # noqa: E402
from pointmamba.point.batch import PointBatch  # noqa: E402

TARGETS = {"train_step_s": 3.0, "infer_120k_s": 5.0}
GRID_SIZE = 0.2  # mm, the data pipeline's default first grid


def horseshoe_jaw(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(coord (n, 3) mm, normal (n, 3)) on a dental-arch-like surface of ~4500 mm^2 (~70 x 50 x 16 mm).

    The arch is an elliptic curve (semi-axes 30 and 45 mm); the cross-section is a buccal wall, a bumpy
    occlusal band and a lingual wall (an upside-down U), sampled uniformly along its perimeter.
    """
    g = torch.Generator().manual_seed(seed)
    t = (torch.rand(n, generator=g) * 2 - 1) * 1.3  # arch angle
    u = torch.rand(n, generator=g) * 40.0  # perimeter position: 14 mm wall, 12 mm top, 14 mm wall
    centre = torch.stack([30 * torch.sin(t), 45 * torch.cos(t)], 1)
    tangent = torch.stack([30 * torch.cos(t), -45 * torch.sin(t)], 1)
    outward = torch.nn.functional.normalize(torch.stack([tangent[:, 1], -tangent[:, 0]], 1), dim=1)
    bump = 1.5 * torch.sin(t * 14).abs()
    wall_b, top, wall_l = u < 14, (u >= 14) & (u < 26), u >= 26
    offset = torch.where(wall_b, 6.0, torch.where(top, 6.0 - (u - 14), -6.0))
    height = torch.where(wall_b, u, torch.where(top, 14.0 + bump * torch.sin((u - 14) / 12 * math.pi), 40 - u))
    xy = centre + offset.unsqueeze(1) * outward
    coord = torch.cat([xy, height.unsqueeze(1)], 1) + 0.02 * torch.randn(n, 3, generator=g)
    normal = torch.where(wall_b.unsqueeze(1), torch.cat([outward, torch.zeros(n, 1)], 1),
                         torch.where(top.unsqueeze(1), torch.tensor([[0.0, 0.0, 1.0]]).expand(n, 3),
                                     torch.cat([-outward, torch.zeros(n, 1)], 1)))
    return coord, normal


def make_jaw(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from pointmamba.data import synthetic_jaw  # noqa: PLC0415 - written by another part of the project
    except ImportError:
        return horseshoe_jaw(n, seed)
    jaw = synthetic_jaw(seed, "lower", n)
    coord = torch.as_tensor(getattr(jaw, "vertices", getattr(jaw, "coord", None)), dtype=torch.float32)
    normal = getattr(jaw, "normals", None)
    if normal is None:
        return horseshoe_jaw(n, seed)
    return coord, torch.as_tensor(normal, dtype=torch.float32)


def make_batch(coord: torch.Tensor, normal: torch.Tensor) -> PointBatch:
    centred = coord - coord.mean(0)
    return PointBatch(coord, torch.cat([centred / 30.0, normal], 1), grid_size=GRID_SIZE)


def best_time(fn, repeats: int) -> tuple[float, float]:  # noqa: ANN001
    """(wall s, process CPU s) of the best of ``repeats`` runs after one warm-up.

    The machine is shared, so the minimum is the signal; the CPU time (all threads together) tells how
    much work a run was when other processes inflate the wall time.
    """
    fn()
    best = (math.inf, math.inf)
    for _ in range(max(1, repeats)):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - start, time.process_time() - cpu))
    return best


def breakdown(model: torch.nn.Module, point_fn) -> dict[str, float]:  # noqa: ANN001
    """Seconds per top-level part of one no-grad eval forward (stem, enc/dec stages incl. pooling, head)."""
    times: dict[str, float] = {}
    starts: dict[str, float] = {}
    hooks = []
    parts = [("stem", model.cpe_stem), ("head", model.head)]
    parts += [(f"enc{s}", st) for s, st in enumerate(model.enc)] + [(f"dec{s}", st) for s, st in enumerate(model.dec)]
    parts += [(f"enc{s}.pool", st.pool) for s, st in enumerate(model.enc) if st.pool is not None]
    parts += [(f"dec{s}.unpool", st.unpool) for s, st in enumerate(model.dec)]
    for name, mod in parts:
        hooks.append(mod.register_forward_pre_hook(lambda m, a, n=name: starts.__setitem__(n, time.perf_counter())))
        hooks.append(mod.register_forward_hook(
            lambda m, a, o, n=name: times.__setitem__(n, times.get(n, 0.0) + time.perf_counter() - starts[n])))
    point = point_fn()
    start = time.perf_counter()
    with torch.no_grad():
        model(point)
    times["total"] = time.perf_counter() - start
    for h in hooks:
        h.remove()
    return times


def _parts(model: torch.nn.Module) -> list[tuple[str, str, torch.nn.Module]]:
    """(stage, kind, module) for every timed part of the network, in forward order."""
    out = [("stem", "stem (SubMConv k5)", model.cpe_stem)]

    def stage_parts(name: str, stage: torch.nn.Module) -> list[tuple[str, str, torch.nn.Module]]:
        rows = []
        if getattr(stage, "pool", None) is not None:
            rows.append((name, "grid pooling", stage.pool))
        if getattr(stage, "unpool", None) is not None:
            rows.append((name, "unpooling + skip", stage.unpool))
        if stage.position.cpe is not None:
            rows.append((name, "CPE (SubMConv k3 + Linear + LN)", stage.position.cpe))
        for k, relpos in (stage.position.relpos or {}).items():
            rows.append((name, "RelPos", relpos))
        for block in stage.blocks:
            rows.append((name, "Mamba block (LN + BiMamba)", block))
        return rows

    for s, stage in enumerate(model.enc):
        out += stage_parts(f"enc{s}", stage)
    for s in reversed(range(len(model.dec))):
        out += stage_parts(f"dec{s}", model.dec[s])
    out.append(("head", "head", model.head))
    return out


def stage_profile(model: torch.nn.Module, step, repeats: int = 3) -> list[dict[str, Any]]:  # noqa: ANN001
    """Seconds of forward and backward per part of a training step (best of ``repeats``).

    Forward: between a part's pre- and post-forward hooks. Backward: from the moment the gradient of the
    part's output is complete to the moment that of its input is (tensor hooks; the CPU autograd engine
    runs one op at a time, so the intervals of consecutive parts do not overlap). Whatever lies between
    parts (serialization, the loss, the optimizer step) is the step minus their sum."""
    parts = _parts(model)
    fwd = [0.0] * len(parts)
    bwd = [0.0] * len(parts)
    marks: dict[int, float] = {}
    handles = []

    def hook_input(i: int, tensor: torch.Tensor) -> None:
        def done(grad: torch.Tensor) -> None:  # the gradient of part i's input is complete
            now = time.perf_counter()
            bwd[i] += now - marks.pop(-1 - i, now)

        if tensor.requires_grad:
            tensor.register_hook(done)

    def hook_output(i: int, tensor: torch.Tensor) -> None:
        def start(grad: torch.Tensor) -> None:  # that of its output is: part i's backward begins
            marks[-1 - i] = time.perf_counter()

        if tensor.requires_grad:
            tensor.register_hook(start)

    for i, (_, _, module) in enumerate(parts):
        def pre(m, args, i=i):  # noqa: ANN001, ANN202
            marks[i] = time.perf_counter()
            hook_input(i, args[0])

        def post(m, args, out, i=i):  # noqa: ANN001, ANN202
            fwd[i] += time.perf_counter() - marks.pop(i)
            hook_output(i, out[0] if isinstance(out, tuple) else out)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    best: list[dict[str, Any]] | None = None
    try:
        for run in range(repeats + 1):
            fwd[:], bwd[:] = [0.0] * len(parts), [0.0] * len(parts)
            start = time.perf_counter()
            step()
            total = time.perf_counter() - start
            rows = [{"stage": st, "part": kind, "forward_s": f, "backward_s": b}
                    for (st, kind, _), f, b in zip(parts, fwd, bwd)]
            rows.append({"stage": "step", "part": "total", "forward_s": total, "backward_s": 0.0})
            if run > 0 and (best is None or total < best[-1]["forward_s"]):  # run 0 warms the hooks up
                best = rows
    finally:
        for h in handles:
            h.remove()
    assert best is not None
    return best


def print_stage_profile(rows: list[dict[str, Any]]) -> None:
    """Per stage and per kind of part: forward, backward, their share of the step."""
    total = rows[-1]["forward_s"]
    body = rows[:-1]
    print(f"one training step, {total:.2f} s; by stage (s, share of the step):")
    print(f"  {'stage':<8}{'forward':>9}{'backward':>10}{'share':>8}")
    for stage in dict.fromkeys(r["stage"] for r in body):
        f = sum(r["forward_s"] for r in body if r["stage"] == stage)
        b = sum(r["backward_s"] for r in body if r["stage"] == stage)
        print(f"  {stage:<8}{f:>9.3f}{b:>10.3f}{(f + b) / total:>8.1%}")
    parts_sum = sum(r["forward_s"] + r["backward_s"] for r in body)
    between = total - parts_sum
    print(f"  {'between':<8}{between:>19.3f}{between / total:>8.1%}  (serialization, loss, optimizer)")
    print("by kind of part:")
    for kind in dict.fromkeys(r["part"] for r in body):
        f = sum(r["forward_s"] for r in body if r["part"] == kind)
        b = sum(r["backward_s"] for r in body if r["part"] == kind)
        print(f"  {kind:<34}{f:>7.3f}{b:>8.3f}{(f + b) / total:>8.1%}")


def main() -> None:
    global GRID_SIZE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-points", type=int, default=16_000)
    parser.add_argument("--infer-points", type=int, default=120_000)
    parser.add_argument("--repeats", type=int, default=5)  # best of 5: this VM varies by +-10 %
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="model config override")
    parser.add_argument("--breakdown", action="store_true", help="time the parts of the 120k forward")
    parser.add_argument("--stages", action="store_true", help="time a train step's forward and backward per part")
    parser.add_argument("--grid-size", type=float, default=GRID_SIZE, help="first grid (mm); the recipe's is 0.6")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    GRID_SIZE = args.grid_size
    torch.set_num_threads(args.threads)
    cfg: dict = {}
    for item in args.set:
        key, raw = item.split("=", 1)
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(raw)
    torch.manual_seed(0)
    model = build_model(cfg)
    params = count_parameters(model)

    coord, normal = make_jaw(args.train_points, seed=1)
    labels = torch.randint(0, model.cfg["num_classes"], (args.train_points,))
    optimizer = build_optimizer(model, {"train": {**TRAIN_DEFAULTS, "lr": 1e-3}})  # as tools/train.py builds it

    def train_step() -> None:
        model.train()
        logits = model(make_batch(coord, normal))
        loss = torch.nn.functional.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    train_s, train_cpu = best_time(train_step, args.repeats)
    stages = stage_profile(model, train_step, args.repeats) if args.stages else None

    big_coord, big_normal = make_jaw(args.infer_points, seed=2)
    model.eval()

    def infer() -> None:
        with torch.no_grad():
            model(make_batch(big_coord, big_normal))

    infer_s, infer_cpu = best_time(infer, args.repeats)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures = {
        "train_step_s": train_s,
        "infer_120k_s": infer_s,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "train_step_cpu_s": train_cpu,
        "infer_120k_cpu_s": infer_cpu,
        "load_avg_1min": load,
        "numba_threading_layer": numba.config.THREADING_LAYER,
        "cpu_runtime": RUNTIME,
        "parameters": params,
        "train_points": args.train_points,
        "infer_points": args.infer_points,
        "threads": args.threads,
        "overrides": cfg,
        "targets": TARGETS,
        "machine": f"{platform.machine()} {platform.python_version()} torch {torch.__version__}",
    }
    if args.breakdown:
        figures["breakdown_120k_s"] = breakdown(model, lambda: make_batch(big_coord, big_normal))
    if stages is not None:
        figures["train_step_parts"] = stages
    figures["grid_size"] = GRID_SIZE
    if args.json:
        print(json.dumps(figures))
        return
    print(f"model: {params:,} parameters, overrides {cfg or 'none'}, {args.threads} threads, "
          f"numba layer {figures['numba_threading_layer']}, cpu tuning {RUNTIME or 'off'}, load avg {load:.1f} (other processes inflate wall times)")
    print(f"{'figure':<16}{'value':>10}{'target':>10}  ok")
    for key in ("train_step_s", "infer_120k_s", "peak_rss_gb", "train_step_cpu_s", "infer_120k_cpu_s", "load_avg_1min"):
        target = TARGETS.get(key)
        ok = "" if target is None else ("yes" if figures[key] <= target else "NO")
        print(f"{key:<16}{figures[key]:>10.2f}{(f'{target:.1f}' if target else '-'):>10}  {ok}")
    if args.breakdown:
        print("breakdown of one 120k forward (s):")
        for k, v in figures["breakdown_120k_s"].items():
            print(f"  {k:<14}{v:>8.3f}")
    if stages is not None:
        print_stage_profile(stages)


if __name__ == "__main__":
    main()
