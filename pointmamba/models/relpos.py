"""Gated relative-position module (RelPos): each point's step from its predecessor along one curve order.

For a serialization order k, every point gets the vector to the point before it in curve order within
the same sample (the first point of each sample gets a zero vector and a ``first`` flag). Its length is
normalized (``fixed``: divided by ``max_rel_dist`` and clamped to [0, 1]; ``quantile``: divided by a
running estimate of the q-quantile of positive step lengths, updated from training batches and used in
both training and eval, so the two see the same scale) and encoded by an MLP; its direction (unit
vector, or spherical angles) by another. A sigmoid gate looks at the features and both embeddings and
the output is ``feat + ramp * scale * gate * proj(dist_emb, dir_emb)``.

The seed's version trained slowly; the ``fixed`` preset starts the module close to an identity (gate bias
-2, encoders ending in LayerNorm, scale 0.1) and ``naive`` reproduces the seed (gate bias 0, no final
LayerNorm, scale 1, max_rel_dist 5 mm) for the ablation.

Warm-up state: ``enabled`` False makes the module an exact identity; ``ramp`` multiplies the contribution.
Both are buffers (0-dim bool / float tensors in the state dict, so ``load_state_dict`` restores the state a
checkpoint was trained in); assigning a plain bool / float fills them (``module.ramp = 0.5``). Weights
written before they were buffers load with the defaults (on, 1); ``checkpoints/checkpoint.py`` fills them from
such a checkpoint's warm-up factor. ``record`` set to a dict makes forward store detached intermediates in it
(keys in :data:`RECORD_KEYS`); None (default) stores nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from ..point.batch import PointBatch

__all__ = ["RelPos", "RelPosConfig", "PRESETS", "RECORD_KEYS", "relative_steps"]

PRESETS: dict[str, dict[str, Any]] = {
    "fixed": {"gate_bias_init": -2.0, "final_norm": True, "scale_init": 0.1, "max_rel_dist": 4.0},
    "naive": {"gate_bias_init": 0.0, "final_norm": False, "scale_init": 1.0, "max_rel_dist": 5.0},
}
NORMALIZATIONS = ("fixed", "quantile")
DIRECTIONS = ("unit", "angles")
RECORD_KEYS = ("feat", "dist", "dist_norm", "dist_emb", "dir_emb", "gate", "pos", "contribution")
_QUANTILE_MAX_SAMPLES = 1 << 22  # torch.quantile refuses inputs above 16M elements; subsample with a stride
_STATE_BUFFERS = ("enabled", "ramp")  # the warm-up state (see the module docstring)
_STATE_DEFAULTS = {"enabled": torch.tensor(True), "ramp": torch.tensor(1.0)}
_GATE_NORM_GAIN = 0.5  # so the gate starts concentrated around sigmoid(bias), not smeared by a unit-std LN


@dataclass(frozen=True)
class RelPosConfig:
    """Resolved RelPos settings. Defaults live in one place each: ``MODEL_DEFAULTS['relpos']`` (with the
    meaning of every key) and, for the four preset keys, :data:`PRESETS`; build with :meth:`from_dict`."""

    gate_bias_init: float
    final_norm: bool
    scale_init: float
    max_rel_dist: float
    normalization: str
    quantile: float
    quantile_momentum: float
    quantile_min: float
    quantile_max: float
    direction: str

    @classmethod
    def from_dict(cls, cfg: dict[str, Any] | None = None) -> "RelPosConfig":
        """From a (partial) ``relpos`` config section over ``MODEL_DEFAULTS['relpos']``: the preset fills
        the four preset keys left at None."""
        from .config import MODEL_DEFAULTS

        cfg = {**MODEL_DEFAULTS["relpos"], **(cfg or {})}
        preset = cfg.pop("preset", "fixed")
        if preset not in (*PRESETS, "custom"):
            raise ValueError(f"relpos.preset must be one of {(*PRESETS, 'custom')}, got {preset!r}")
        base = PRESETS.get(preset, {})
        for key in PRESETS["fixed"]:
            if cfg.get(key) is None:
                if preset == "custom":
                    raise ValueError(f"relpos.preset 'custom' needs relpos.{key} set explicitly")
                cfg[key] = base[key]
        unknown = set(cfg) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown relpos keys {sorted(unknown)}; valid: {sorted(cls.__dataclass_fields__) + ['preset']}")
        out = cls(**cfg)
        out.check()
        return out

    def check(self) -> None:
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"relpos.normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"relpos.direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if not self.max_rel_dist > 0:
            raise ValueError(f"relpos.max_rel_dist must be > 0, got {self.max_rel_dist}")
        if not 0 < self.quantile <= 1:
            raise ValueError(f"relpos.quantile must be in (0, 1], got {self.quantile}")
        if not 0 < self.quantile_momentum <= 1:
            raise ValueError(f"relpos.quantile_momentum must be in (0, 1], got {self.quantile_momentum}")
        if not 0 < self.quantile_min <= self.quantile_max:
            raise ValueError(f"relpos.quantile_min/max must satisfy 0 < min <= max, got {self.quantile_min}, {self.quantile_max}")


def relative_steps(point: PointBatch, k: int) -> tuple[Tensor, Tensor]:
    """(step vector (N, 3) from each row's predecessor along order ``k``, ``first`` flag (N,) bool), row order.

    Cached in ``point.cache`` per ``point.order`` tensor (encoder and decoder stages at one resolution share it).
    """
    holder = point.cache.get("relpos_steps")
    if holder is None or holder[0] is not point.order:  # re-serialized: the cached steps are stale
        holder = point.cache["relpos_steps"] = (point.order, {})
    cache = holder[1]
    if k not in cache:
        seq = point.order[k]
        coord = point.coord[seq]
        b = point.batch[seq]
        first = torch.ones_like(b, dtype=torch.bool)
        first[1:] = b[1:] != b[:-1]
        step = torch.zeros_like(coord)
        step[1:] = coord[1:] - coord[:-1]
        step[first] = 0.0
        inv = point.inverse[k]
        cache[k] = (step[inv], first[inv])
    return cache[k]


def _mlp(dims: list[int], final_norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(dims) - 2:
            layers += [nn.LayerNorm(b), nn.GELU()]
    if final_norm:
        layers.append(nn.LayerNorm(dims[-1]))
    return nn.Sequential(*layers)


class RelPos(nn.Module):
    """``forward(feat (N, C), point, k) -> (N, C)``: adds the gated step encoding of order ``k``."""

    def __init__(self, channels: int, cfg: RelPosConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or RelPosConfig.from_dict()
        cfg.check()
        self.cfg = cfg
        d = channels
        self.dist_encoder = _mlp([1, max(1, d // 4), max(1, d // 2), d], cfg.final_norm)
        dir_in = (3 if cfg.direction == "unit" else 2) + 1  # + the first-of-sample flag
        self.dir_encoder = _mlp([dir_in, max(1, d // 2), d], cfg.final_norm)
        self.gate = nn.Linear(3 * d, d, bias=False)  # a bias here would be normalised away by the LayerNorm
        self.gate_norm = nn.LayerNorm(d, bias=False)
        self.gate_bias = nn.Parameter(torch.full((d,), float(cfg.gate_bias_init)))
        self.proj = nn.Sequential(nn.Linear(2 * d, d), nn.LayerNorm(d))
        self.scale = nn.Parameter(torch.tensor(float(cfg.scale_init)))
        self.register_buffer("running_scale", torch.tensor(float(cfg.max_rel_dist)))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        with torch.no_grad():
            self.gate_norm.weight.fill_(_GATE_NORM_GAIN)
        self.register_buffer("enabled", torch.tensor(True))
        self.register_buffer("ramp", torch.tensor(1.0))
        self.record: dict[str, Any] | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _STATE_BUFFERS and not isinstance(value, Tensor) and name in self._buffers:
            with torch.no_grad():
                self._buffers[name].fill_(value)  # keeps device and dtype; state-dict entry stays the same tensor
            return
        super().__setattr__(name, value)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        for name in _STATE_BUFFERS:  # weights from before the warm-up state was in them: keep the defaults
            state_dict.setdefault(prefix + name, _STATE_DEFAULTS[name].clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ---------------------------------------------------------------- distance normalization
    def _normalizer(self, dist: Tensor, first: Tensor) -> Tensor | float:
        cfg = self.cfg
        if cfg.normalization == "fixed":
            return cfg.max_rel_dist
        if self.training:
            positive = dist[(dist > 0) & ~first].detach().float()
            if positive.numel():
                if positive.numel() > _QUANTILE_MAX_SAMPLES:
                    positive = positive[:: math.ceil(positive.numel() / _QUANTILE_MAX_SAMPLES)]
                q = torch.quantile(positive, cfg.quantile).clamp(cfg.quantile_min, cfg.quantile_max)
                with torch.no_grad():
                    if int(self.num_batches_tracked) == 0:
                        self.running_scale.copy_(q)
                    else:
                        self.running_scale.lerp_(q.to(self.running_scale.dtype), cfg.quantile_momentum)
                    self.num_batches_tracked += 1
        return self.running_scale.to(dist.dtype)

    def _direction(self, step: Tensor, dist: Tensor, first: Tensor) -> Tensor:
        flag = first.to(step.dtype).unsqueeze(1)
        if self.cfg.direction == "unit":
            unit = step / dist.clamp_min(1e-12).unsqueeze(1)
            return torch.cat([unit, flag], 1)
        theta = torch.acos((step[:, 2] / dist.clamp_min(1e-12)).clamp(-1.0, 1.0)) / math.pi  # polar, [0, 1]
        phi = torch.atan2(step[:, 1], step[:, 0]) / math.pi  # azimuth, (-1, 1]
        theta = torch.where(dist > 0, theta, torch.zeros_like(theta))
        return torch.cat([theta[:, None], phi[:, None], flag], 1)

    def forward(self, feat: Tensor, point: PointBatch, k: int) -> Tensor:
        if not self.enabled:
            return feat
        step, first = relative_steps(point, k)
        step = step.to(feat.dtype)
        dist = step.norm(dim=1)
        dist_norm = (dist / self._normalizer(dist, first)).clamp(0.0, 1.0)
        dist_emb = self.dist_encoder(dist_norm.unsqueeze(1))
        dir_emb = self.dir_encoder(self._direction(step, dist, first))
        gate = torch.sigmoid(self.gate_norm(self.gate(torch.cat([feat, dist_emb, dir_emb], 1))) + self.gate_bias)
        pos = self.proj(torch.cat([dist_emb, dir_emb], 1))
        contribution = (self.ramp * self.scale) * gate * pos
        if self.record is not None:
            values = (feat, dist, dist_norm, dist_emb, dir_emb, gate, pos, contribution)
            self.record.update({key: v.detach() for key, v in zip(RECORD_KEYS, values)})
            self.record["scale"] = float(self.scale.detach())
            self.record["norm_scale"] = float(self.running_scale) if self.cfg.normalization == "quantile" else self.cfg.max_rel_dist
        return feat + contribution

    def extra_repr(self) -> str:
        c = self.cfg
        return (f"normalization={c.normalization}, max_rel_dist={c.max_rel_dist}, direction={c.direction}, "
                f"final_norm={c.final_norm}, enabled={bool(self.enabled)}, ramp={float(self.ramp)}")
