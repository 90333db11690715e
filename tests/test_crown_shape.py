"""An upper canine numbered as a first premolar, or the reverse, is told by its crown's bucco-lingual width
(pointmamba.data.crown_shape), on a real sample arch relabelled as such label files are, and through
pointmamba-check-data."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pointmamba.data.crown_shape import crown_extents, number_shape_findings

from support.real_arch import sample_arch, sample_with_labels
from support.tools import run_tool


def _box(centre: tuple[float, float], along: float, across: float, rng: np.random.Generator) -> np.ndarray:
    return np.column_stack([rng.uniform(-along / 2, along / 2, 20000) + centre[0],
                            rng.uniform(-across / 2, across / 2, 20000) + centre[1], rng.uniform(0, 8, 20000)])


def test_widths_are_measured_along_and_across_the_arch_wherever_it_runs() -> None:
    rng = np.random.default_rng(0)
    for angle in (0.0, 0.7, 2.0):  # a straight run of three crowns, turned in the occlusal plane
        boxes = [_box((8.0 * k, 0.0), 7.0, 9.0 if k == 1 else 6.0, rng) for k in range(3)]
        points = np.concatenate(boxes)
        c, s = np.cos(angle), np.sin(angle)
        points[:, :2] = points[:, :2] @ np.array([[c, s], [-s, c]])
        labels = np.repeat([23, 24, 25], 20000)
        width = crown_extents(points, labels)[24]
        # the 3rd to 97th percentile of a uniform extent is 0.94 of it
        assert abs(width.mesio_distal - 0.94 * 7.0) < 0.1 and abs(width.bucco_lingual - 0.94 * 9.0) < 0.1


def _mm(finding: str) -> float:
    return float(re.search(r": ([0-9.]+) mm bucco-lingually", finding).group(1))


def _relabelled(labels: np.ndarray, gone: int, renumbered: int, to: int) -> np.ndarray:
    out = labels.copy()
    out[labels == gone] = 0  # its crown flattened to gingiva: the tooth no longer numbered
    out[labels == renumbered] = to
    return out


def test_a_canine_numbered_as_the_extracted_premolar_is_flagged_on_a_real_arch() -> None:
    scan, aligned, labels, _ = sample_arch("MSN022_upper")
    assert number_shape_findings(aligned, labels, "upper") == []  # the arch as labelled: nothing
    # 24 extracted and its space closed; the label file counts back from the molars and numbers the canine 24
    shifted = _relabelled(labels, gone=24, renumbered=23, to=24)
    (finding,) = number_shape_findings(aligned, shifted, "upper")
    assert finding.startswith("tooth 24 is shaped as a canine, not a first premolar:")
    assert abs(_mm(finding) - 7.5) < 0.2
    # the canine missing and the first premolar numbered 23
    (finding,) = number_shape_findings(aligned, _relabelled(labels, gone=23, renumbered=24, to=23), "upper")
    assert finding.startswith("tooth 23 is shaped as a first premolar, not a canine:")
    assert abs(_mm(finding) - 10.1) < 0.2
    # lower canines and first premolars overlap in width: a lower jaw is not checked
    assert number_shape_findings(aligned, shifted, "lower") == []


def test_check_data_warns_about_such_a_file_and_names_the_tooth(tmp_path: Path) -> None:
    _, _, labels, _ = sample_arch("MSN022_upper")
    code, out, _ = run_tool("check_data", sample_with_labels(tmp_path, "MSN022_upper",
                                                             _relabelled(labels, gone=24, renumbered=23, to=24)))
    assert code == 0 and "1 scans: 0 ok, 1 with warnings, 0 failed" in out
    assert "| warn | tooth 24 is shaped as a canine, not a first premolar" in out
