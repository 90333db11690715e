"""What the CPU benchmarks share: repeated wall times, and the ``--json`` output."""
from __future__ import annotations

import json
import time
from typing import Any, Callable


def wall_times(fn: Callable[[], Any], repeats: int, warmup: bool = False) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn`` (after one untimed call with ``warmup``). The machines
    are shared: take the minimum (or the median) of these, not one run."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def print_json(wanted: bool, figures: Any) -> bool:
    """Print ``figures`` as one JSON line where ``--json`` asked for it; whether it did."""
    if wanted:
        print(json.dumps(figures))
    return bool(wanted)
