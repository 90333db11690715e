#!/usr/bin/env python3
"""Measure the priors of the instance-level tooth numbering (tooth widths, missing positions, spacing)
on the ground truth of a config's training scans, and print them as the ``FITTED`` table of
``pointmamba/evaluation/arch_priors.py``.

    tools/fit_arch_priors.py --config FILE [--set key=value ...] [--json OUT]

Position-labelled arches (``data.position_label_roots``) count only where complete: elsewhere their
numbers are positions, not identities.
"""
from __future__ import annotations

import argparse
import json
import pprint

from ._common import add_config_args, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parse_args(parser)

    import numpy as np
    from tqdm import tqdm

    from pointmamba.atomic_file import atomic_write
    from pointmamba.config import load_config
    from pointmamba.data.mesh import apply_transform
    from pointmamba.evaluation.arch_priors import fit_priors
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    dataset = build_dataset(cfg, "train", train=False)

    def arches():
        for i in tqdm(range(len(dataset)), desc="arches"):
            if not dataset.labels_are_identities(i):
                continue
            d = dataset.preprocessed(i)
            if "labels" not in d:
                continue
            aligned = apply_transform(d["vertices"].astype(np.float64) + d["origin"], d["transform"])
            yield aligned, d["labels"].astype(np.int64), str(d["jaw"])

    table = fit_priors(arches())
    pprint.pprint(table, width=110, sort_dicts=False)
    if args.json:
        atomic_write(args.json, json.dumps(table, indent=2).encode())


def cli() -> None:
    """Entry point of ``pointmamba-fit-arch-priors``."""
    run_main(main)


if __name__ == "__main__":
    cli()
