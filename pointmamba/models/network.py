"""The segmentation network: stem -> encoder stages with grid pooling -> decoder with unpooling -> head.

Stage = position slot (see ``position.py``: CPE and/or RelPos or another variant) then ``depth`` pre-norm
bidirectional Mamba blocks; block i of a stage runs along serialization order ``i % K``. With RelPos, a
stage holds one RelPos per order its blocks use, applied just before the first block using that order
(with depth <= K: one before each block). Encoder stage s > 0 starts with grid pooling (2x2x2 cells);
decoder stage s unpools to encoder level s and adds the skip (PTv3's SerializedUnpooling). The head is
Linear + LayerNorm + GELU + Linear per point.

Diagnostics group parameters by module name (``training/diagnostics.py``'s ``PARAM_GROUPS``): ``cpe`` (CPE
convs and the stem, ``cpe_stem``: the name every checkpoint's weights use), ``relpos``, ``mixer`` (BiMamba),
``head`` (classifier); everything else (norms, pooling, other position variants) is "other".
"""
from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor, nn

from ..point.serialization import ORDERS
from ..point.batch import PointBatch
from .mamba_block import MambaBlock
from .config import resolve_model_config
from .stem import Stem
from .pooling import POOL_REDUCTIONS, GridPooling, GridUnpooling
from .position import POSITIONS, PositionSlot
from .relpos import RelPos

__all__ = ["PointMambaSeg", "Stage", "build_model", "count_parameters", "stage_options"]

log = logging.getLogger("pointmamba")


