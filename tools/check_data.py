"""Check a Teeth3DS-layout data set before training on it.

The tool lives in ``pointmamba/cli/check_data.py`` (installed as ``pointmamba-check-data``); this script runs it from a
checkout: ``python tools/check_data.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.check_data import cli  # noqa: E402

if __name__ == "__main__":
    cli()
