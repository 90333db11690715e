#!/usr/bin/env python3
"""Tooth-removal check: remove one tooth at a time from complete arches, count how many of the other
teeth change their number (see pointmamba/evaluation/removal_check.py).

    python -m pointmamba.research.removal_check --config FILE [--checkpoint CKPT] [--average-with CKPT ...]
        [--split val] [--mode delete|flatten|close] --out DIR [--set key=value ...]

Complete arches are those whose reference holds positions 1..7 on both sides. Prediction is the full
path of tools/predict.py (the ``infer`` section; switch with --set infer.KEY=VALUE). Writes
DIR/removals.csv (one row per removal), DIR/removal_check.json and DIR/summary.md.
"""
from __future__ import annotations

import argparse

from ..cli._common import add_config_args, add_study_args, open_eval_run, parse_args, run_main, write_study


def main() -> None:
    from pointmamba.evaluation.removal_check import REMOVAL_MODES  # numpy only: cheap before --help

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    add_study_args(parser)
    parser.add_argument("--mode", default="delete", choices=REMOVAL_MODES,
                        help="delete: cut the tooth's vertices out; flatten: lower its crown onto the gingiva; "
                             "close: flatten it and close its space (the teeth behind come forward)")
    args = parse_args(parser)

    from tqdm import tqdm

    from pointmamba.utils.atomic_file import write_csv
    from pointmamba.cli.output_files import make_out_dir
    from pointmamba.data import load_scan
    from pointmamba.data.missing_teeth import arch_is_complete
    from pointmamba.inference.pipeline import segment_scan
    from pointmamba.evaluation.removal_check import check_scan, removal_rows, removal_summary

    run = open_eval_run(args)
    model, cfg, device, out = run.model, run.cfg, run.device, run.out
    scans = [load_scan(p) for p in run.dataset.paths]
    complete = [s for s in scans if s.labels is not None and arch_is_complete(s.labels, s.jaw)]
    if not complete:
        raise ValueError(f"split {args.split!r}: no complete arch (positions 1..7 on both sides) to check")
    removals = []
    for scan in tqdm(complete, desc="removal check"):
        removals += check_scan(scan, lambda s: segment_scan(model, s, cfg, device).fdi, args.mode)
    summary = removal_summary(removals)
    make_out_dir(out)
    write_csv(out / "removals.csv", removal_rows(removals))
    table = (f"| removals | changing any other tooth | teeth checked | teeth changed |\n|---|---|---|---|\n"
             f"| {summary['removals']} ({summary['scans']} complete arches) | {summary['removals_changing_any']} "
             f"({summary['share_of_removals_changing_any']:.1%}) | {summary['teeth_checked']} | "
             f"{summary['teeth_changed']} ({summary['share_of_teeth_changed']:.1%}) |\n")
    write_study(out, "removal_check.json", {**run.provenance(mode=args.mode), "summary": summary,
                                            "scans": [s.name for s in complete]}, table, "removals.csv")


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.removal_check``."""
    run_main(main)


if __name__ == "__main__":
    cli()
