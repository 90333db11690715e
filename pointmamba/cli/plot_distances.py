#!/usr/bin/env python3
"""Histogram the distances between consecutive points along each space-filling curve, per scan.

    pointmamba-plot-distances --config FILE [--set key=value ...] --out DIR [--split val|train|test|all] [--stages N]
                              [--no-progress] [--verbose]

These are the step lengths a RelPos module sees: every point to its predecessor along one curve order
within one scan. The dataset is read in eval mode (no augmentation, no point cap) with the configured
``data.grid_size`` and ``data.align``, so distances are those of the network's input grid (stage 0);
``--stages N`` adds N-1 pooled stages (the network's grid pooling: ``grid_coord >> 1`` cells, mean
coordinates). Writes ``DIR/distances_stage<s>.png`` (linear axes, and log-spaced bins on log-log axes)
with vertical lines at ``model.relpos`` ``max_rel_dist`` and at the q-quantile (``model.relpos.quantile``),
and ``DIR/distances.json`` with 50/90/95/99th percentiles per stage and order (also printed).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ..utils import finite_json
from ._common import add_config_args, parse_args, run_main

SPLITS = ("train", "val", "test", "all")


def collect(cfg: dict[str, Any], split: str, stages: int, progress: bool = True) -> tuple[list[dict[str, np.ndarray]], list[str]]:
    """Per stage, per order: all consecutive distances (mm) over the split's scans; and the scan names."""
    import torch
    from tqdm import tqdm

    from pointmamba.data import collate, find_scans
    from pointmamba.evaluation.curve_distances import stage_distances
    from pointmamba.training.data_builders import build_dataset, ensure_data

    orders = list(cfg["model"]["orders"])
    if split == "all":
        cfg["data"]["val_names"] = list(find_scans(ensure_data(cfg)))
        split = "val"
    dataset = build_dataset(cfg, split, train=False)
    if len(dataset) == 0:
        raise ValueError(f"split {split!r} of {cfg['data']['root']} is empty")
    per_stage: list[dict[str, list[np.ndarray]]] = [{o: [] for o in orders} for _ in range(stages)]
    names: list[str] = []
    with torch.no_grad():
        for i in tqdm(range(len(dataset)), desc="scans", disable=not progress, dynamic_ncols=True):
            point = collate([dataset[i]])  # one scan per batch: distances never cross scans
            names.append(str(point.extra["name"][0]))
            for s, dist in enumerate(stage_distances(point, orders, stages)):
                for o, d in dist.items():
                    per_stage[s][o].append(d.double().numpy())
    out = [{o: np.concatenate(v) if v else np.zeros(0) for o, v in st.items()} for st in per_stage]
    return out, names


