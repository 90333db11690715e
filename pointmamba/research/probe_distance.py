#!/usr/bin/env python3
"""Two-point distance probe: does a position encoding carry position?

    python -m pointmamba.research.probe_distance [--positions none cpe ...] [--seeds 0] [--steps 300] [--out DIR]
        [--threads 1]

Synthetic serialized point sets: each sample is ``--points`` points on a random bumpy height field (one
point per 1 mm voxel of a 16 x 16 footprint, like a patch of a scan), serialized along z-order and Hilbert
curves. The only input feature is a flag marking two random points; the target is the Euclidean distance
between them (mm). For each ``model.position`` value the same small network is trained from the same seed
on the same batches: ``Linear(1 -> C)`` stem (no sparse-conv stem: it would see the neighbourhood
geometry), one stage of the project's network (the position slot, then ``--depth`` bidirectional Mamba
blocks alternating the two curves), and an MLP on |h_a - h_b|, the two marked points' features' absolute
difference (symmetric in the marks).
Reports test MSE (mm^2) and R^2 = 1 - SSE/SST on held-out samples, with training time, in a table
(``DIR/results.md``, ``DIR/results.csv``).

A flag carries no coordinate, so without an encoding the network only knows how far apart the marks are
along the curves, which tracks their Euclidean distance loosely (R^2 well above 0: the curve order itself
carries some position).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..utils.atomic_file import atomic_write, write_csv
from ..cli._common import parse_args, run_main

if TYPE_CHECKING:
    from pointmamba.point.batch import PointBatch

GRID = 1.0  # mm per voxel
EXTENT = 16  # footprint of a sample, voxels per side
ORDERS = ("z", "hilbert")


def make_batches(num_batches: int, batch_size: int, points: int, seed: int) -> list[dict[str, Any]]:
    """Serialized batches: ``point`` (a PointBatch, flag feature), ``marks`` (B, 2) rows, ``target`` (B,) mm."""
    import torch

    from pointmamba.point.batch import PointBatch

    if not 2 <= points <= EXTENT * EXTENT:
        raise ValueError(f"--points must be in [2, {EXTENT * EXTENT}], got {points}")
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(num_batches):
        coords, marks, targets = [], [], []
        for b in range(batch_size):
            cell = torch.randperm(EXTENT * EXTENT, generator=gen)[:points]
            x, y = (cell // EXTENT).double(), (cell % EXTENT).double()
            amp, fx, fy, px, py = (torch.rand(5, generator=gen, dtype=torch.float64) * torch.tensor([4.0, 4, 4, 6.3, 6.3])
                                   + torch.tensor([0.0, 2, 2, 0, 0]))
            z = (amp * torch.sin(x / fx + px) * torch.cos(y / fy + py)).round()
            coord = (torch.stack([x, y, z], 1) + 0.1 + 0.8 * torch.rand(points, 3, generator=gen, dtype=torch.float64)) * GRID
            pair = torch.randperm(points, generator=gen)[:2]
            coords.append(coord.float())
            marks.append(pair + b * points)
            targets.append(float((coord[pair[0]] - coord[pair[1]]).norm()))
        coord = torch.cat(coords)
        mark = torch.stack(marks)
        feat = torch.zeros(len(coord), 1)
        feat[mark.flatten()] = 1.0
        offset = torch.arange(1, batch_size + 1) * points
        point = PointBatch(coord, feat, offset=offset, grid_size=GRID).serialize(ORDERS)
        out.append({"point": point, "marks": mark, "target": torch.tensor(targets)})
    return out


def build_probe(position: str, channels: int, depth: int, window: int) -> "Any":
    """Linear stem -> one network stage with the given position slot -> MLP on |h_a - h_b| of the two marks."""
    import torch
    from torch import nn

    from pointmamba.models.config import resolve_model_config
    from pointmamba.models.network import Stage, stage_options

    cfg = resolve_model_config({"position": position, "orders": list(ORDERS), "drop_path": 0.0,
                                "logical": {"window": window}})

    class Probe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Linear(1, channels)
            self.stage = Stage(channels, depth, [0.0] * depth, **stage_options(cfg))
            self.head = nn.Sequential(nn.Linear(channels, channels), nn.GELU(), nn.Linear(channels, 1))

        def forward(self, point: PointBatch, marks: torch.Tensor) -> torch.Tensor:
            feat = self.stage(self.stem(point.feat), point)
            return self.head((feat[marks[:, 0]] - feat[marks[:, 1]]).abs()).squeeze(1)

    return Probe()


def run_one(position: str, seed: int, train: list[dict[str, Any]], test: list[dict[str, Any]],
            args: argparse.Namespace) -> dict[str, Any]:
    """Train one probe and score it on ``test``."""
    import torch

    from pointmamba.training.seed import set_seed

    set_seed(seed)
    model = build_probe(position, args.channels, args.depth, args.window)
    y = torch.cat([b["target"] for b in train])
    mean, std = float(y.mean()), float(y.std())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    start = time.perf_counter()
    model.train()
    losses = []
    for step in range(args.steps):
        batch = train[step % len(train)]
        loss = torch.nn.functional.mse_loss(model(batch["point"], batch["marks"]), (batch["target"] - mean) / std)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    train_s = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(b["point"], b["marks"]) * std + mean for b in test]).double()
    target = torch.cat([b["target"] for b in test]).double()
    mse = float((pred - target).square().mean())
    r2 = 1.0 - mse / float((target - target.mean()).square().mean())
    tail = losses[-max(1, len(losses) // 10):]
    return {"position": position, "seed": seed, "test_mse_mm2": mse, "r2": r2, "train_loss_last10pct": sum(tail) / len(tail),
            "train_s": train_s, "parameters": sum(p.numel() for p in model.parameters())}


def write_tables(rows: list[dict[str, Any]], out: Path, command: str, setup: str) -> str:
    """``results.csv`` (one row per run) and ``results.md`` (per run, plus mean ± std over seeds)."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "results.csv", rows)
    lines = ["# Two-point distance probe", "", setup, "", f"Command: `{command}`", "",
             "| position | seed | test MSE (mm²) | R² | train loss (last 10 % of steps, standardized) | train time (s) | parameters |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['position']}` | {r['seed']} | {r['test_mse_mm2']:.3f} | {r['r2']:.3f} | "
                     f"{r['train_loss_last10pct']:.3f} | {r['train_s']:.1f} | {r['parameters']:,} |")
    seeds = sorted({r["seed"] for r in rows})
    if len(seeds) > 1:
        lines += ["", f"Mean ± std over seeds {seeds}:", "", "| position | test MSE (mm²) | R² |", "|---|---|---|"]
        for pos in dict.fromkeys(r["position"] for r in rows):
            mse = [r["test_mse_mm2"] for r in rows if r["position"] == pos]
            r2 = [r["r2"] for r in rows if r["position"] == pos]
            lines.append(f"| `{pos}` | {statistics.mean(mse):.3f} ± {statistics.stdev(mse):.3f} | "
                         f"{statistics.mean(r2):.3f} ± {statistics.stdev(r2):.3f} |")
    text = "\n".join(lines) + "\n"
    atomic_write(out / "results.md", text.encode())
    return text


