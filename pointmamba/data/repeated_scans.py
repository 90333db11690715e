"""A training set in which chosen scans are drawn more than once per epoch (``data.scan_repeats``).

Rare kinds of arch (a child's mixed dentition: 10 of 187 shared scans) are drowned by the common ones;
drawing them k times an epoch shows the network their labelling k times as often. Each extra draw gets its
own randomness (augmentation, sampling, missing teeth), so the copies are not the same sample seen twice;
the first draw of every scan uses the generator it would use without repeats, so ``{}`` (or every count
1) gives the plain training set bit for bit. Measured once: the mixed dentitions drawn 4 times did not
learn their labelling (docs/results/numbering/README.md), so no recipe uses it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["RepeatedScans", "check_scan_repeats", "repeat_counts"]


def check_scan_repeats(value: Any, key: str = "data.scan_repeats") -> dict[str, int]:
    """``{name: times}`` (name ``<ID>_<jaw>`` or ``<ID>``, times an integer >= 1), or ValueError."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a mapping {{<ID>_<jaw> or <ID>: times}}, got {type(value).__name__} {value!r}")
    out = {}
    for name, times in value.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{key}: scan names must be strings, got {name!r}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"{key}.{name} must be an integer >= 1 (draws per epoch), got {times!r}")
        out[name] = times
    return out


def repeat_counts(names: list[str], repeats: Mapping[str, int]) -> list[int]:
    """Draws per epoch of each scan in ``names``; a key names one scan (``<ID>_<jaw>``) or a patient
    (``<ID>``: both jaws). A key that matches no scan is an error (a misspelt name would do nothing)."""
    repeats = check_scan_repeats(repeats)
    counts = [1] * len(names)
    for key, times in repeats.items():
        hits = [i for i, n in enumerate(names) if n == key or n.rsplit("_", 1)[0] == key]
        if not hits:
            raise ValueError(f"data.scan_repeats: {key!r} is not a training scan (<ID>_<jaw>) or patient (<ID>)")
        for i in hits:
            counts[i] = times
    return counts


class RepeatedScans:
    """``dataset`` (a :class:`~pointmamba.data.dataset.Teeth3DSDataset`) with scan i listed
    ``counts[i]`` times; draw c > 0 of scan i takes the generator ``[seed, epoch, i, c]``."""

    def __init__(self, dataset: Any, repeats: Mapping[str, int]):
        self.dataset = dataset
        self.counts = repeat_counts(list(dataset.names), repeats)
        self.order = [(i, c) for i, k in enumerate(self.counts) for c in range(k)]

    def __len__(self) -> int:
        return len(self.order)

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def __getitem__(self, index: int) -> dict[str, Any]:
        i, c = self.order[index]
        d = self.dataset
        return d.item(i, d.rng(i) if c == 0 else np.random.default_rng([d.seed, d.epoch, i, c]))
