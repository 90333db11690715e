"""Train the tooth-shape classifier (a tooth's position from its own crop).

The tool lives in ``pointmamba/cli/train_tooth_shape.py``; this script runs it from a checkout:
``python tools/train_tooth_shape.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.train_tooth_shape import cli  # noqa: E402

if __name__ == "__main__":
    cli()
