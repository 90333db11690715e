#!/usr/bin/env python3
"""Write a training checkpoint as a compact model file: float16 weights, config and warm-up state only.

    tools/export_model.py CHECKPOINT [--average-with CKPT ...] [--tooth-shape FILE [--shape-weight W]
        [--tooth-weight W]] --out FILE [--note TEXT] [--overwrite] [--no-progress] [--verbose]

The file keeps the names of the checkpoint's training scans (``train_scans``: tools/test.py and
tools/predict.py --reference warn when they score one). The file loads with ``torch.load(weights_only=True)`` and is read by ``tools/predict.py --checkpoint FILE``
like any checkpoint; ``pointmamba/pretrained/teeth17_shared_data.pth`` (the shipped model) was written so.
With ``--average-with`` the file also holds those networks: inference averages their probabilities with
CHECKPOINT's (``infer.average_networks``); fine-tuning starts from CHECKPOINT's network. With
``--tooth-shape`` it also holds a tooth-shape network, which the instance numbering then uses at the
stored ``--shape-weight`` (positions) and ``--tooth-weight`` ("no tooth") unless ``infer.shape_weight`` /
``infer.tooth_weight`` / ``infer.shape_model`` say otherwise. Given a
model file instead of a training checkpoint, it writes that file's networks unchanged with the
tooth-shape network added (or replaced).
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
    parser.add_argument("--tooth-shape", metavar="FILE",
                        help="also hold this tooth-shape network (tools/train_tooth_shape.py): inference then uses it "
                             "in the instance numbering")
    parser.add_argument("--shape-weight", type=float,
                        help="the weight stored with --tooth-shape (infer.shape_weight when that is unset)")
    parser.add_argument("--tooth-weight", type=float,
                        help="the 'no tooth' weight stored with --tooth-shape (infer.tooth_weight when that is unset)")
    parser.add_argument("--note", default="", help="provenance note stored in the file")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out (never the input)")
    args = parse_args(parser, backends=False)  # with --no-progress and --verbose, as every tool

    from pointmamba.cli.output_files import check_out_file
    from pointmamba.evaluation.averaged_networks import check_averageable, check_one_network
    from pointmamba.pretrained import FORMAT, export_compact, with_tooth_shape
    from pointmamba.training.checkpoint import checkpoint_config, load_checkpoint

    inputs = [args.checkpoint, *args.average_with] + ([args.tooth_shape] if args.tooth_shape else [])
    check_out_file(args.out, inputs, args.overwrite)
    shape = None
    if args.tooth_shape:
        from pointmamba.evaluation.tooth_shape import read_shape_entry, shape_network

        shape = read_shape_entry(args.tooth_shape)
        network = shape_network(shape, args.tooth_shape)  # a network that does not load is refused before writing
        for flag, key, value in (("--shape-weight", "weight", args.shape_weight),
                                 ("--tooth-weight", "tooth_weight", args.tooth_weight)):
            if value is None:
                continue
            if not 0 <= value <= 100:
                raise ValueError(f"{flag} must be in [0, 100], got {value}")
            shape["meta"] = {**shape.get("meta", {}), key: float(value)}
        if (args.tooth_weight or 0) > 0 and not network.no_tooth:
            raise ValueError(f"{args.tooth_shape}: --tooth-weight needs a tooth-shape network with a 'no tooth' "
                             "output (tools/train_tooth_shape.py --ridge-share > 0)")
    elif args.shape_weight is not None or args.tooth_weight is not None:
        raise ValueError("--shape-weight and --tooth-weight need --tooth-shape FILE")
    first = load_checkpoint(args.checkpoint)
    if first.get("format") == FORMAT and shape is not None and not args.average_with:
        # already a model file, a tooth-shape network to add: its networks are kept as they are
        checkpoint_config(first, args.checkpoint)
        out = with_tooth_shape(first, shape, args.out)
        print(f"written: {out} ({out.stat().st_size / 2**20:.1f} MB)")
        return
    states, configs = [], []
    for path in [args.checkpoint, *args.average_with]:
        state = first if path == args.checkpoint else load_checkpoint(path)
        configs.append(checkpoint_config(state, path))  # a model file others will load: its config must pass the rules
        check_one_network(state, path)
        states.append((state, {"source": Path(path).name, "note": args.note}))
    check_averageable(configs[0], configs[1:], args.out)  # refused now, not by whoever loads the file
    out = export_compact(states[0][0], args.out, states[0][1], average_with=states[1:], tooth_shape=shape)
    print(f"written: {out} ({out.stat().st_size / 2**20:.1f} MB)")


def cli() -> None:
    """Entry point of ``pointmamba-export-model``."""
    run_main(main)


if __name__ == "__main__":
    cli()