def main() -> None:
    from pointmamba.models.position import POSITIONS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", nargs="+", default=list(POSITIONS), choices=POSITIONS, metavar="POSITION",
                        help=f"model.position values to probe (default: all of {', '.join(POSITIONS)})")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="one run per seed and position")
    parser.add_argument("--points", type=int, default=32, help="points per sample")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per batch")
    parser.add_argument("--train-batches", type=int, default=64, help="distinct training batches, cycled")
    parser.add_argument("--test-batches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2, help="Mamba blocks (alternating the z-order and Hilbert curves)")
    parser.add_argument("--window", type=int, default=64, help="model.logical.window")
    parser.add_argument("--threads", type=int, default=1, help="torch (and numba) threads")
    parser.add_argument("--out", default=None, help="write results.md / results.csv here")
    args = parse_args(parser)  # with --no-progress and --verbose, as every tool
    for name in ("points", "batch_size", "train_batches", "test_batches", "steps", "channels", "depth", "window", "threads"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")

    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for seed in args.seeds:
        # data seeds kept apart from the model seed, and test apart from train
        train = make_batches(args.train_batches, args.batch_size, args.points, 1000 + seed)
        test = make_batches(args.test_batches, args.batch_size, args.points, 2000 + seed)
        for position in args.positions:
            row = run_one(position, seed, train, test, args)
            rows.append(row)
            print(f"[probe] {position:12s} seed {seed}: test MSE {row['test_mse_mm2']:.3f} mm², R² {row['r2']:.3f} "
                  f"({row['train_s']:.1f} s)", flush=True)
    setup = (f"{args.points} points per sample on a random height field (1 mm voxels, {EXTENT} x {EXTENT} footprint), "
             f"two flagged points, target = their Euclidean distance; {args.steps} steps of {args.batch_size} samples "
             f"({args.train_batches} distinct training batches), test on {args.test_batches * args.batch_size} held-out "
             f"samples; Linear stem, position slot, {args.depth} BiMamba blocks ({args.channels} channels, curves "
             f"{', '.join(ORDERS)}), MLP on |h_a - h_b| of the two marks; {args.threads} thread(s).")
    command = "python -m pointmamba.research.probe_distance " + " ".join(sys.argv[1:])
    text = write_tables(rows, Path(args.out), command, setup) if args.out else None
    print(text or "\n".join(f"{r['position']}\t{r['seed']}\t{r['test_mse_mm2']:.4f}\t{r['r2']:.4f}" for r in rows))


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.probe_distance``."""
    run_main(main)


if __name__ == "__main__":
    cli()
