"""FDI <-> class maps, names, colours and the left/right mirror."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import (CLASS_NAMES, IGNORE_INDEX, LOWER_FDI, UPPER_FDI, class_colors, class_to_fdi,
                             fdi_to_class, mirror_class, mirror_fdi)


def test_17_class_map_is_the_toothgroupnetwork_scheme() -> None:
    upper = fdi_to_class([0, 11, 12, 18, 21, 22, 28], "upper")
    lower = fdi_to_class([0, 31, 32, 38, 41, 42, 48], "lower")
    assert upper.tolist() == [0, 1, 2, 8, 9, 10, 16]
    assert lower.tolist() == upper.tolist()  # the lower jaw is the upper one shifted by -20
    assert fdi_to_class(UPPER_FDI, "upper").tolist() == list(range(1, 17))
    assert fdi_to_class(LOWER_FDI, "lower").tolist() == list(range(1, 17))


def test_33_class_map() -> None:
    got = fdi_to_class([0, 11, 18, 21, 28, 31, 38, 41, 48], None, 33)
    assert got.tolist() == [0, 1, 8, 9, 16, 17, 24, 25, 32]
    assert fdi_to_class(UPPER_FDI + LOWER_FDI, None, 33).tolist() == list(range(1, 33))


@pytest.mark.parametrize("num_classes", [17, 33])
@pytest.mark.parametrize("jaw", ["upper", "lower"])
def test_round_trip_every_class(jaw: str, num_classes: int) -> None:
    fdis = np.array((0,) + (UPPER_FDI if jaw == "upper" else LOWER_FDI))
    classes = fdi_to_class(fdis, jaw, num_classes)
    assert len(set(classes.tolist())) == 17
    assert np.array_equal(class_to_fdi(classes, jaw, num_classes), fdis)
    assert classes.dtype == np.int64


def test_invalid_numbers_are_errors() -> None:
    for bad, jaw in ((31, "upper"), (11, "lower"), (19, "upper"), (10, "upper"), (50, "lower"), (-1, "upper")):
        with pytest.raises(ValueError, match=str(bad)):
            fdi_to_class([0, bad], jaw)
    with pytest.raises(ValueError, match="lower jaw"):
        fdi_to_class([11, 31], "lower", 33)  # with a jaw, the 33-class map checks it too
    with pytest.raises(ValueError, match="jaw"):
        fdi_to_class([11], None, 17)  # the 17-class scheme needs the jaw
    with pytest.raises(ValueError, match="jaw"):
        class_to_fdi([1], None, 17)
    with pytest.raises(ValueError, match="outside"):
        class_to_fdi([17], "upper", 17)
    with pytest.raises(ValueError, match="other jaw"):
        class_to_fdi([17], "upper", 33)  # class 17 is tooth 31
    with pytest.raises(ValueError, match="num_classes"):
        fdi_to_class([11], "upper", 16)
    with pytest.raises(ValueError, match="integers"):
        fdi_to_class(np.array([11.0]), "upper")


def test_ignore_index_passes_through() -> None:
    assert fdi_to_class([IGNORE_INDEX, 11], "upper").tolist() == [IGNORE_INDEX, 1]
    assert class_to_fdi([IGNORE_INDEX, 9], "lower").tolist() == [IGNORE_INDEX, 41]
    assert mirror_fdi([IGNORE_INDEX, 0]).tolist() == [IGNORE_INDEX, 0]


def test_mirror_swaps_every_tooth_and_is_an_involution() -> None:
    for fdi in UPPER_FDI + LOWER_FDI:
        q, p = divmod(fdi, 10)
        expected = {1: 2, 2: 1, 3: 4, 4: 3}[q] * 10 + p
        assert mirror_fdi([fdi]).tolist() == [expected], fdi
    allf = np.array((0,) + UPPER_FDI + LOWER_FDI)
    assert np.array_equal(mirror_fdi(mirror_fdi(allf)), allf)
    assert mirror_fdi([0]).tolist() == [0]
    with pytest.raises(ValueError):
        mirror_fdi([19])


@pytest.mark.parametrize("num_classes", [17, 33])
def test_mirror_class_agrees_with_mirror_fdi(num_classes: int) -> None:
    for jaw, fdis in (("upper", UPPER_FDI), ("lower", LOWER_FDI)):
        f = np.array((0,) + fdis)
        via_fdi = fdi_to_class(mirror_fdi(f), jaw, num_classes)
        assert np.array_equal(mirror_class(fdi_to_class(f, jaw, num_classes), num_classes), via_fdi)
    c = np.arange(num_classes)
    assert np.array_equal(mirror_class(mirror_class(c, num_classes), num_classes), c)


def test_names_and_colours() -> None:
    for nc in (17, 33):
        names = CLASS_NAMES[nc]
        assert len(names) == nc and len(set(names)) == nc and names[0] == "gingiva"
        colors = class_colors(nc)
        assert colors.shape == (nc, 3) and colors.dtype == np.uint8
        assert len(np.unique(colors, axis=0)) == nc  # no two classes share a colour
        d = np.abs(colors[:, None].astype(int) - colors[None].astype(int)).sum(-1) + np.eye(nc, dtype=int) * 999
        assert d.min() >= 60  # clearly distinct, not just different
    assert CLASS_NAMES[17][1] == "11/31 central incisor" and CLASS_NAMES[17][16] == "28/48 third molar"
    assert CLASS_NAMES[33][17] == "31 lower left central incisor"
    assert np.array_equal(class_colors(17), class_colors(33)[:17])
    with pytest.raises(ValueError):
        class_colors(20)
