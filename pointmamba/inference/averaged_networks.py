"""Networks trained apart whose per-vertex class probabilities are averaged at inference (an ensemble).

Each network keeps its own input layout (one trained without the centred coordinates beside one trained
with them), so the average is of probabilities on the scan's vertices, after each network's own test-time
views, never of logits on one shared batch. A model file holds the first network as any checkpoint does
(``model``, ``config``, ``hooks``: what fine-tuning and older versions read) and the others under
``average_with``; ``infer.average_networks: false`` predicts with the first alone.
"""
from __future__ import annotations

from typing import Any, Sequence

from torch import nn


class AveragedNetworks(nn.Module):
    """The first network (built from the run's config) and the others (each with its own stored config)."""

    def __init__(self, first: nn.Module, first_config: dict[str, Any],
                 others: Sequence[tuple[nn.Module, dict[str, Any]]], path: str = "") -> None:
        super().__init__()
        if not others:
            raise ValueError(f"{path}: averaging needs at least one network beside the first")
        check_averageable(first_config, [cfg for _, cfg in others], path)
        self.first = first
        self.others = nn.ModuleList(m for m, _ in others)
        self.other_data = [dict(cfg["data"]) for _, cfg in others]

    def __len__(self) -> int:
        return 1 + len(self.others)

    def members(self, cfg: dict[str, Any]) -> list[tuple[nn.Module, dict[str, Any]]]:
        """(network, the config it predicts with): the first with ``cfg``; each other with ``cfg`` but its
        own ``data`` section (its input features and grid), which is a fact of its training."""
        return [(self.first, cfg)] + [(m, {**cfg, "data": d}) for m, d in zip(self.others, self.other_data)]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("AveragedNetworks has no single forward pass (its networks take different inputs): "
                        "predict with pointmamba.inference.pipeline.vertex_probabilities or segment_scan, "
                        "or call first_network(model)")


def check_averageable(first: dict[str, Any], others: Sequence[dict[str, Any]], path: str = "") -> None:
    """Raise ConfigError naming the key unless networks of these configs can be averaged: probabilities of
    other classes, or computed in another frame, do not add up."""
    from ..config import ConfigError

    d = first["data"]
    for k, cfg in enumerate(others, 2):
        for key in ("num_classes", "align"):
            if cfg["data"][key] != d[key]:
                raise ConfigError(f"{path}: network {k} of the average has data.{key}={cfg['data'][key]!r}, the "
                                 f"first {d[key]!r}: only networks with the same classes and pose alignment can "
                                 "be averaged")


def check_one_network(state: dict[str, Any], path: Any) -> None:
    """Raise CheckpointError if checkpoint ``state`` already holds averaged networks: an average is made of
    training checkpoints, each named once (a pair inside a pair would lose its second network)."""
    from ..checkpoints.checkpoint import CheckpointError

    if state.get("average_with"):
        raise CheckpointError(f"{path}: already holds {len(state['average_with']) + 1} averaged networks; "
                              "average training checkpoints, each named once")


def first_network(model: nn.Module) -> nn.Module:
    """The network a single forward pass runs: ``model`` itself, or the first of an average."""
    return model.first if isinstance(model, AveragedNetworks) else model


def inference_members(model: nn.Module, cfg: dict[str, Any]) -> list[tuple[nn.Module, dict[str, Any]]]:
    """The networks whose probabilities inference averages, each with its config: every network of an
    average while ``infer.average_networks`` is on (default), else ``model`` (or its first network) alone."""
    from .config import infer_options

    if isinstance(model, AveragedNetworks) and infer_options(cfg)["average_networks"]:
        return model.members(cfg)
    return [(first_network(model), cfg)]
