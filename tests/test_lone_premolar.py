"""The lone-premolar sides (a canine, one premolar-sized tooth, then molars) that the dentition reading and
the per-group summary use, on procedural jaws whose true numbers are known."""
from __future__ import annotations

import numpy as np

from pointmamba.data.lone_premolar import lone_premolar_sides
from pointmamba.data.synthetic import synthetic_jaw


def counted(labels: np.ndarray) -> np.ndarray:
    """Labels by position along the arch: each side's teeth numbered 1, 2, ... from the midline."""
    out = np.zeros_like(labels)
    for q in {int(t) // 10 for t in np.unique(labels) if t > 0}:
        present = sorted(int(t) for t in np.unique(labels) if t // 10 == q)
        for k, t in enumerate(present, start=1):
            out[labels == t] = 10 * q + k
    return out


def test_lone_premolar_sides_and_the_test_tools_groups() -> None:
    from pointmamba.evaluation.scan_summary import group_rows, reference_groups

    jaw = synthetic_jaw(0, "lower", 20000, missing=[34], pose="canonical")
    assert lone_premolar_sides(jaw.vertices, jaw.labels, "lower") == {3: 6}  # by identity
    assert lone_premolar_sides(jaw.vertices, counted(jaw.labels), "lower") == {3: 5}  # counted
    full = synthetic_jaw(0, "lower", 20000, pose="canonical")
    assert lone_premolar_sides(full.vertices, full.labels, "lower") == {}
    both = synthetic_jaw(0, "lower", 20000, missing=[34, 45], pose="canonical")  # two gaps, one premolar each
    assert lone_premolar_sides(both.vertices, both.labels, "lower") == {3: 6, 4: 6}

    rows = [{"name": n, "source": "s", "jaw": "lower", **reference_groups(j.labels, j.vertices, "lower")}
            for n, j in (("pattern", jaw), ("full", full))]
    assert [r["lone_premolar"] for r in rows] == [True, False]
    groups = group_rows(rows)
    assert [r["name"] for r in groups["lone premolar side"]] == ["pattern"]
    assert [r["name"] for r in groups["no lone premolar side"]] == ["full"]
    # without the vertices the flag is not computed, and no arch of the pattern: no such groups
    assert "lone_premolar" not in reference_groups(jaw.labels)
    assert "lone premolar side" not in group_rows(rows[1:])
