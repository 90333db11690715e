"""Train a segmentation network.

The tool lives in ``pointmamba/cli/train.py`` (installed as ``pointmamba-train``); this script runs it from a
checkout: ``python tools/train.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.train import cli  # noqa: E402

if __name__ == "__main__":
    cli()
