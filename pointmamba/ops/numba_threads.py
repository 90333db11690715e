"""numba's thread pool for our kernels: which threading layer, how many threads a call gets, and how a
kernel splits its channels into tasks for them.

numba's OpenMP layer shares libgomp with torch; once a kernel had run, small torch ops were measured
10-40x slower (thread pools fighting). The workqueue layer has no such interaction, so it is chosen here
unless NUMBA_THREADING_LAYER says otherwise. ``torch.set_num_threads`` governs numba's count too.
"""
from __future__ import annotations

import os

import numba
import torch
from numba import njit

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


def channel_blocks(batch: int, dim: int, groups: int, min_block: int, max_block: int | None = None) -> int:
    """Channel blocks per (batch element, group) for a kernel whose tasks are (b, group, block): enough
    tasks for every thread, blocks at most ``max_block`` and (where the group allows two) at least
    ``min_block`` channels wide."""
    per_group_dim = dim // groups
    per_group = -(-numba.get_num_threads() // max(1, batch * groups))  # blocks each (b, g) needs to feed every thread
    want = max(per_group, -(-per_group_dim // max_block)) if max_block else per_group
    return max(1, min(want, per_group_dim // min_block if per_group_dim >= 2 * min_block else 1))


@njit(inline="always")
def channel_block(task, nblk, ng, dpg):  # noqa: ANN001, ANN202 - numba
    """(b, g, block index, first channel, last channel + 1) of a task; blocks never straddle a group of
    ``dpg`` channels."""
    b = task // (ng * nblk)
    g = (task // nblk) % ng
    j = task % nblk
    return b, g, j, g * dpg + j * dpg // nblk, g * dpg + (j + 1) * dpg // nblk
