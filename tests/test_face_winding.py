"""A mesh wound inside out (``infer.orient_faces``, ``pointmamba/data/face_winding.py``): its signed bend says so
in any pose, scale and density, the scan as it is never reads so, and the user's path segments the reversed mesh
exactly as the scan, says so, and writes the file's own faces back."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data.face_winding import inside_out, signed_bend
from pointmamba.data.mesh import read_obj, subdivide

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
pytestmark = pytest.mark.usefixtures("one_thread")


def _sample(stem: str) -> tuple[np.ndarray, np.ndarray]:
    v, f = read_obj(SAMPLES / stem.split("_")[0] / f"{stem}.obj")[:2]
    return v.astype(np.float64), f


@pytest.mark.parametrize("stem", ["MSN021_lower", "MSN022_upper", "MSN023_lower"])
def test_the_winding_reads_from_the_bend_in_any_pose_scale_and_density(stem: str) -> None:
    from scipy.spatial.transform import Rotation

    v, f = _sample(stem)
    bend = signed_bend(v, f)
    assert bend > 0.1 and not inside_out(v, f)
    assert signed_bend(v, f[:, ::-1]) == pytest.approx(-bend, abs=1e-12) and inside_out(v, f[:, ::-1])
    rotation = Rotation.from_euler("xyz", [-60, 15, 170], degrees=True).as_matrix()
    moved = (v @ rotation.T) * 10.0 + [5.0, -400.0, 2.0]  # cm as mm, far from the origin: the same sign
    assert signed_bend(moved, f) == pytest.approx(bend, rel=1e-9)
    fine_v, fine_f, _ = subdivide(v, f)
    assert signed_bend(fine_v, fine_f) > 0 > signed_bend(fine_v, fine_f[:, ::-1])


@pytest.fixture(scope="module")
def segmenters():
    from pointmamba import Segmenter

    return {on: Segmenter(infer={"orient_faces": on}) for on in (False, True)}


def test_a_mesh_wound_inside_out_is_segmented_as_the_scan_and_says_so(segmenters, tmp_path: Path) -> None:
    v, f = _sample("MSN022_upper")
    plain = segmenters[True]((v, f), jaw="upper", name="MSN022_upper")
    assert "faces_reversed" not in plain.meta
    reversed_faces = np.ascontiguousarray(f[:, ::-1])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = segmenters[True]((v, reversed_faces), jaw="upper", name="inside_out")
    assert any("wound inside out" in str(w.message) and "inside_out" in str(w.message) for w in seen)
    np.testing.assert_array_equal(result.labels, plain.labels)  # the same faces inside, the same arithmetic
    np.testing.assert_array_equal(result.probabilities, plain.probabilities)
    np.testing.assert_array_equal(result.faces, reversed_faces)  # the outputs keep the file's own faces
    doc = json.loads(result.save_json(tmp_path / "inside_out.json").read_text())
    assert doc["faces_reversed"] is True and "faces_reversed" not in json.loads(plain.save_json(tmp_path / "p.json").read_text())
    off = segmenters[False]((v, reversed_faces), jaw="upper", name="inside_out")
    assert "faces_reversed" not in off.meta and (off.labels != plain.labels).mean() > 0.1  # as it was: wrong
