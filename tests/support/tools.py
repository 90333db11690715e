"""Run a command-line tool in this process (no interpreter start, torch import or JIT load per call)."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import sys


def tool_module(name: str) -> str:
    """The module of tool ``name``: ``pointmamba.cli.<name>`` (the user tools) or ``pointmamba.research.<name>``
    (the studies)."""
    for package in ("pointmamba.cli", "pointmamba.research"):
        if importlib.util.find_spec(f"{package}.{name}") is not None:
            return f"{package}.{name}"
    raise ModuleNotFoundError(f"no tool {name!r} in pointmamba.cli or pointmamba.research")


def run_tool(name: str, *args: str) -> tuple[int, str, str]:
    """``python -m pointmamba.{cli,research}.<name> args...``: (exit code, stdout, stderr). Exceptions that the
    tool does not turn into an exit code propagate (a traceback is a test failure)."""
    module = importlib.import_module(tool_module(name))
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv[:]
    sys.argv = [str(module.__file__), *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            module.cli()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            err.write(exc.code + "\n")
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()