def plot_stage(dist: dict[str, np.ndarray], stage: int, max_rel_dist: float, q: float, q_value: float,
               path: Path, bins: int = 200) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pointmamba.utils.atomic_file import save_figure

    allv = np.concatenate(list(dist.values()))
    fig, (lin, log) = plt.subplots(1, 2, figsize=(13, 4.8))
    hi = max(float(np.percentile(allv, 99.9)), max_rel_dist, q_value) * 1.05 if allv.size else 1.0
    positive = allv[allv > 0]
    lo = float(positive.min()) if positive.size else 1e-3
    top = max(float(allv.max()) if allv.size else 1.0, max_rel_dist) * 1.05
    lin_bins = np.linspace(0.0, hi, bins + 1)
    log_bins = np.geomspace(lo, top, bins + 1)
    for order, values in dist.items():
        lin.hist(values[values <= hi], bins=lin_bins, histtype="step", label=order)
        log.hist(values[values > 0], bins=log_bins, histtype="step", label=order)
    for ax in (lin, log):
        ax.axvline(max_rel_dist, color="red", linestyle="--", label=f"max_rel_dist = {max_rel_dist:g} mm")
        ax.axvline(q_value, color="green", linestyle=":", label=f"q={q:g} quantile = {q_value:.3g} mm")
        ax.set_xlabel("distance to predecessor along the curve (mm)")
        ax.set_ylabel("pairs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    beyond = float((allv > hi).mean()) if allv.size else 0.0
    lin.set_title(f"stage {stage}: linear ({100 * beyond:.2f}% of pairs beyond {hi:.3g} mm not shown)")
    log.set(xscale="log", yscale="log", title=f"stage {stage}: log-log, log-spaced bins")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--out", required=True, help="output directory for the PNGs and distances.json")
    parser.add_argument("--split", default="val", choices=SPLITS,
                        help="data split (split file or data.<split>_names); all: every scan under data.root")
    parser.add_argument("--stages", type=int, default=1, help="stage 0 (input grid) plus N-1 pooled stages")
    parser.add_argument("--bins", type=int, default=200, help="histogram bins")
    args = parse_args(parser, backends=False)  # with --no-progress and --verbose
    if args.stages < 1:
        raise ValueError(f"--stages must be >= 1, got {args.stages}")

    from pointmamba.utils.atomic_file import atomic_write
    from pointmamba.cli.output_files import check_out_dir, make_out_dir
    from pointmamba.config import load_config
    from pointmamba.evaluation.curve_distances import PERCENTILES, summarize
    from pointmamba.models.relpos import RelPosConfig

    cfg = load_config(args.config, args.overrides)
    rel = RelPosConfig.from_dict(cfg["model"]["relpos"])
    out = Path(args.out)
    check_out_dir(out)
    per_stage, names = collect(cfg, args.split, args.stages, progress=not args.no_progress)
    make_out_dir(out)

    result: dict[str, Any] = {
        "config": args.config, "overrides": args.overrides, "split": args.split, "data_root": cfg["data"]["root"],
        "grid_size": cfg["data"]["grid_size"], "align": cfg["data"]["align"], "orders": list(cfg["model"]["orders"]),
        "scans": len(names), "scan_names": names, "max_rel_dist": rel.max_rel_dist, "quantile": rel.quantile,
        "normalization": rel.normalization, "stages": {},
    }
    header = f"{'stage':>5} {'order':<14} {'pairs':>9} " + " ".join(f"{'p' + str(p):>8}" for p in PERCENTILES)
    header += f" {'q' + format(rel.quantile, 'g'):>8} {'>max_rel':>8}"
    print(f"{len(names)} scans, split {args.split}, grid {cfg['data']['grid_size']} mm, max_rel_dist "
          f"{rel.max_rel_dist:g} mm, quantile q={rel.quantile:g} (distances in mm)")
    print(header)
    for s, dist in enumerate(per_stage):
        entry = {o: summarize(v, rel.quantile, rel.max_rel_dist) for o, v in dist.items()}
        allv = np.concatenate(list(dist.values()))
        entry["all"] = summarize(allv, rel.quantile, rel.max_rel_dist)
        result["stages"][str(s)] = entry
        for o, st in entry.items():
            if not st["count"]:
                continue
            print(f"{s:>5} {o:<14} {st['count']:>9} " + " ".join(f"{st['p' + str(p)]:>8.3f}" for p in PERCENTILES)
                  + f" {st['quantile_value']:>8.3f} {100 * st['frac_above_max_rel_dist']:>7.2f}%")
        if allv.size:
            plot_stage(dist, s, rel.max_rel_dist, rel.quantile, entry["all"]["quantile_value"],
                       out / f"distances_stage{s}.png", bins=args.bins)
    atomic_write(out / "distances.json", finite_json.dumps(result, indent=2).encode())
    print(f"wrote {out / 'distances.json'} and {len(per_stage)} PNG(s) in {out}")


def cli() -> None:
    """Entry point of ``pointmamba-plot-distances``."""
    run_main(main)


if __name__ == "__main__":
    cli()
