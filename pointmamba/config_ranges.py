"""Value ranges of the numeric config keys, checked after the type check so that a bad value (a batch
size of 0, a negative learning rate) is reported by its key instead of by the library that trips on it."""
from __future__ import annotations

import math
from typing import Any

# key: (lowest, highest, whether the lowest is allowed itself); None bounds are open; ``null`` values
# are left to the type check (keys whose default is None accept it)
RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "seed": (0, None, True),
    "train.epochs": (1, None, True),
    "train.batch_size": (1, None, True),
    "train.lr": (0, None, False),
    "train.weight_decay": (0, None, True),
    "train.lr_warmup_pct": (0, 1, True),
    "train.grad_clip": (0, None, True),
    "train.val_interval": (0, None, True),
    "train.log_interval": (1, None, True),
    "train.max_nonfinite": (1, None, True),
    "train.max_steps_per_epoch": (1, None, True),
    "train.label_smoothing": (0, 1, True),
    "train.class_balance": (0, 2, True),
    "data.synthetic_count": (0, None, True),
    "data.synthetic_vertices": (100, None, True),
    "data.grid_size": (0, None, True),
    "data.max_points": (1, None, True),
    "data.num_workers": (0, None, True),
    "data.position_label_weight": (0, 1, True),
    "warmup.epochs": (0, None, True),
    "warmup.ramp_epochs": (0, None, True),
    "diagnostics.interval": (0, None, True),
}


def _get(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _describe(lo: float | None, hi: float | None, closed: bool) -> str:
    if hi is None:
        return f"{'>=' if closed else '>'} {lo}"
    return f"in [{lo}, {hi}]" if closed else f"in ({lo}, {hi}]"


def range_errors(cfg: dict[str, Any]) -> list[str]:
    """One message per key whose value is out of range (``"config key 'train.batch_size' must be >= 1,
    got 0"``); betas must lie in [0, 1)."""
    errors = []
    for key, (lo, hi, closed) in RANGES.items():
        value = _get(cfg, key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        bad = not math.isfinite(value)
        if lo is not None:
            bad |= value < lo if closed else value <= lo
        if hi is not None:
            bad |= value > hi
        if bad:
            errors.append(f"config key {key!r} must be {_describe(lo, hi, closed)}, got {value!r}")
    betas = _get(cfg, "train.betas")
    if isinstance(betas, (list, tuple)):
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas):
            errors.append(f"config key 'train.betas' must be two numbers in [0, 1), got {betas!r}")
    return errors
