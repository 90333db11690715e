"""A line on stderr while numba compiles one of our CPU kernels, so a first run does not look hung.

numba compiles each kernel on its first call after install (or after numba, Python or the kernel's
source changed): 4-8 s per parallel kernel on 2 cores, about 13 s before a first prediction shows
anything. Every later process loads the machine code from numba's cache (``cache=True``: beside the
source in ``pointmamba/ops/__pycache__``, or numba's per-user cache directory where the package folder
is read-only, e.g. a system-wide install; ``NUMBA_CACHE_DIR`` to choose). Loading from the cache prints
nothing. The notice listens to numba's ``numba:compile`` event, which fires only for real compilations.
"""
from __future__ import annotations

import sys
import time

from numba.core import event

__all__ = ["install"]

_PREFIX = "pointmamba."


class _Notice(event.Listener):
    """Prints when a top-level compilation of a pointmamba kernel starts and how long it took."""

    def __init__(self) -> None:
        self.depth = 0
        self.start = 0.0
        self.name = ""

    @staticmethod
    def _ours(ev: event.Event) -> str | None:
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        module = getattr(func, "__module__", "") or ""
        return f"{module.rpartition('.')[2]}.{func.__name__}" if module.startswith(_PREFIX) else None

    def on_start(self, ev: event.Event) -> None:
        self.depth += 1
        name = self._ours(ev)
        if self.depth == 1 and name is not None:
            self.start, self.name = time.perf_counter(), name
            print(f"pointmamba: compiling CPU kernel {name} (once; later runs load it from numba's cache) ...",
                  file=sys.stderr, flush=True)

    def on_end(self, ev: event.Event) -> None:
        self.depth -= 1
        if self.depth == 0 and self.name:
            print(f"pointmamba: compiled {self.name} in {time.perf_counter() - self.start:.1f} s",
                  file=sys.stderr, flush=True)
            self.name = ""


_LISTENER: _Notice | None = None


def install() -> None:
    """Register the notice once per process (the kernel modules call this when imported)."""
    global _LISTENER
    if _LISTENER is None:
        _LISTENER = _Notice()
        event.register("numba:compile", _LISTENER)
