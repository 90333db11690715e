"""Tooth-removal check: remove one tooth at a time, count how many others change their number.

The tool lives in ``pointmamba/cli/removal_check.py``; this script runs it from a checkout:
``python tools/removal_check.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.removal_check import cli  # noqa: E402

if __name__ == "__main__":
    cli()
