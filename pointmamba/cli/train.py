#!/usr/bin/env python3
"""Train a segmentation network.

    tools/train.py CONFIG [--set key=value ...] [--out DIR] [--resume | --overwrite] [--corrections DIR]
        [--no-progress] [--verbose]

``--config CONFIG`` and ``--work-dir DIR`` are accepted as aliases of the positional config and ``--out``.

A work dir that holds a previous run (checkpoints) is refused unless --resume continues it or --overwrite
replaces it (removing only what a run writes); it holds one training at a time (a second one started there
stops in one line); a work dir that is a link, or a folder of other files, is refused.

The work dir gets last.pth / best.pth (each records the names of its training scans, which tools/test.py and
tools/predict.py --reference warn about), metrics.jsonl, train.log, val_pictures/ and TensorBoard events in tb/
(train/loss every step, val_iou/<jaw>/<FDI>, the config in the HPARAMS and TEXT tabs, a picture of one
validation prediction per validation).

Fine-tuning on a reviewer's corrections: ``tools/train.py configs/finetune_corrections.yaml --corrections DIR
--out DIR2`` trains the config's ``train.init_from`` (the shipped model) on the corrected scans in DIR (the meshes
with the review page's downloaded JSON beside them, Teeth3DS layout or flat), replaying the config's training
scans against forgetting (``pointmamba/data/corrections.py``, docs/results/corrections/README.md).

Multi-GPU / multi-node: ``torchrun --nproc_per_node=N tools/train.py CONFIG`` (DDP; gloo on CPU).
"""
from __future__ import annotations

import argparse

from ._common import add_config_args, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, positional=True)
    parser.add_argument("--out", "--work-dir", dest="out", metavar="DIR",
                        help="work dir (default: config work_dir or work_dirs/<config>); --work-dir is an alias")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/last.pth")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a previous run in the work dir (its checkpoints, metrics and TensorBoard events)")
    parser.add_argument("--corrections", metavar="DIR",
                        help="also train on the corrected scans in DIR (meshes + the review page's JSON beside them), "
                             "each drawn as often as the config's training scans are in all")
    args = parse_args(parser)

    from pointmamba.config import load_config
    from pointmamba.training.trainer import TrainingDiverged, Trainer

    overrides = list(args.overrides) + ([f"work_dir={args.out}"] if args.out else [])
    overrides += ["train.progress=false"] if args.no_progress else []
    cfg = load_config(args.config, overrides)
    summary = ""
    if args.corrections:  # every corrected file checked here, before the model loads
        from pointmamba.training.data_builders import corrections_overrides

        more, summary = corrections_overrides(cfg, args.corrections)
        cfg = load_config(args.config, overrides + more)
    trainer = Trainer(cfg, resume=args.resume, overwrite=args.overwrite)
    if summary:
        trainer.log(summary)
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
