"""Run a command-line tool in this process (no interpreter start, torch import or JIT load per call)."""
from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def run_tool(name: str, *args: str) -> tuple[int, str, str]:
    """``tools/<name>.py args...`` as ``__main__``: (exit code, stdout, stderr). Exceptions that the tool
    does not turn into an exit code propagate (a traceback is a test failure)."""
    out, err = io.StringIO(), io.StringIO()
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(TOOLS / f"{name}.py"), *map(str, args)]
    sys.path.insert(0, str(TOOLS))
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(str(TOOLS / f"{name}.py"), run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            err.write(exc.code + "\n")
    finally:
        sys.argv, sys.path[:] = argv, path
    return code, out.getvalue(), err.getvalue()
