"""Units from the scan's size (mm, cm, m, x10), and float64 centring far from the origin."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import load_scan
from pointmamba.data.dataset import make_item, preprocess_scan
from pointmamba.data.units import UnitsError, check_millimetres, extent, infer_units


@pytest.fixture(scope="module")
def scan(scans_dir: Path):
    return load_scan(scans_dir / "MSN001" / "MSN001_lower.obj")


@pytest.mark.parametrize("scale, units, factor", [(1.0, "mm", 1.0), (0.1, "cm", 10.0), (0.001, "m", 1000.0),
                                                  (10.0, "0.1 mm", 0.1), (1000.0, "um", 0.001)])
def test_auto_units_from_the_extent(scan, scale: float, units: str, factor: float) -> None:
    rotated = scan.vertices[:, [2, 0, 1]] * scale  # the extent does not depend on the pose
    decision = infer_units(rotated, "auto", "x.obj")
    assert decision.units == units and decision.factor == pytest.approx(factor)
    assert decision.extent_mm == pytest.approx(extent(scan.vertices))
    assert (decision.warning is None) == (scale == 1.0)
    if decision.warning:
        assert decision.warning.startswith("x.obj: ") and f"scaled by {factor:g}" in decision.warning


def test_inches_are_said_not_guessed(scan) -> None:
    """A jaw in inches reads as a small one in cm: auto keeps cm but its warning names inches."""
    inches = scan.vertices / 25.4
    guessed = infer_units(inches, "auto", "x.stl")
    assert guessed.units == "cm" and "--units in" in guessed.warning
    assert f"in inches it would be {extent(scan.vertices):.0f} mm" in guessed.warning
    said = infer_units(inches, "in", "x.stl")
    assert said.factor == 25.4 and said.warning is None
    assert said.extent_mm == pytest.approx(extent(scan.vertices))
    assert "--units in" not in infer_units(scan.vertices / 10.0, "auto").warning  # 6.9 in would be 176 mm


def test_explicit_units_and_sizes_no_unit_fits(scan) -> None:
    assert infer_units(scan.vertices * 0.1, "cm").factor == 10.0
    assert infer_units(scan.vertices * 0.1, "cm").warning is None
    assert "check the units" in infer_units(scan.vertices, "m", "x.obj").warning  # 69 m: said, not refused
    with pytest.raises(UnitsError, match=r"x.obj: .* fits no unit"):
        infer_units(scan.vertices * 0.25, "auto", "x.obj")  # 17: too big for cm, too small for mm
    far = np.vstack([scan.vertices, [[1e30, 0, 0]]])  # one stray vertex
    with pytest.raises(UnitsError, match="stray vertex"):
        infer_units(far, "auto", "x.obj")
    check_millimetres(scan.vertices, "x.obj")
    with pytest.raises(UnitsError, match=r"x.obj: .*looks like m, not mm"):
        check_millimetres(scan.vertices / 1000, "x.obj")


def test_a_scan_far_from_the_origin_is_prepared_like_the_original(scan) -> None:
    """Centred in float64 before the float32 cast: at 1 km float32 steps are 0.06 mm."""
    a = make_item(preprocess_scan(scan), "a", 17, 0.2, True, "test")
    far = replace(scan, vertices=scan.vertices + np.array([1e6, -2e6, 5e5]))
    b = make_item(preprocess_scan(far), "b", 17, 0.2, True, "test")
    assert np.array_equal(a["index"], b["index"]) and np.array_equal(a["vertex_row"], b["vertex_row"])
    assert np.abs(a["coord"] - b["coord"]).max() < 1e-4
