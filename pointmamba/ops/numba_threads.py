"""numba's thread pool for our kernels: which threading layer, and how many threads a call gets.

numba's OpenMP layer shares libgomp with torch; once a kernel had run, small torch ops were measured
10-40x slower (thread pools fighting). The workqueue layer has no such interaction, so it is chosen here
unless NUMBA_THREADING_LAYER says otherwise. ``torch.set_num_threads`` governs numba's count too.
"""
from __future__ import annotations

import os

import numba
import torch

if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

# Work items (e.g. batch * dim * L * N scan elements) per thread below which extra threads cost more than
# they bring: waking the pool costs ~0.1 ms on an idle machine but tens of ms on a loaded one (measured:
# a tiny scan fwd+bwd took 4-30 ms on 2 threads under load vs 0.65 ms on 1). 2^18 is ~1 ms of work.
GRAIN = 1 << 18


def set_threads(work: int) -> None:
    """Use as many numba threads as torch does, fewer when ``work`` is small."""
    want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS, -(-work // GRAIN)))
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)
