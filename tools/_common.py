"""Shared command-line plumbing for the tools: config arguments and friendly error exits."""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from pointmamba.cpu_runtime import tune_cpu_runtime  # noqa: E402

tune_cpu_runtime()  # before anything imports torch (see pointmamba/cpu_runtime.py)

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)


def add_config_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--config", required=required, help="YAML config (see configs/)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. --set train.epochs=5 model.relpos.preset=naive")


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    return f"warning: {message}\n"


def run_main(main: Callable[[], Any]) -> None:
    """Run ``main``; user errors (bad config, missing files, corrupt checkpoint) exit 2 with one clear line;
    warnings (a scan that looks cut short, say) print as one ``warning:`` line naming the file."""
    if not os.environ.get("POINTMAMBA_DEBUG"):
        warnings.formatwarning = _one_line_warning
    try:
        main()
    except USER_ERRORS as exc:
        if os.environ.get("POINTMAMBA_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        print("(set POINTMAMBA_DEBUG=1 for the full traceback)", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
