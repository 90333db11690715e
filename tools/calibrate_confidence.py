"""Measure the review flag and the tooth confidence on labelled scans (reliability plot, flagged vs unflagged).

The tool lives in ``pointmamba/cli/calibrate_confidence.py`` (installed as ``pointmamba-calibrate-confidence``);
this script runs it from a checkout: ``python tools/calibrate_confidence.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.calibrate_confidence import cli  # noqa: E402

if __name__ == "__main__":
    cli()
