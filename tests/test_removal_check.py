"""The tooth-removal check: removing a tooth by deletion or flattening, counting changed numbers, and the
tool's path on a real arch."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import load_scan
from pointmamba.evaluation.removal_check import check_scan, removal_summary, tooth_numbers, without_tooth

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


@pytest.fixture(scope="module")
def scan():
    return load_scan(SAMPLES / "MSN022" / "MSN022_upper.obj")


def test_delete_and_flatten(scan) -> None:
    cut = without_tooth(scan, 14, "delete")
    assert 14 not in cut.labels and cut.num_vertices == scan.num_vertices - int((scan.labels == 14).sum())
    assert cut.faces.max() < cut.num_vertices and len(cut.faces) < len(scan.faces)
    flat = without_tooth(scan, 14, "flatten")
    assert 14 not in flat.labels and flat.num_vertices == scan.num_vertices
    np.testing.assert_array_equal(flat.faces, scan.faces)
    moved = np.linalg.norm(flat.vertices - scan.vertices, axis=1) > 1e-9
    np.testing.assert_array_equal(moved, scan.labels == 14)  # only the removed tooth's vertices move
    with pytest.raises(ValueError, match="removal mode"):
        without_tooth(scan, 14, "melt")


def test_counts_teeth_that_change(scan) -> None:
    def counting(s):  # a "network" that numbers the teeth of the upper right by order from the midline
        out = s.labels.copy()
        right = sorted(t for t in np.unique(s.labels) if 11 <= t <= 18)
        for k, t in enumerate(right):
            out[s.labels == t] = 11 + k
        return out

    removals = check_scan(scan, counting)
    by_tooth = {r.tooth: r for r in removals}
    assert by_tooth[13].changed == [14, 15, 16, 17]  # every tooth behind the gap slides one number
    assert by_tooth[17].changed == [] and by_tooth[23].changed == []
    assert check_scan(scan, lambda s: s.labels.copy())[0].changed == []
    summary = removal_summary(removals)
    assert summary["removals"] == 14 and summary["teeth_checked"] == 14 * 13
    assert summary["teeth_changed"] == 6 + 5 + 4 + 3 + 2 + 1
    assert tooth_numbers(np.array([0, 11, 11, 12]), np.array([5, 21, 11, 21])) == {11: 11, 12: 21}
