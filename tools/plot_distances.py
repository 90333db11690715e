"""Histogram the distances between consecutive points along each space-filling curve, per scan.

The tool lives in ``pointmamba/cli/plot_distances.py`` (installed as ``pointmamba-plot-distances``); this script runs it from a
checkout: ``python tools/plot_distances.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.plot_distances import cli  # noqa: E402

if __name__ == "__main__":
    cli()
