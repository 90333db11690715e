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

    import numpy as np
    from tqdm import tqdm

    from pointmamba.data import CLASS_NAMES, fdi_to_class, load_scan
    from pointmamba.evaluation.confusion_plot import plot_confusion
    from pointmamba.inference.pipeline import segment_scan
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.evaluation.scan_summary import (dentition_given_columns, reference_groups, review_columns,
                                                    summarize, summary_table)
    from pointmamba.evaluation.teeth_metrics import aggregate_teeth_metrics, teeth_metrics
    from pointmamba.utils.atomic_file import atomic_write, write_csv
    from pointmamba.cli.output_files import make_out_dir

    run = open_eval_run(args, default_out=f"test_{args.split}")
    model, cfg, device, dataset, out = run.model, run.cfg, run.device, run.dataset, run.out
    num_classes = cfg["data"]["num_classes"]
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

    cm = ConfusionMatrix(num_classes)
    rows, scan_cms = [], []
    for i in tqdm(range(len(dataset)), desc=f"test {args.split}"):
        scan = load_scan(dataset.paths[i])
        pred = segment_scan(model, scan, cfg, device)
        if scan.labels is None:
            raise ValueError(f"{dataset.paths[i]}: no label file beside the mesh: tools/test.py needs labels")
        target = fdi_to_class(scan.labels, scan.jaw, num_classes)
        scan_cm = ConfusionMatrix(num_classes).update(pred.classes, target)
        cm.merge(scan_cm)
        scan_cms.append(scan_cm)
        row = {"name": dataset.names[i], "source": dataset.sources[i], "jaw": scan.jaw,
               "vertices": int(scan.num_vertices), "teeth": int((np.unique(scan.labels) > 0).sum()),
               **reference_groups(scan.labels, dataset.aligned_vertices(i), scan.jaw),
               "accuracy": scan_cm.accuracy(), "miou": scan_cm.miou(), **review_columns(pred, scan)}
        # the pattern's arches again with the dentition their reference gives (a second network pass)
        row.update(dentition_given_columns(model, scan, cfg, device, dataset.aligned_vertices(i), num_classes)
                   if row.get("lone_premolar") else {"dentition_given": None, "miou_given": None, "review_given": None})
        tm = teeth_metrics(scan.vertices.astype(np.float64), scan.labels.astype(np.int64), pred.fdi)
        row.update({k: tm[k] for k in ("TSA", "TLA", "TIR", "score")})
        row["_teeth"] = tm
        rows.append(row)

    names = CLASS_NAMES[num_classes]
    overall = {"accuracy": cm.accuracy(), "miou": cm.miou(), "mdice": cm.mean_dice(),
               "mean_scan_miou": float(np.mean([r["miou"] for r in rows])), "num_scans": len(rows)}
    teeth_rows = [r.pop("_teeth") for r in rows if "_teeth" in r]
    if teeth_rows:
        overall.update({k: v for k, v in aggregate_teeth_metrics(teeth_rows).items() if k != "num_jaws"})
    per_class = [{"class": c, "name": names[c], "iou": float(cm.iou()[c]), "dice": float(cm.dice()[c])}
                 for c in range(num_classes)]
    summary = summarize(rows, scan_cms)
    # every file atomically: a link planted in --out is replaced, never written through
    atomic_write(out / "metrics.json", finite_json.dumps(
        {**run.provenance(), "overall": overall, "per_class": per_class,
         "summary": summary, "per_scan": rows, "confusion": cm.matrix.tolist()}, indent=2, default=float).encode())
    atomic_write(out / "summary.md", summary_table(summary).encode())
    for name, table in (("per_scan.csv", rows), ("per_class.csv", per_class)):
        write_csv(out / name, table)
    plot_confusion(cm, list(names), out / "confusion.png", title=f"{run.checkpoint.name} on {args.split}")
    print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in overall.items()))
    print(summary_table(summary))
    print(f"written: {out / 'metrics.json'}, per_scan.csv, per_class.csv, summary.md, confusion.png")
    if seen:  # again below the scores, where it is read
        print(seen, file=sys.stderr)


def cli() -> None:
    """Entry point of ``pointmamba-test``."""
    run_main(main)


if __name__ == "__main__":
    cli()
