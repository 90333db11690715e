"""Wall time of the named steps of a piece of work (load, preprocess, network, refine, write, picture).

A :class:`StepTimer` used as a context manager collects every :func:`step` run inside it, however deep in
the call stack (a context variable, so library functions time their steps without a timer argument);
outside any timer :func:`step` costs nothing but a lookup. A timer opened inside another is kept in the
outer one's ``children`` (a benchmark wrapping a tool gets the tool's per-scan timers).

    with StepTimer() as timer:
        with step("load"):
            scan = load(...)
        segment(scan)            # its own ``with step("network"): ...`` lands in ``timer``
    print(timer.line())          # load 0.41 s, network 1.02 s; total 1.43 s
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

__all__ = ["StepTimer", "step"]

_CURRENT: ContextVar[StepTimer | None] = ContextVar("pointmamba_step_timer", default=None)


class StepTimer:
    """Seconds per step name, in the order steps first ran; a name that runs again adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.children: list[StepTimer] = []
        self._tokens: list[Token] = []

    def __enter__(self) -> StepTimer:
        parent = _CURRENT.get()
        if parent is not None:
            parent.children.append(self)
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._tokens.pop())

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def line(self) -> str:
        """``load 0.41 s, network 1.02 s; total 1.43 s``."""
        parts = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())
        return f"{parts}; total {self.total:.2f} s" if parts else "no steps timed"


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time the block as step ``name`` of the innermost active :class:`StepTimer` (nothing without one)."""
    timer = _CURRENT.get()
    if timer is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        timer.add(name, time.perf_counter() - start)
