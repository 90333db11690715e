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


def test_close_brings_the_teeth_behind_forward_rigidly(scan) -> None:
    from scipy.spatial import cKDTree

    def gap(s, a: int, b: int) -> float:
        return float(cKDTree(s.vertices[s.labels == a]).query(s.vertices[s.labels == b])[0].min())

    closed = without_tooth(scan, 14, "close")
    assert 14 not in closed.labels and closed.faces.max() < closed.num_vertices
    assert gap(scan, 13, 15) > 7.0 and gap(closed, 13, 15) < 2.5  # 15 now meets 13 (the space was 14's width)
    for t in np.unique(scan.labels[scan.labels > 0]):
        if t == 14:
            continue
        before, after = scan.vertices[scan.labels == t], closed.vertices[closed.labels == t]
        assert len(before) == len(after)  # the other teeth keep every vertex
        if t in (15, 16, 17):  # behind the gap: moved, as a rigid body
            assert np.linalg.norm(after - before, axis=1).min() > 3.0
            np.testing.assert_allclose(np.linalg.norm(after - after[0], axis=1),
                                       np.linalg.norm(before - before[0], axis=1), atol=1e-4)
        else:  # in front of it and the other side: untouched
            np.testing.assert_allclose(after, before, atol=1e-4)
    assert closed.num_vertices < scan.num_vertices - 50  # the gingiva of the closed space is gone too


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
