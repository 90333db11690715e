"""Bare-ridge check: flatten all teeth but a few, count the teeth invented on the ridge.

The tool lives in ``pointmamba/cli/bare_ridge_check.py``; this script runs it from a checkout:
``python tools/bare_ridge_check.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.bare_ridge_check import cli  # noqa: E402

if __name__ == "__main__":
    cli()
