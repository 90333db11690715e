"""Arch tables shared by the numbering and the review checks: typical tooth widths along the arch and the
class ids of each side's eight positions."""
from __future__ import annotations

import numpy as np

# Typical mesiodistal crown widths in mm, positions 1..8 (central incisor .. third molar); textbook means
# (e.g. Wheeler's dental anatomy). Lower incisors are much narrower than upper ones.
TOOTH_WIDTH_MM = {
    "upper": np.array([8.5, 6.5, 7.5, 7.0, 6.5, 10.0, 9.0, 8.5]),
    "lower": np.array([5.0, 5.5, 7.0, 7.0, 7.0, 11.0, 10.5, 10.0]),
}


def side_blocks(num_classes: int, jaw: str | None) -> list[np.ndarray]:
    """Class ids of positions 1..8 for the two sides: [-x side, +x side] in the canonical frame."""
    if num_classes == 17:
        return [np.arange(1, 9), np.arange(9, 17)]
    if jaw == "lower":
        return [np.arange(17, 25), np.arange(25, 33)]
    return [np.arange(1, 9), np.arange(9, 17)]
