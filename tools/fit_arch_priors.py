"""Measure the priors of the instance-level tooth numbering on labelled scans.

The tool lives in ``pointmamba/cli/fit_arch_priors.py``; this script runs it from a checkout:
``python tools/fit_arch_priors.py --help``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli.fit_arch_priors import cli  # noqa: E402

if __name__ == "__main__":
    cli()
