"""Value ranges of the config keys, checked after the type check so that a bad value (a batch size of 0, a
negative learning rate, a NaN smoothing weight) is reported by its key instead of by the library that trips
on it, or hangs, or allocates gigabytes first. A checkpoint's stored config goes through the same rules.

Upper bounds are there to stop typos and crafted files, not to limit real use: each is far above anything
a dental-scan run needs (10^23 epochs would never end; a million channels per stage allocate gigabytes
before the first error).
"""
from __future__ import annotations

import math
from typing import Any

# key: (lowest, highest, whether the lowest is allowed itself); None bounds are open; ``null`` values
# are left to the type check (keys whose default is None accept it)
RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "seed": (0, 2**32 - 1, True),  # NumPy's seed range
    "train.epochs": (1, 100_000, True),
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
    "data.synthetic_count": (0, 100_000, True),
    "data.synthetic_vertices": (100, 10_000_000, True),
    "data.grid_size": (0, None, True),
    "data.max_points": (1, None, True),
    "data.num_workers": (0, 256, True),
    "data.position_label_weight": (0, 1, True),
    "warmup.epochs": (0, None, True),
    "warmup.ramp_epochs": (0, None, True),
    "diagnostics.interval": (0, None, True),
    "diagnostics.explode_ratio": (0, None, True),
    "diagnostics.vanish_ratio": (0, None, True),
    # inference: a NaN or huge smoothing weight overflowed the graph cut's integer costs (it never ended)
    "infer.graph_cut_smoothing": (0, 1000, True),
    "infer.graph_cut_density_power": (0, 4, True),
    "infer.graph_cut_fine_cycles": (1, 1000, True),
    "infer.graph_cut_tooth_pair_cost": (1, 2, True),
    "infer.numbering_fragment_cost": (0, 1000, True),
    "infer.merge_area_limit": (0, 100, True),
    "infer.mend_unnumbered": (0, 1000, True),
    "infer.mend_unnumbered_width": (0, 2, True),
    "infer.mend_unnumbered_area": (0, 2, True),
    "infer.numbering_evidence_weight": (0, 100, False),
    "infer.numbering_touching_nu": (0, 1e6, False),
    "infer.numbering_class_prior": (0, 4, True),
    "infer.flagged_confidence_scale": (0, 1, False),
    # model
    "model.stem_kernel": (1, 9, True),
    "model.cpe_kernel": (1, 9, True),
    "model.d_state": (1, 256, True),
    "model.d_conv": (1, 16, True),
    "model.expand": (1, 16, True),
    "model.relpos.gate_bias_init": (-100, 100, True),
    "model.relpos.scale_init": (-100, 100, True),
    "model.relpos.max_rel_dist": (0, 1e6, False),
    "model.relpos.quantile": (0, 1, False),
    "model.relpos.quantile_momentum": (0, 1, False),
    "model.relpos.quantile_min": (0, 1e6, False),
    "model.relpos.quantile_max": (0, 1e6, False),
    "model.abs_pos.init_std": (0, 100, True),
    "model.abs_pos.scale": (-100, 100, True),
    "model.sinusoidal.min_wavelength": (0, 1e6, False),
    "model.sinusoidal.max_wavelength": (0, 1e6, False),
    "model.sinusoidal.scale": (-100, 100, True),
    "model.logical.window": (1, 1_000_000, True),
}

# list keys: every entry an integer in [lowest, highest]
INT_LISTS: dict[str, tuple[int, int]] = {
    "model.enc_channels": (1, 4096),
    "model.dec_channels": (1, 4096),
    "model.enc_depths": (0, 64),
    "model.dec_depths": (0, 64),
}

CHOICES: dict[str, tuple[Any, ...]] = {
    "data.num_classes": (17, 33),  # per jaw, or both jaws (pointmamba/data/fdi.py)
}

MAX_TTA_ANGLES = 64
"""Test-time views per scan at most (each is one forward pass of the network, twice with mirror TTA)."""

MAX_PARAMETERS = 500_000_000
"""Largest network a config may ask for (about 2 GB of float32 weights, 8 GB with AdamW's state)."""


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


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def estimated_parameters(model: dict[str, Any]) -> int:
    """Rough parameter count of the network a model section builds: per Mamba block two Mambas (one when
    shared) of about 3 x expand x C^2 weights each, and a CPE sparse conv of cpe_kernel^3 x C^2 (the
    default model: 7.6 M estimated, 7.0 M built)."""
    mambas = 1 if model.get("mixer_share_params") else 2
    per_c2 = mambas * 3 * int(model.get("expand", 2)) + int(model.get("cpe_kernel", 3)) ** 3
    stages = list(zip(model.get("enc_channels", []), model.get("enc_depths", [])))
    stages += list(zip(model.get("dec_channels", []), model.get("dec_depths", [])))
    return int(sum(int(d) * per_c2 * int(c) ** 2 for c, d in stages))


def range_errors(cfg: dict[str, Any]) -> list[str]:
    """One message per key whose value is out of range (``"config key 'train.batch_size' must be >= 1,
    got 0"``); betas must lie in [0, 1); ``infer.tta_angles`` must be a non-empty list of angles; the
    model's channel and depth lists integers in range, the network they build of a sane size."""
    errors = []
    for key, (lo, hi, closed) in RANGES.items():
        value = _get(cfg, key)
        if value is None or not _number(value):
            continue
        bad = not math.isfinite(value)
        if lo is not None:
            bad |= value < lo if closed else value <= lo
        if hi is not None:
            bad |= value > hi
        if bad:
            errors.append(f"config key {key!r} must be {_describe(lo, hi, closed)}, got {_short(value)}")
    for key, choices in CHOICES.items():
        value = _get(cfg, key)
        if value is not None and (isinstance(value, bool) or value not in choices):
            errors.append(f"config key {key!r} must be one of {', '.join(map(str, choices))}, got {_short(value)}")
    betas = _get(cfg, "train.betas")
    if isinstance(betas, (list, tuple)):
        if len(betas) != 2 or not all(_number(b) and 0 <= b < 1 for b in betas):
            errors.append(f"config key 'train.betas' must be two numbers in [0, 1), got {_short(betas)}")
    angles = _get(cfg, "infer.tta_angles")
    if isinstance(angles, (list, tuple)):
        if not 1 <= len(angles) <= MAX_TTA_ANGLES or not all(_number(a) and abs(a) <= 360 for a in angles):
            errors.append(f"config key 'infer.tta_angles' must be a list of 1 to {MAX_TTA_ANGLES} angles in "
                          f"[-360, 360] degrees ([0.0]: no rotation), got {_short(angles)}")
    lists_ok = True
    for key, (lo, hi) in INT_LISTS.items():
        value = _get(cfg, key)
        if isinstance(value, (list, tuple)) and not all(
                isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi for v in value):
            errors.append(f"config key {key!r} must be a list of integers in [{lo}, {hi}], got {_short(value)}")
            lists_ok = False
    model = _get(cfg, "model")
    if lists_ok and isinstance(model, dict) and all(_number(model.get(k, 1)) for k in ("expand", "cpe_kernel")):
        count = estimated_parameters(model)
        if count > MAX_PARAMETERS:
            errors.append(f"config keys 'model.enc_channels'/'enc_depths'/'dec_channels'/'dec_depths' ask for a "
                          f"network of about {count:,} parameters (at most {MAX_PARAMETERS:,})")
    return errors
