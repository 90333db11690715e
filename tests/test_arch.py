"""The arch's one home (``pointmamba.data.arch``): the conversions between FDI numbers, arch indices and
positions agree with each other and with the class ids the network uses."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data.arch import (NUM_ARCH_INDICES, fdi_of_index, index_classes, index_of_fdi, per_index,
                                  position_of_index, side_position, skipped_between)
from pointmamba.data.fdi import LOWER_FDI, UPPER_FDI, class_to_fdi


@pytest.mark.parametrize("jaw, teeth", [("upper", UPPER_FDI), ("lower", LOWER_FDI)])
def test_fdi_and_arch_index_round_trip(jaw: str, teeth: tuple[int, ...]) -> None:
    indices = [index_of_fdi(t) for t in teeth]
    assert sorted(indices) == list(range(NUM_ARCH_INDICES))
    for t, a in zip(teeth, indices):
        assert fdi_of_index(a, jaw) == t and position_of_index(a) == t % 10
    # the class at each arch index is the class of the FDI number there (17 and 33 classes)
    for num_classes in (17, 33):
        classes = index_classes(num_classes, jaw)
        assert [int(class_to_fdi([c], jaw, num_classes)[0]) for c in classes] == \
            [fdi_of_index(a, jaw) for a in range(NUM_ARCH_INDICES)]


def test_arch_runs_from_one_third_molar_to_the_other() -> None:
    # canonical frame: quadrants 1 and 3 on -x (indices 0..7, distal first), 2 and 4 on +x
    assert [fdi_of_index(a, "upper") for a in (0, 7, 8, 15)] == [18, 11, 21, 28]
    assert [fdi_of_index(a, "lower") for a in (0, 7, 8, 15)] == [38, 31, 41, 48]
    assert position_of_index(np.arange(16)).tolist() == [8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8]
    assert per_index(range(1, 9)).tolist() == position_of_index(np.arange(16)).tolist()


def test_side_positions_and_skipped_numbers() -> None:
    assert [side_position(t) for t in (18, 11, 21, 28, 48, 41, 31, 38)] == [-8, -1, 1, 8, -8, -1, 1, 8]
    assert skipped_between(13, 11) == [12]
    assert skipped_between(11, 22) == [21]
    assert skipped_between(12, 23) == [11, 21, 22]
    assert skipped_between(42, 33) == [41, 31, 32]
    assert skipped_between(36, 37) == [] and skipped_between(11, 21) == []
