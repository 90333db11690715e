#!/usr/bin/env python3
"""Write a training checkpoint as a compact model file: float16 weights, config and warm-up state only.

    tools/export_model.py CHECKPOINT --out FILE [--note TEXT] [--overwrite]

The file loads with ``torch.load(weights_only=True)`` and is read by ``tools/predict.py --checkpoint FILE``
like any checkpoint; ``pointmamba/pretrained/teeth17_shared_data.pth`` (the shipped model) was written so.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ._common import run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="checkpoint written by tools/train.py")
    parser.add_argument("--out", required=True, help="compact model file to write")
    parser.add_argument("--note", default="", help="provenance note stored in the file")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out (never the input)")
    args = parser.parse_args()

    from pointmamba.cli.output_files import check_out_file
    from pointmamba.training.checkpoint import checkpoint_config, load_checkpoint
    from pointmamba.pretrained import export_compact

    check_out_file(args.out, [args.checkpoint], args.overwrite)
    state = load_checkpoint(args.checkpoint)
    checkpoint_config(state, args.checkpoint)  # a model file others will load: its config must pass the rules
    out = export_compact(state, args.out, {"source": Path(args.checkpoint).name, "note": args.note})
    print(f"written: {out} ({out.stat().st_size / 2**20:.1f} MB)")


def cli() -> None:
    """Entry point of ``pointmamba-export-model``."""
    run_main(main)


if __name__ == "__main__":
    cli()
