#!/usr/bin/env python3
"""Bare-ridge check: flatten all teeth of each arch but 0, 2 or 4 (drawn per scan, seeded), predict, and
count the teeth invented on the bare ridge (see pointmamba/evaluation/bare_ridge.py).

    tools/bare_ridge_check.py --config FILE [--checkpoint CKPT] [--average-with CKPT ...] [--split val]
                              [--keep 0 2 4] [--tooth-weights W ...] --out DIR [--set key=value ...]

Prediction is the full path of tools/predict.py (the ``infer`` section; switch with --set
infer.KEY=VALUE). The network runs once per flattened arch; each of --tooth-weights (``infer.tooth_weight``,
default: the config's) is applied to the same probabilities. Writes DIR/arches.csv (one row per arch,
kept count and weight), DIR/bare_ridge.json and DIR/summary.md.
"""
from __future__ import annotations

import argparse

from .. import finite_json
from ._common import add_average_with_arg, add_config_args, open_eval_run, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--checkpoint", help="checkpoint (default: the shipped model)")
    add_average_with_arg(parser)
    parser.add_argument("--split", default="val", choices=("train", "val", "test"))
    parser.add_argument("--keep", type=int, nargs="+", default=[0, 2, 4], help="teeth kept per arch (each a run)")
    parser.add_argument("--tooth-weights", type=float, nargs="+", default=None,
                        help="infer.tooth_weight values, each applied to the same network output")
    parser.add_argument("--out", required=True, help="output directory")
    args = parse_args(parser)
    if any(k < 0 for k in args.keep) or (args.tooth_weights and any(w < 0 for w in args.tooth_weights)):
        raise ValueError("--keep and --tooth-weights must be >= 0")

    from tqdm import tqdm

    from pointmamba.atomic_file import atomic_write, write_csv
    from pointmamba.cli.output_files import make_out_dir
    from pointmamba.data import class_to_fdi, load_scan
    from pointmamba.evaluation.bare_ridge import kept_teeth, ridge_arch, ridge_result, ridge_summary
    from pointmamba.evaluation.inference import infer_options, refine, scan_probabilities, shape_setting

    run = open_eval_run(args)
    model, cfg, device, out = run.model, run.cfg, run.device, run.out
    scans = [s for s in (load_scan(p) for p in run.dataset.paths) if s.labels is not None and (s.labels > 0).any()]
    if not scans:
        raise ValueError(f"split {args.split!r}: no labelled arch with teeth to flatten")
    weights = args.tooth_weights or [cfg["infer"].get("tooth_weight")]
    options = infer_options(cfg)
    for w in weights:  # a missing or unfit tooth-shape file is refused now, not after the first network pass
        shape_setting({**options, "tooth_weight": w})
    nc = cfg["data"]["num_classes"]
    results: dict[tuple[int, float | None], list] = {(k, w): [] for k in args.keep for w in weights}
    for scan in tqdm(scans, desc="bare-ridge check"):
        for k in args.keep:
            keep = kept_teeth(scan.labels, k, scan.name)
            reduced, flattened = ridge_arch(scan, keep)
            _, probs, aligned, normals = scan_probabilities(model, reduced, cfg, device)  # options as above
            for w in weights:
                classes = refine(probs, aligned, reduced.faces, normals, reduced.jaw, nc, {**options, "tooth_weight": w})
                fdi = class_to_fdi(classes, reduced.jaw, nc)
                results[k, w].append(ridge_result(scan.name, reduced.labels, flattened, fdi, keep))
    make_out_dir(out)
    rows, summaries, lines = [], [], []
    lines.append("| teeth kept | infer.tooth_weight | arches | without a phantom tooth | phantom teeth per arch "
                 "| ridge called tooth | kept teeth right |\n|---|---|---|---|---|---|---|")
    for (k, w), res in results.items():
        s = ridge_summary(res)
        summaries.append({"kept": k, "tooth_weight": w, **s})
        lines.append(f"| {k} | {w} | {s['arches']} | {s['arches_without_phantom']} ({s['share_without_phantom']:.0%}) | "
                     f"{s['phantom_teeth_per_arch']:.2f} | {s['ridge_called_tooth']:.1%} | "
                     f"{s['kept_teeth_right']} of {s['kept_teeth']} |")
        rows += [{"scan": r.scan, "kept_count": k, "tooth_weight": w, "kept": " ".join(map(str, r.kept)),
                  "phantoms": " ".join(map(str, r.phantoms)), "ridge_called_tooth": round(r.ridge_called_tooth, 4),
                  "kept_right": r.kept_right} for r in res]
    write_csv(out / "arches.csv", rows)
    atomic_write(out / "bare_ridge.json", finite_json.dumps(
        {**run.provenance(), "summaries": summaries, "scans": [s.name for s in scans]}, indent=2,
        default=str).encode())
    table = "\n".join(lines) + "\n"
    atomic_write(out / "summary.md", table.encode())
    print(table)
    print(f"written: {out / 'arches.csv'}, bare_ridge.json, summary.md")


def cli() -> None:
    """Entry point of ``pointmamba-bare-ridge-check``."""
    run_main(main)


if __name__ == "__main__":
    cli()
