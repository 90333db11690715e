"""Two-point distance probe: does a position encoding carry position?

The tool lives in ``pointmamba/cli/probe_distance.py`` (installed as ``pointmamba-probe-distance``); this script runs it from a
checkout: ``python tools/probe_distance.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.probe_distance import cli  # noqa: E402

if __name__ == "__main__":
    cli()
