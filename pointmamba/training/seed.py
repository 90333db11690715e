"""Seeding and RNG-state capture, so a resumed CPU run continues bit-for-bit."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_deterministic() -> None:
    """Deterministic kernels where torch has them. CUDA scatter/index_add and mamba-ssm's backward use
    atomics and stay nondeterministic in the last bits; CPU runs are bit-for-bit."""
    torch.use_deterministic_algorithms(True, warn_only=True)


def numpy_rng_state() -> dict[str, Any]:
    """NumPy's legacy global RNG state as plain data (a dict with an int64 tensor), so checkpoints holding
    it load with ``torch.load(weights_only=True)``; ``np.random.get_state()`` itself holds an ndarray."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"bit_generator": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}


def set_numpy_rng_state(state: Any) -> None:
    """Restore what :func:`numpy_rng_state` returned (or a raw ``np.random.get_state()`` tuple, as
    checkpoints written before it hold)."""
    if isinstance(state, dict):
        keys = np.asarray(state["keys"].numpy() if torch.is_tensor(state["keys"]) else state["keys"])
        state = (state["bit_generator"], keys.astype(np.uint32), state["pos"], state["has_gauss"],
                 state["cached_gaussian"])
    np.random.set_state(state)


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch (and CUDA) RNG states, as tensors and plain data only."""
    state = {"python": random.getstate(), "numpy": numpy_rng_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    python = state["python"]  # a tuple when saved; lists where a round trip turned it into one
    random.setstate(tuple(tuple(x) if isinstance(x, list) else x for x in python))
    set_numpy_rng_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
