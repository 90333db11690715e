"""For the scripts left in tools/ (demo.py): the checkout on sys.path, then the tools' shared plumbing."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cli._common import add_config_args, parse_args, run_main  # noqa: E402,F401
