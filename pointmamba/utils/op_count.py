"""Counting the aten ops a piece of code dispatches: on CUDA each is a kernel launch or a view, so the count
tells a step bound by launches (``bench/train_step.py``, the gathered conv's test)."""
from __future__ import annotations

from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

# ops that read values back to the host: on CUDA each waits for every kernel queued before it
HOST_WAITS = frozenset({"_local_scalar_dense", "nonzero", "unique", "_unique2", "unique_consecutive", "unique_dim",
                        "masked_select"})


class OpCount(TorchDispatchMode):
    """``with OpCount() as count: ...``: ``count.ops`` holds the aten calls dispatched inside, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops[func.__name__.split(".")[0]] += 1
        return func(*args, **(kwargs or {}))

    @property
    def host_waits(self) -> int:
        return sum(n for name, n in self.ops.items() if name in HOST_WAITS)
