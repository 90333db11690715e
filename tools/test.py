"""Evaluate a checkpoint on a split: accuracy, per-class IoU, mIoU, Dice and the 3DTeethSeg'22 metrics.

The tool lives in ``pointmamba/cli/test.py`` (installed as ``pointmamba-test``); this script runs it from a
checkout: ``python tools/test.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.test import cli  # noqa: E402

if __name__ == "__main__":
    cli()
