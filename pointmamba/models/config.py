"""``MODEL_DEFAULTS``: every model config key with its default; the schema configs are validated against.

``resolve_model_config`` merges a user's (partial) model section onto these defaults and rejects
unknown keys with the list of valid ones.
"""
from __future__ import annotations

import copy
from typing import Any

from ..point.curve_orders import ORDERS

__all__ = ["MODEL_DEFAULTS", "resolve_model_config"]

MODEL_DEFAULTS: dict[str, Any] = {
    "in_channels": 6,  # input feature channels (centred coords + normals)
    "num_classes": 17,  # classes per point (gingiva + 16 teeth of one jaw)
    "orders": list(ORDERS),  # ["z", "z-trans", "hilbert", "hilbert-trans"]  # serialization curves; block i of a stage uses orders[i % K]
    "shuffle_orders": True,  # permute the curves per training forward (PTv3 augmentation); eval never shuffles
    "stem_kernel": 5,  # stem SubMConv3d kernel size
    "cpe_kernel": 3,  # CPE SubMConv3d kernel size
    "enc_channels": [32, 64, 128, 256],  # channels per encoder stage (stage 0 at the input grid)
    "enc_depths": [2, 2, 2, 2],  # Mamba blocks per encoder stage
    "dec_channels": [32, 64, 128],  # channels per decoder stage, finest first (len = encoder stages - 1)
    "dec_depths": [1, 1, 1],  # Mamba blocks per decoder stage, finest first
    "pool_reduce": "max",  # grid pooling reduction of features: max | mean
    "d_state": 8,  # Mamba SSM state size (16 as in mamba-ssm costs ~30% more time on CPU)
    "d_conv": 4,  # Mamba causal conv width
    "expand": 2,  # Mamba inner expansion factor
    "mixer_combine": "sum",  # BiMamba merge of the two directions: sum | concat
    "mixer_share_params": False,  # BiMamba: one Mamba for both directions
    "drop_path": 0.1,  # stochastic depth, rising linearly to this over the encoder (decoder: down from it)
    "position": "cpe+relpos",  # position slot per stage: cpe | cpe+relpos | relpos+abs | sinusoidal | gru | logical
    # | sin+gru | sin+logical | none (see models/position.py)
    "relpos": {
        "preset": "fixed",  # fixed | naive (the seed's) | custom: fills the four keys below left at null
        "gate_bias_init": None,  # gate bias added after its LayerNorm, before the sigmoid (fixed -2.0, naive 0.0)
        "final_norm": None,  # LayerNorm at the end of the distance and direction encoders (fixed true, naive false)
        "scale_init": None,  # learnable contribution scale at init (fixed 0.1, naive 1.0)
        "max_rel_dist": None,  # mm; `fixed` normalization divides by it, `quantile` starts from it (fixed 4.0, naive 5.0)
        "normalization": "fixed",  # step-length normalization: fixed (max_rel_dist) | quantile (running estimate)
        "quantile": 0.95,  # quantile of positive step lengths tracked by `quantile` normalization
        "quantile_momentum": 0.1,  # EMA momentum of the running quantile (the first batch sets it)
        "quantile_min": 0.01,  # mm; clamp of the batch quantile, low end
        "quantile_max": 100.0,  # mm; clamp of the batch quantile, high end
        "direction": "unit",  # direction encoding: unit (vector) | angles (spherical theta, phi)
    },
    "abs_pos": {
        "init_std": 0.01,  # std of the Linear(3 -> C) weights of `relpos+abs`
        "scale": 0.1,  # factor on the absolute encoding
    },
    "sinusoidal": {
        "min_wavelength": 1.0,  # mm; shortest Fourier wavelength
        "max_wavelength": 100.0,  # mm; longest Fourier wavelength
        "scale": 0.1,  # factor on the Fourier features
    },
    "logical": {
        "window": 64,  # points per causal-attention window of `logical` / `sin+logical` (cost linear in points)
    },
}


def resolve_model_config(cfg: dict[str, Any] | None) -> dict[str, Any]:
    """A full model config from ``cfg`` (a full config with a ``model`` key, or the model section).

    Missing keys take ``MODEL_DEFAULTS``; unknown keys raise ValueError naming the valid ones.
    """
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, dict):
        raise ValueError(f"model config must be a mapping, got {type(cfg).__name__}")
    if isinstance(cfg.get("model"), dict):
        cfg = cfg["model"]
    return _merge(MODEL_DEFAULTS, cfg, "model")


def _merge(defaults: dict[str, Any], user: dict[str, Any], where: str) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    for key, value in user.items():
        if key not in defaults:
            raise ValueError(f"unknown config key '{where}.{key}'; valid keys under {where}: {', '.join(sorted(defaults))}")
        if isinstance(defaults[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"config key '{where}.{key}' must be a mapping with keys {', '.join(sorted(defaults[key]))}")
            out[key] = _merge(defaults[key], value, f"{where}.{key}")
        else:
            out[key] = copy.deepcopy(value)
    return out
