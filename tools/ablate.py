"""Run ablation configs with the same seed and budget and compare their training curves.

The tool lives in ``pointmamba/cli/ablate.py`` (installed as ``pointmamba-ablate``); this script runs it from a
checkout: ``python tools/ablate.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.ablate import cli  # noqa: E402

if __name__ == "__main__":
    cli()
