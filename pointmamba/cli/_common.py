"""Shared command-line plumbing for the tools: config arguments and friendly error exits."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from typing import Any, Callable

from pointmamba.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()  # before anything imports torch (see pointmamba/cpu_runtime.py)

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)


def add_config_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--config", required=required, help="YAML config (see configs/)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. --set train.epochs=5 model.relpos.preset=naive")


def add_average_with_arg(parser: argparse.ArgumentParser, whose: str = "--checkpoint's") -> None:
    """``--average-with CKPT ...``: networks whose probabilities inference averages with the first's."""
    parser.add_argument("--average-with", nargs="+", default=[], metavar="CKPT",
                        help=f"more checkpoints whose probabilities are averaged with {whose} at inference (each "
                             "network built from its own stored config)")


def infer_overrides(items: list[str]) -> dict[str, Any]:
    """The ``infer`` switches a ``--set infer.KEY=VALUE ...`` list sets, checked against their defaults
    (types and ranges: a NaN smoothing weight hung the graph cut); ValueError for any other key (a
    checkpoint's model comes from the checkpoint)."""
    from pointmamba.config import merge, parse_override, resolve_infer

    user: dict[str, Any] = {}
    for item in items:
        user = merge(user, parse_override(item))
    if set(user) - {"infer"}:
        raise ValueError(f"--set takes infer.* keys only here (the model comes from the checkpoint), got {sorted(user)}")
    resolve_infer(user.get("infer"), "--set")
    return dict(user.get("infer", {}))


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args`` plus ``--verbose``; configures pointmamba's logging (DEBUG with --verbose, else
    WARNING) and prints which backend each op uses on CPU (and CUDA) to stderr."""
    parser.add_argument("--verbose", action="store_true", help="show debug log lines (e.g. each op's backend choice)")
    args = parser.parse_args(argv)
    logger = logging.getLogger("pointmamba")
    if not any(getattr(h, "_pointmamba_tools", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._pointmamba_tools = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    from pointmamba.ops import backend_report

    print(backend_report(), file=sys.stderr, flush=True)
    return args


def step_printer(name: str, enabled: bool = True) -> Callable[[str], None] | None:
    """A ``progress`` callback that prints each step of a long job as it starts, with the time since the
    first (``name: graph cut (63.7 s)``), to stderr; None when not ``enabled``."""
    if not enabled:
        return None
    start = time.perf_counter()

    def step(what: str) -> None:
        from tqdm import tqdm  # beside a progress bar over several scans, not through it

        tqdm.write(f"{name}: {what} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)

    return step


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
