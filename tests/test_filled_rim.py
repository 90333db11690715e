"""A scan whose open rim was filled (a watertight export): the user's path segments it as the scan itself. The fill
closes the mesh, so the pose reads the crown side from the fill's flat side (docs/results/hole_fill); before, all
three samples came out upside down with no tooth found."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data.mesh import read_obj
from pointmamba.research.model_base_check import with_fan

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_scan_with_its_rim_filled_is_segmented_as_the_scan() -> None:
    from pointmamba import Segmenter

    v, f = read_obj(SAMPLES / "MSN021" / "MSN021_lower.obj")[:2]
    v = v.astype(np.float64)
    filled_v, filled_f = with_fan(v, f)  # the rim fanned to its centre
    segmenter = Segmenter()
    plain = segmenter((v, f), jaw="lower", name="MSN021_lower")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        filled = segmenter((filled_v, filled_f), jaw="lower", name="MSN021_lower")
    assert filled.teeth == plain.teeth and len(plain.teeth) >= 12
    assert (filled.labels[:len(v)] == plain.labels).mean() > 0.95
    assert filled.labels[len(v)] == 0  # the fill's centre, under the gum: gingiva
