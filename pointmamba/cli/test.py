#!/usr/bin/env python3
"""Evaluate a checkpoint on a split: accuracy, per-class IoU, mIoU, Dice and the 3DTeethSeg'22 metrics.

    tools/test.py CONFIG [--checkpoint CKPT] [--average-with CKPT ...] [--split test] [--out DIR]
                  [--set key=value ...] [--no-progress] [--verbose]

(``--config CONFIG`` is an alias of the positional config.)

Metrics are computed on every original vertex, predicted exactly as tools/predict.py does (the ``infer``
config section: mirror test-time augmentation, graph cut, tooth numbering; switch each with --set).
Writes DIR/metrics.json (overall, per class, per scan, summary), DIR/per_scan.csv, DIR/per_class.csv,
DIR/summary.md and DIR/confusion.png (default DIR: work_dirs/<run>/test_<split>, <run> the checkpoint's folder,
or its stem for the shipped model: never inside the installed package). The summary gives the
per-scan mIoU's mean, 10th percentile and share of kept scans (>= 0.80) and the dataset-level mIoU, for
the split and per source (data root), jaw, arches with <= 13 teeth and arches with a third molar, and
for the arches with a side of canine, one premolar-sized tooth, then molars: without it, with it under the
default ``auto`` dentition, and with it under the dentition its reference's numbering gives (issue 43);
per group the share of scans flagged for review.
A scored scan that was among the checkpoint's training scans is named in a warning (before and after the
scores): its score measures fit, not accuracy on new scans.
"""
from __future__ import annotations

import argparse
import sys

from ..utils import finite_json
from ._common import add_average_with_arg, add_config_args, open_eval_run, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, positional=True)
    parser.add_argument("--checkpoint", help="checkpoint to evaluate (default: the shipped model)")
    add_average_with_arg(parser)
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--out", help="output directory (default: work_dirs/<run>/test_<split>)")
    parser.add_argument("--compare-infer", action="store_true",
                        help="also measure every inference switch on its own (network run once per scan) -> "
                             "DIR/infer_switches.md")
    args = parse_args(parser)

    from pointmamba.evaluation.confusion_plot import plot_confusion
    from pointmamba.evaluation.scan_summary import summary_table
    from pointmamba.evaluation.split_test import score_split
    from pointmamba.utils.atomic_file import atomic_write, write_csv
    from pointmamba.cli.output_files import make_out_dir

    run = open_eval_run(args, default_out=f"test_{args.split}")
    model, cfg, device, dataset, out = run.model, run.cfg, run.device, run.dataset, run.out
    from pointmamba.training import training_scans

    seen = training_scans.warning_line(run.checkpoint, dataset.names,
                                       *training_scans.of_checkpoints([run.checkpoint, *run.average_with]))
    if seen:
        print(seen, file=sys.stderr)
    make_out_dir(out)

    if args.compare_infer:
        from pointmamba.evaluation.infer_switches import compare_switches

        table = compare_switches(model, dataset, cfg, device)
        atomic_write(out / "infer_switches.md", table.encode())
        print(table)

    result = score_split(model, cfg, dataset, device, desc=f"test {args.split}")
    # every file atomically: a link planted in --out is replaced, never written through
    atomic_write(out / "metrics.json", finite_json.dumps(
        {**run.provenance(), "overall": result.overall, "per_class": result.per_class, "summary": result.summary,
         "per_scan": result.rows, "confusion": result.confusion.matrix.tolist()}, indent=2, default=float).encode())
    atomic_write(out / "summary.md", summary_table(result.summary).encode())
    for name, table in (("per_scan.csv", result.rows), ("per_class.csv", result.per_class)):
        write_csv(out / name, table)
    plot_confusion(result.confusion, [c["name"] for c in result.per_class], out / "confusion.png",
                   title=f"{run.checkpoint.name} on {args.split}")
    print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.overall.items()))
    print(summary_table(result.summary))
    print(f"written: {out / 'metrics.json'}, per_scan.csv, per_class.csv, summary.md, confusion.png")
    if seen:  # again below the scores, where it is read
        print(seen, file=sys.stderr)


def cli() -> None:
    """Entry point of ``pointmamba-test``."""
    run_main(main)


if __name__ == "__main__":
    cli()
