#!/usr/bin/env python3
"""Train a segmentation network.

    tools/train.py --config FILE [--set key=value ...] [--work-dir DIR] [--resume | --overwrite]

A work dir that holds a previous run (checkpoints) is refused unless --resume continues it or --overwrite
replaces it (removing only what a run writes); it holds one training at a time (a second one started there
stops in one line); a work dir that is a link, or a folder of other files, is refused.

Multi-GPU / multi-node: ``torchrun --nproc_per_node=N tools/train.py --config FILE`` (DDP; gloo on CPU).
"""
from __future__ import annotations

import argparse

from ._common import add_config_args, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--work-dir", help="output directory (default: config work_dir or work_dirs/<config>)")
    parser.add_argument("--resume", action="store_true", help="continue from <work-dir>/last.pth")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a previous run in the work dir (its checkpoints, metrics and TensorBoard events)")
    args = parse_args(parser)

    from pointmamba.config import load_config
    from pointmamba.training.trainer import TrainingDiverged, Trainer

    overrides = list(args.overrides) + ([f"work_dir={args.work_dir}"] if args.work_dir else [])
    cfg = load_config(args.config, overrides)
    trainer = Trainer(cfg, resume=args.resume, overwrite=args.overwrite)
    try:
        trainer.train()
    except TrainingDiverged as exc:
        raise SystemExit(f"error: {exc}") from None
    finally:
        trainer.close()
    saved = [name for name in ("last.pth", "best.pth") if (trainer.work_dir / name).is_file()]
    trainer.log(f"done: checkpoints in {trainer.work_dir} ({', '.join(saved) or 'none'}), "
                f"TensorBoard: {trainer.work_dir / 'tb'}")


def cli() -> None:
    """Entry point of ``pointmamba-train``."""
    run_main(main)


if __name__ == "__main__":
    cli()
