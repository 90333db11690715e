#!/usr/bin/env python3
"""Check a Teeth3DS-layout data set before training on it.

    pointmamba-check-data DIR [--out TABLE.md] [--no-progress] [--verbose]

Per scan (``<ID>_<jaw>.obj|ply|stl`` under DIR, any depth, with ``<stem>.json`` labels): the mesh reads
and looks complete, there is one label per vertex, every FDI number is valid for the jaw, the extent
says millimetres, and an anatomical side check from geometry alone (crown direction from teeth vs
gingiva, incisors -> molars, a right-handed frame) finds quadrants 2 and 3 on the patient's left; a warning where
an upper canine or first premolar is shaped as the other (its bucco-lingual width; numbered one tooth off?), where a
lower side is numbered with its 2 and 4 but no canine (the canine numbered 4?), and where one tooth number is labelled
in two places apart (a number typed on a second tooth).
Prints a table (ok / warn / FAIL per scan) and a summary; exits 1 if any scan failed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="data directory (Teeth3DS layout)")
    parser.add_argument("--out", help="also write the table (Markdown) to this file")
    args = parse_args(parser, backends=False)  # with --no-progress and --verbose

    from pointmamba.utils.atomic_file import atomic_write
    from pointmamba.data.data_check import check_directory, format_table

    reports = check_directory(args.root)
    table = format_table(reports)
    print(table)
    if args.out:
        atomic_write(Path(args.out), (table + "\n").encode())
    if any(r.status == "FAIL" for r in reports):
        sys.exit(1)


def cli() -> None:
    """Entry point of ``pointmamba-check-data``."""
    run_main(main)


if __name__ == "__main__":
    cli()
