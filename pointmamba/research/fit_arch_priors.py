#!/usr/bin/env python3
"""Measure the priors of the instance-level tooth numbering (tooth widths, missing positions, spacing)
on the ground truth of a config's training scans, and print them as the ``FITTED`` table of
``pointmamba/inference/arch_priors.py``.

    python -m pointmamba.research.fit_arch_priors --config FILE [--set key=value ...] [--out FILE.json]
        [--no-progress] [--verbose]

(``--json`` is an alias of ``--out``.)

It also prints ``class_points``, the training points of each class of a 17-class network
(``FITTED_CLASS_POINTS``, the class frequencies the numbering takes out of the network's evidence):

    python -m pointmamba.research.fit_arch_priors --config configs/shared_data_recipe_all.yaml \
        --set "data.train_exclude=[MSN021,MSN022,...,IOS093]"    # the val_names of both split configs

Position-labelled arches (``data.position_label_roots``) count only where complete: elsewhere their
numbers are positions, not identities.

``--mixed`` fits the child's priors instead (``FITTED_MIXED``, used where the dentition is given as
``mixed``): on the identity-labelled arches whose own numbering reads the lone-premolar pattern as a mixed
dentition (:func:`~pointmamba.inference.dentition.reference_dentition`), identity-labelled roots only (a
complete position-labelled arch that reads so is an adult's closed extraction). ``FITTED_MIXED`` leaves out
the val patients of both splits:

    python -m pointmamba.research.fit_arch_priors --config configs/shared_data_recipe_all.yaml --mixed \
        --set "data.train_exclude=[MSN021,MSN022,...,IOS093]"    # the val_names of both split configs
"""
from __future__ import annotations

import argparse
import pprint

from ..utils import finite_json
from ..cli._common import add_config_args, parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--mixed", action="store_true", help="fit the child's priors on the mixed-dentition arches")
    parser.add_argument("--out", "--json", dest="json", metavar="FILE", help="also write the table as JSON here")
    args = parse_args(parser)

    from pointmamba.utils.atomic_file import atomic_write
    from pointmamba.config import load_config
    from pointmamba.inference.arch_priors import fit_child_priors, fit_priors
    from pointmamba.inference.dentition import reference_dentition
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    dataset = build_dataset(cfg, "train", train=False)
    arches = [(aligned, labels, jaw) for i, aligned, labels, jaw in dataset.identity_arches()
              # a complete position-labelled arch that reads mixed is an adult's closed extraction, counted
              if not args.mixed
              or (dataset.identity_labels[i] and reference_dentition(aligned, labels, jaw) == "mixed")]
    if args.mixed:
        print(f"{len(arches)} mixed-dentition arches")
    table = (fit_child_priors if args.mixed else fit_priors)(arches)
    if not args.mixed:  # the 17-class network's training points per class: arch_priors.FITTED_CLASS_POINTS
        from pointmamba.training.loss import class_counts

        table["class_points"] = class_counts(dataset).tolist()
    pprint.pprint(table, width=110, sort_dicts=False)
    if args.json:
        atomic_write(args.json, finite_json.dumps(table, indent=2).encode())


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.fit_arch_priors``."""
    run_main(main)


if __name__ == "__main__":
    cli()
