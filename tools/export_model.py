"""Write a training checkpoint as a compact model file: float16 weights, config and warm-up state only.

The tool lives in ``pointmamba/cli/export_model.py`` (installed as ``pointmamba-export-model``); this script runs it from a
checkout: ``python tools/export_model.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.export_model import cli  # noqa: E402

if __name__ == "__main__":
    cli()
