#!/usr/bin/env python3
"""Write a training checkpoint as a compact model file: float16 weights, config and warm-up state only.

    pointmamba-export-model CHECKPOINT [--average-with CKPT ...] --out FILE [--note TEXT] [--overwrite]
        [--no-progress] [--verbose]

The file keeps the names of the checkpoint's training scans (``train_scans``: tools/test.py and
tools/predict.py --reference warn when they score one). The file loads with ``torch.load(weights_only=True)`` and is read by ``tools/predict.py --checkpoint FILE``
like any checkpoint; ``pointmamba/checkpoints/teeth17_shared_data.pth`` (the shipped model) was written so.
With ``--average-with`` the file also holds those networks: inference averages their probabilities with
CHECKPOINT's (``infer.average_networks``); fine-tuning starts from CHECKPOINT's network.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ._common import add_average_with_arg, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="checkpoint written by tools/train.py")
    add_average_with_arg(parser, "the checkpoint's")
    parser.add_argument("--out", required=True, help="compact model file to write")
    parser.add_argument("--note", default="", help="provenance note stored in the file")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out (never the input)")
    args = parse_args(parser, backends=False)  # with --no-progress and --verbose, as every tool

    from pointmamba.cli.output_files import check_out_file
    from pointmamba.inference.averaged_networks import check_averageable, check_one_network
    from pointmamba.checkpoints.shipped import export_compact
    from pointmamba.checkpoints.checkpoint import checkpoint_config, load_checkpoint

    check_out_file(args.out, [args.checkpoint, *args.average_with], args.overwrite)
    first = load_checkpoint(args.checkpoint)
    states, configs = [], []
    for path in [args.checkpoint, *args.average_with]:
        state = first if path == args.checkpoint else load_checkpoint(path)
        configs.append(checkpoint_config(state, path))  # a model file others will load: its config must pass the rules
        check_one_network(state, path)
        states.append((state, {"source": Path(path).name, "note": args.note}))
    check_averageable(configs[0], configs[1:], args.out)  # refused now, not by whoever loads the file
    out = export_compact(states[0][0], args.out, states[0][1], average_with=states[1:])
    print(f"written: {out} ({out.stat().st_size / 2**20:.1f} MB)")


def cli() -> None:
    """Entry point of ``pointmamba-export-model``."""
    run_main(main)


if __name__ == "__main__":
    cli()
