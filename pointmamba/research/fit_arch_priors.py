#!/usr/bin/env python3
"""Measure the priors of the instance-level tooth numbering (tooth widths, missing positions, spacing)
on the ground truth of a config's training scans, and print them as the ``FITTED`` table of
``pointmamba/inference/arch_priors.py``.

    python -m pointmamba.research.fit_arch_priors --config FILE [--set key=value ...] [--out FILE.json]
        [--no-progress] [--verbose]

(``--json`` is an alias of ``--out``.)

Position-labelled arches (``data.position_label_roots``) count only where complete: elsewhere their
numbers are positions, not identities.
"""
from __future__ import annotations

import argparse
import pprint

from ..utils import finite_json
from ..cli._common import add_config_args, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--out", "--json", dest="json", metavar="FILE", help="also write the table as JSON here")
    args = parse_args(parser)

    from pointmamba.utils.atomic_file import atomic_write
    from pointmamba.config import load_config
    from pointmamba.inference.arch_priors import fit_priors
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    dataset = build_dataset(cfg, "train", train=False)
    table = fit_priors((aligned, labels, jaw) for _, aligned, labels, jaw in dataset.identity_arches())
    pprint.pprint(table, width=110, sort_dicts=False)
    if args.json:
        atomic_write(args.json, finite_json.dumps(table, indent=2).encode())


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.fit_arch_priors``."""
    run_main(main)


if __name__ == "__main__":
    cli()
