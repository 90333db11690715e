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


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