def stage_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The :class:`Stage` keywords a resolved model config sets (the same for every stage)."""
    return {
        "num_orders": len(cfg["orders"]),
        "position": cfg["position"],
        "position_options": {"cpe_kernel": cfg["cpe_kernel"], "abs_pos": cfg["abs_pos"], "sinusoidal": cfg["sinusoidal"],
                             "logical": cfg["logical"], "relpos": cfg["relpos"]},
        "d_state": cfg["d_state"], "d_conv": cfg["d_conv"], "expand": cfg["expand"],
        "mixer_combine": cfg["mixer_combine"], "mixer_share_params": cfg["mixer_share_params"],
    }


class Stage(nn.Module):
    """Position slot + Mamba blocks at one resolution: ``forward(feat, point) -> feat``.

    Block i runs along order ``i % num_orders``; ``position_options`` are :class:`PositionSlot`'s keywords.
    """

    def __init__(self, channels: int, depth: int, drop_paths: list[float], *, num_orders: int,
                 position: str = "cpe+relpos", position_options: dict[str, Any] | None = None, d_state: int = 8,
                 d_conv: int = 4, expand: float = 2, mixer_combine: str = "sum", mixer_share_params: bool = False) -> None:
        super().__init__()
        self.num_orders = num_orders
        orders_used = [i % self.num_orders for i in range(depth)]
        self.position = PositionSlot(position, channels, orders_used, **(position_options or {}))
        self.blocks = nn.ModuleList(
            MambaBlock(channels, d_state=d_state, d_conv=d_conv, expand=expand,
                       combine=mixer_combine, share_params=mixer_share_params, drop_path=drop_paths[i])
            for i in range(depth)
        )

    def forward(self, feat: Tensor, point: PointBatch) -> Tensor:
        feat = self.position.pre(feat, point)
        seen: set[int] = set()
        for i, block in enumerate(self.blocks):
            k = i % self.num_orders
            if k not in seen:
                seen.add(k)
                relpos = self.position.relpos_for(k)
                if relpos is not None:
                    feat = relpos(feat, point, k)
            feat = block(feat, point, k)
        return feat


class PointMambaSeg(nn.Module):
    """``forward(point: PointBatch) -> logits (N, num_classes)``.

    The batch needs ``grid_coord`` (build it with ``grid_size``). It is serialized with the configured
    orders (shuffled in training when ``shuffle_orders``) unless it already is; the network caches
    neighbour maps and step vectors in ``point.cache`` (``point.clear_cache()`` drops them).
    """

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        self.cfg = cfg
        enc_c, enc_d = list(cfg["enc_channels"]), list(cfg["enc_depths"])
        dec_c, dec_d = list(cfg["dec_channels"]), list(cfg["dec_depths"])
        self.orders = tuple(cfg["orders"])
        self.shuffle_orders = bool(cfg["shuffle_orders"])
        self.in_channels = cfg["in_channels"]
        self.cpe_stem = Stem(cfg["in_channels"], enc_c[0], cfg["stem_kernel"])
        enc_dp = torch.linspace(0, cfg["drop_path"], sum(enc_d)).tolist() if sum(enc_d) else []
        dec_dp = torch.linspace(0, cfg["drop_path"], sum(dec_d)).tolist() if sum(dec_d) else []
        options = stage_options(cfg)
        self.enc = nn.ModuleList()
        for s, (c, d) in enumerate(zip(enc_c, enc_d)):
            stage = Stage(c, d, enc_dp[sum(enc_d[:s]):sum(enc_d[: s + 1])], **options)
            stage.pool = GridPooling(enc_c[s - 1], c, cfg["pool_reduce"]) if s > 0 else None
            self.enc.append(stage)
        self.dec = nn.ModuleList()
        for s, (c, d) in enumerate(zip(dec_c, dec_d)):
            coarse = dec_c[s + 1] if s + 1 < len(dec_c) else enc_c[-1]
            stage = Stage(c, d, dec_dp[sum(dec_d[:s]):sum(dec_d[: s + 1])][::-1], **options)
            stage.unpool = GridUnpooling(coarse, enc_c[s], c)
            self.dec.append(stage)
        head_c = dec_c[0] if dec_c else enc_c[0]
        self.head = nn.Sequential(nn.Linear(head_c, head_c), nn.LayerNorm(head_c), nn.GELU(),
                                  nn.Linear(head_c, cfg["num_classes"]))

    def relpos_modules(self) -> list[tuple[str, RelPos]]:
        """Every RelPos with a name like ``enc0.order1`` / ``dec2.order0`` (for warm-up and diagnostics)."""
        out: list[tuple[str, RelPos]] = []
        for prefix, stages in (("enc", self.enc), ("dec", self.dec)):
            for s, stage in enumerate(stages):
                if stage.position.relpos is not None:
                    out += [(f"{prefix}{s}.order{k}", m) for k, m in stage.position.relpos.items()]
        return out

    def forward(self, point: PointBatch) -> Tensor:
        if point.grid_coord is None:
            raise ValueError("PointMambaSeg: the PointBatch has no grid_coord; build it with grid_size=... (mm)")
        if point.feat.shape[1] != self.in_channels:
            raise ValueError(f"PointMambaSeg: feat has {point.feat.shape[1]} channels, model.in_channels is {self.in_channels}")
        if point.order is None:
            point.serialize(self.orders, shuffle=self.training and self.shuffle_orders)
        elif point.order.shape[0] != len(self.orders):
            raise ValueError(f"PointMambaSeg: the batch is serialized with {point.order.shape[0]} orders, "
                             f"the model was built for {len(self.orders)} ({self.orders})")
        feat = self.cpe_stem(point.feat, point)
        skips: list[tuple[Tensor, PointBatch, Tensor]] = []
        for s, stage in enumerate(self.enc):
            if s > 0:
                coarse_feat, coarse, cluster = stage.pool(feat, point)
                skips.append((feat, point, cluster))
                feat, point = coarse_feat, coarse
            feat = stage(feat, point)
        for s in reversed(range(len(self.dec))):
            skip_feat, point, cluster = skips[s]
            feat = self.dec[s].unpool(feat, skip_feat, cluster)
            feat = self.dec[s](feat, point)
        return self.head(feat)


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def _check(cfg: dict[str, Any]) -> None:
    enc_c, enc_d, dec_c, dec_d = (list(cfg[k]) for k in ("enc_channels", "enc_depths", "dec_channels", "dec_depths"))
    if not enc_c or len(enc_c) != len(enc_d):
        raise ValueError(f"model.enc_channels {enc_c} and model.enc_depths {enc_d} must be non-empty and of equal length")
    if len(dec_c) != len(enc_c) - 1 or len(dec_d) != len(dec_c):
        raise ValueError(f"model.dec_channels {dec_c} and model.dec_depths {dec_d} must have {len(enc_c) - 1} "
                         "entries (one per encoder stage but the first)")
    if any(int(c) < 1 for c in enc_c + dec_c) or any(int(d) < 0 for d in enc_d + dec_d):
        raise ValueError("model channels must be >= 1 and depths >= 0")
    orders = list(cfg["orders"])
    if not orders or any(o not in ORDERS for o in orders):
        raise ValueError(f"model.orders must be a non-empty list from {ORDERS}, got {orders}")
    if cfg["position"] not in POSITIONS:
        raise ValueError(f"model.position must be one of {POSITIONS}, got {cfg['position']!r}")
    if cfg["pool_reduce"] not in POOL_REDUCTIONS:
        raise ValueError(f"model.pool_reduce must be one of {POOL_REDUCTIONS}, got {cfg['pool_reduce']!r}")
    if not 0.0 <= cfg["drop_path"] < 1.0:
        raise ValueError(f"model.drop_path must be in [0, 1), got {cfg['drop_path']}")


def build_model(cfg: dict[str, Any] | None = None) -> PointMambaSeg:
    """The network from a config (full config with ``model``, or the model section; missing keys default)."""
    cfg = resolve_model_config(cfg)
    _check(cfg)
    model = PointMambaSeg(cfg)
    log.info("model: %s parameters (position=%s, enc %s x %s, dec %s x %s)", f"{count_parameters(model):,}",
             cfg["position"], cfg["enc_channels"], cfg["enc_depths"], cfg["dec_channels"], cfg["dec_depths"])
    return model
