"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

The tool lives in ``pointmamba/cli/predict.py`` (installed as ``pointmamba-predict``); this script runs it from a
checkout: ``python tools/predict.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.predict import cli  # noqa: E402

if __name__ == "__main__":
    cli()
