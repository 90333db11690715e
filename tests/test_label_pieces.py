"""A tooth number labelled on two separate teeth is found (pointmamba.data.label_pieces), on a real sample arch
relabelled as IOS002_upper's reference is (its central incisor typed "16"), and through pointmamba-check-data;
a crown cut by a hole and a speck of a neighbour's number are not reported."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pointmamba.data.label_pieces import scattered_label_findings, tooth_pieces
from pointmamba.data.mesh import mesh_edges

from support.real_arch import sample_arch, sample_with_labels
from support.tools import run_tool


def _pieces(faces: np.ndarray, labels: np.ndarray, fdi: int) -> int:
    """How many connected pieces of the mesh carry ``fdi``."""
    return sum(int(labels[p[0]] == fdi) for p in tooth_pieces(labels, mesh_edges(faces, len(labels))))


def test_a_number_typed_on_a_second_tooth_is_reported_with_its_two_pieces() -> None:
    scan, _, labels, _ = sample_arch("MSN022_upper")
    assert scattered_label_findings(scan.vertices, scan.faces, labels) == []  # the arch as labelled
    typo = labels.copy()
    typo[labels == 11] = 16
    (finding,) = scattered_label_findings(scan.vertices, scan.faces, typo)
    sizes = sorted(((labels == 16).sum(), (labels == 11).sum()), reverse=True)
    assert finding.startswith("tooth 16 is labelled in two places ")
    assert f"({sizes[0]} and {sizes[1]} vertices)" in finding
    assert float(re.search(r"places (\d+) mm apart", finding).group(1)) > 20  # incisor to first molar


def test_a_crown_cut_by_a_hole_and_a_speck_of_another_number_are_not_reported() -> None:
    scan, _, labels, _ = sample_arch("MSN022_upper")
    v = scan.vertices
    tooth = np.flatnonzero(labels == 16)
    centre = v[tooth].mean(0)
    axis = np.linalg.svd(v[tooth] - centre)[2][0]  # the crown's longest direction
    side = (v - centre) @ axis > 0
    crossing = side[scan.faces].any(1) & ~side[scan.faces].all(1) & (labels[scan.faces] == 16).any(1)
    holed = scan.faces[~crossing]  # the faces across the crown's middle gone: two halves of one crown
    assert _pieces(holed, labels, 16) >= 2
    assert scattered_label_findings(v, holed, labels) == []
    speck = labels.copy()  # a few of 21's vertices, the nearest to 26, typed 26
    near = np.flatnonzero(labels == 21)
    near = near[np.argsort(np.linalg.norm(v[near] - v[labels == 26].mean(0), axis=1))[:5]]
    speck[near] = 26
    assert _pieces(scan.faces, speck, 26) >= 2
    assert scattered_label_findings(v, scan.faces, speck) == []


def test_check_data_warns_about_such_a_file_and_names_the_number(tmp_path: Path) -> None:
    _, _, labels, _ = sample_arch("MSN022_upper")
    typo = labels.copy()
    typo[labels == 11] = 16
    code, out, _ = run_tool("check_data", sample_with_labels(tmp_path, "MSN022_upper", typo))
    assert code == 0 and "1 scans: 0 ok, 1 with warnings, 0 failed" in out
    assert "| warn | tooth 16 is labelled in two places" in out
