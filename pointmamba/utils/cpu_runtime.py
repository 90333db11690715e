"""Process-wide CPU settings for training and inference, applied by the tools before torch is imported.

Two measured problems on a 2-core machine, one 16k-point training step of the default model:

- **OpenMP spinning.** After every parallel torch op, libgomp's worker threads busy-wait (up to
  GOMP_SPINCOUNT iterations, 300,000 by default) for more work. Our numba kernels run on their own
  thread pool, so those spinning threads took cores from the scan and conv kernels: 0.3-0.6 s of CPU per
  step. ``GOMP_SPINCOUNT=10000`` keeps a short spin (back-to-back torch ops still reuse awake threads).
  libgomp reads it once, when torch loads it, hence "before torch is imported".
- **Page faults on large tensors.** glibc serves big allocations with fresh ``mmap`` pages and returns
  them on free, so every new activation tensor of a step paid a page fault per 4 KB (~1 us each in this
  VM: a 64 MB ``torch.mul`` took 19.6 ms with a fresh output vs 3.4 ms for a copy into an existing one).
  ``mallopt`` keeps freed memory in the heap for reuse (no mmap, trim only above 1 GB of free top).

Together: train step 3.0-3.3 s -> 2.5-2.7 s (see ``bench/model.py``). Values the user already set in the
environment (GOMP_SPINCOUNT, OMP_WAIT_POLICY, MALLOC_*_) win; ``POINTMAMBA_CPU_TUNING=0`` skips all of it.
Library users get the same by calling ``tune_cpu_runtime()`` before ``import torch``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger(__name__)

GOMP_SPINCOUNT = "10000"
_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_MAX = -4
_TRIM_THRESHOLD = 1 << 30


def tune_cpu_runtime() -> dict[str, str]:
    """Apply the settings above where the user has not chosen otherwise; returns what was applied."""
    applied: dict[str, str] = {}
    if os.environ.get("POINTMAMBA_CPU_TUNING", "1") == "0":
        return applied
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        if "torch" in sys.modules:
            log.debug("cpu_runtime: torch is already imported; GOMP_SPINCOUNT would have no effect")
        else:
            os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT
            applied["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT
    if sys.platform.startswith("linux") and not any(k.startswith("MALLOC_") for k in os.environ):
        try:
            mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
        except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to tune
            return applied
        if mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD):
            applied["malloc"] = f"no mmap, trim above {_TRIM_THRESHOLD >> 20} MB"
    return applied
