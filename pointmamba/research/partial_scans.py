#!/usr/bin/env python3
"""Partial scans of a split's arches: each cut to one side, the other side and the front teeth, segmented
and scored (see pointmamba/evaluation/partial_scans.py).

    python -m pointmamba.research.partial_scans --config FILE [--checkpoint CKPT] [--average-with CKPT ...]
        [--split val] --out DIR [--set key=value ...]

Prediction is the full path of tools/predict.py (the ``infer`` section). Writes DIR/partial_scans.csv (one
row per partial scan), DIR/partial_scans.json and DIR/summary.md.
"""
from __future__ import annotations

from ..cli._common import open_study, run_main, write_study


def main() -> None:
    run = open_study(__doc__)

    from pointmamba.cli.output_files import make_out_dir
    from pointmamba.evaluation.partial_scans import PARTIAL_VARIANTS, partial_scan, partial_summary, score_partial
    from pointmamba.inference.pipeline import segment_scan
    from pointmamba.utils.atomic_file import write_csv

    model, cfg, device, out = run.model, run.cfg, run.device, run.out

    def predict(scan):  # noqa: ANN001, ANN202 - Scan -> Prediction
        return segment_scan(model, scan, cfg, device)

    results = []
    for scan in run.labelled_scans("partial scans"):
        for variant in PARTIAL_VARIANTS:
            part = partial_scan(scan, variant)
            if part is not None:
                results.append(score_partial(scan.name, variant, part, predict, cfg["data"]["num_classes"]))
    summary = partial_summary(results)
    make_out_dir(out)
    write_csv(out / "partial_scans.csv", [
        {"scan": r.scan, "variant": r.variant, "vertices": r.vertices, "teeth": r.teeth, "miou": r.miou,
         "accuracy": r.accuracy, "review": r.review, "findings": r.findings,
         "wrong": " ".join(f"{t}:{p}" for t, p in sorted(r.wrong.items()))} for r in results])
    lines = ["| partial scans | n | mean mIoU | 10th pct | kept (>= 0.80) | flagged | below 0.80 flagged | kept flagged |",
             "|---|---|---|---|---|---|---|---|"]
    for name, e in summary.items():
        lines.append(f"| {name} | {e['scans']} | {e['mean']:.3f} | {e['p10']:.3f} | {e['kept']:.0%} | {e['flagged']:.0%} "
                     f"| {e['below_kept_flagged']} of {e['below_kept']} | {e['kept_flagged']} of {e['scans'] - e['below_kept']} |")
    write_study(out, "partial_scans.json", {**run.provenance(), "summary": summary}, "\n".join(lines) + "\n",
                "partial_scans.csv")


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.partial_scans``."""
    run_main(main)


if __name__ == "__main__":
    cli()
