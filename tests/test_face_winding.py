"""A mesh wound inside out (``infer.orient_faces``, ``pointmamba/data/face_winding.py``): the volume it encloses says
so in any pose, scale and density, for an open scan, a model on its base and a synthetic jaw; the scan as it is
never reads so; and the user's path segments the reversed mesh exactly as the scan, says so, and writes the file's
own faces back."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data.face_winding import NO_EVIDENCE, enclosed, inside_out
from pointmamba.data.mesh import read_obj, subdivide

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
pytestmark = pytest.mark.usefixtures("one_thread")


def _sample(stem: str) -> tuple[np.ndarray, np.ndarray]:
    v, f = read_obj(SAMPLES / stem.split("_")[0] / f"{stem}.obj")[:2]
    return v.astype(np.float64), f


@pytest.mark.parametrize("stem", ["MSN021_lower", "MSN022_upper", "MSN023_lower"])
def test_the_winding_reads_from_the_enclosed_volume_in_any_pose_scale_and_density(stem: str) -> None:
    from scipy.spatial.transform import Rotation

    v, f = _sample(stem)
    cue = enclosed(v, f)
    assert cue > 0.1 and not inside_out(v, f)
    assert enclosed(v, f[:, ::-1]) == pytest.approx(-cue, rel=0.01) and inside_out(v, f[:, ::-1])
    rotation = Rotation.from_euler("xyz", [-60, 15, 170], degrees=True).as_matrix()
    moved = (v @ rotation.T) * 10.0 + [5.0, -400.0, 2.0]  # cm as mm, far from the origin: the same cue
    assert enclosed(moved, f) == pytest.approx(cue, rel=1e-6)
    dense_v, dense_f = subdivide(*subdivide(v, f)[:2])[:2]  # 16x the vertices, the same triangles
    assert enclosed(dense_v, dense_f) == pytest.approx(cue, abs=0.01)


def test_the_enclosed_volume_of_closed_flat_and_synthetic_meshes() -> None:
    from scipy.spatial import ConvexHull

    from pointmamba.data.synthetic import synthetic_jaw

    rng = np.random.default_rng(0)
    points = rng.normal(size=(2000, 3))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    hull = ConvexHull(points)  # a closed sphere, faces wound outward (as the hull's outward normals say)
    faces = np.array([tri if np.dot(np.cross(points[tri[1]] - points[tri[0]], points[tri[2]] - points[tri[0]]),
                                    eq[:3]) > 0 else tri[::-1] for tri, eq in zip(hull.simplices, hull.equations)])
    assert enclosed(points * 3 + 7, faces) == pytest.approx(1.0, abs=0.01)  # 3 V / (area r) of a sphere
    assert enclosed(points, faces[:, ::-1]) == pytest.approx(-1.0, abs=0.01)
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2)
    flat = np.c_[grid, np.zeros(len(grid))]
    quads = np.array([[i * 5 + j, i * 5 + j + 1, i * 5 + j + 5] for i in range(4) for j in range(4)])
    assert abs(enclosed(flat, quads)) < NO_EVIDENCE and not inside_out(flat, quads[:, ::-1])  # no evidence: left alone
    for seed in range(6):  # wound outward; the signed bend, the first cue, read some of these inside out
        jaw = synthetic_jaw(seed, "upper" if seed % 2 else "lower", 6000)
        assert enclosed(jaw.vertices, jaw.faces) > 0.1 and inside_out(jaw.vertices, jaw.faces[:, ::-1])


def test_a_model_on_its_base_with_small_holes_reads_as_the_scan() -> None:
    from pointmamba.research.model_base_check import with_model_base

    v, f = _sample("MSN022_upper")
    rng = np.random.default_rng(1)
    holed = np.delete(f, rng.choice(len(f), 5, replace=False), axis=0)  # five small holes the base leaves open
    labels = np.zeros(len(v), dtype=np.int64)  # the base only needs the scan's pose
    based_v, based_f, _ = with_model_base(v, holed, labels)
    assert enclosed(based_v, based_f) > 0.1 and not inside_out(based_v, based_f)
    assert inside_out(based_v, based_f[:, ::-1])


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
    # flagged: a mirror image is wound inside out too, and reversed it reads as the other side's teeth
    kinds = [kind for kind, _ in result.confidence.findings]
    assert "reversed" in kinds and "reversed" not in [kind for kind, _ in plain.confidence.findings]
    assert result.review and "mirror image" in result.review_line()
    off = segmenters[False]((v, reversed_faces), jaw="upper", name="inside_out")
    assert "faces_reversed" not in off.meta and (off.labels != plain.labels).mean() > 0.1  # as it was: wrong


def _reversed(faces: np.ndarray, which: np.ndarray) -> np.ndarray:
    out = faces.copy()
    out[which] = out[which][:, ::-1]
    return out


def _face_parts(faces: np.ndarray, n: int) -> np.ndarray:
    """Each face's part: faces joined through edges two faces share (a part touching another at a vertex only
    is its own)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from pointmamba.data.face_winding import _shared_edges

    fi, fj, _ = _shared_edges(faces, n)
    return connected_components(coo_matrix((np.ones(len(fi)), (fi, fj)), shape=(len(faces),) * 2), directed=False)[1]


@pytest.mark.parametrize("stem", ["MSN021_lower", "MSN022_upper"])
def test_a_mesh_wound_part_one_way_is_wound_back_as_its_larger_area(stem: str) -> None:
    """Half of the arch, a ball of faces, or every face at random reversed: the faces reversed back are exactly
    those (on each part of the mesh, whichever way has the larger area), and afterwards no edge disagrees."""
    from pointmamba.data.face_winding import _disagreeing_edges, inconsistent_faces

    v, f = _sample(stem)
    assert _disagreeing_edges(f, len(v)) == 0 and not inconsistent_faces(v, f).any()  # the scan as it is
    rng = np.random.default_rng(3)
    centre = v[f].mean(1)
    axis = np.linalg.eigh(np.cov((v - v.mean(0)).T))[1][:, 2]
    distance = ((centre - v[rng.integers(len(v))]) ** 2).sum(1)
    part = _face_parts(f, len(v))
    for which in ((centre - v.mean(0)) @ axis > 0, distance <= np.quantile(distance, 0.15), rng.random(len(f)) < 0.5):
        # each part's minority by area is what comes back: on the scan's main part, the faces reversed
        mixed = _reversed(f, which)
        back = inconsistent_faces(v, mixed)
        mended = _reversed(mixed, back)
        assert _disagreeing_edges(mended, len(v)) == 0
        main = part == np.bincount(part).argmax()
        same_way = (mended[main] == f[main]).all(1)
        assert same_way.all() or not same_way.any()  # the main part wound one way, the original's or its reverse
        area = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
        assert same_way.all() == (area[which & main].sum() < area[~which & main].sum())  # the larger area kept


def test_odd_meshes_are_wound_without_error() -> None:
    """Degenerate faces, an edge of three faces (a fin) and a Moebius strip: no error, fewer disagreeing edges."""
    from pointmamba.data.face_winding import _disagreeing_edges, inconsistent_faces

    square = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0.5, 1.0]], dtype=float)
    fin = np.array([[0, 1, 2], [0, 2, 3], [2, 0, 4], [1, 1, 3]])  # 0-2 carries three faces; the last is degenerate
    assert inconsistent_faces(square, fin).shape == (4,)
    twice_degenerate = np.array([[0, 1, 2], [1, 1, 3], [1, 1, 3]])  # a collapsed edge run twice is no disagreement
    assert _disagreeing_edges(twice_degenerate, len(square)) == 0
    assert not inconsistent_faces(square, np.zeros((0, 3), dtype=np.int64)).any()
    n = 12  # a Moebius strip: two rows of vertices, the ends joined with a half twist
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    ring = [np.c_[(2 + s * np.cos(t / 2)) * np.cos(t), (2 + s * np.cos(t / 2)) * np.sin(t), s * np.sin(t / 2)]
            for s in (-0.5, 0.5)]
    v = np.r_[ring[0], ring[1]]
    faces = []
    for i in range(n):
        j = (i + 1) % n
        a, b, c, d = i, j, n + i, n + j
        if j == 0:  # the half twist swaps the rows
            b, d = n + j, j
        faces += [[a, b, d], [a, d, c]]
    faces = np.array(faces)
    mixed = _reversed(faces, np.arange(len(faces)) % 3 == 0)
    back = inconsistent_faces(v, mixed)
    assert _disagreeing_edges(_reversed(mixed, back), len(v)) <= 1 < _disagreeing_edges(mixed, len(v))


def test_a_mesh_wound_part_one_way_is_segmented_as_the_scan_and_says_so(tmp_path: Path) -> None:
    """The user's path: half of the arch reversed, segmented as the scan with ``infer.consistent_winding``, a
    warning and ``faces_rewound`` in the JSON, the file's own faces kept; without it, as it was: wrong."""
    from pointmamba import Segmenter

    v, f = _sample("MSN022_upper")
    on = Segmenter(infer={"consistent_winding": True})
    plain = on((v, f), jaw="upper", name="MSN022_upper")
    assert "faces_rewound" not in plain.meta
    centre = v[f].mean(1) - v.mean(0)
    half = centre @ np.linalg.eigh(np.cov((v - v.mean(0)).T))[1][:, 2] > 0
    area = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    smaller = half if area[half].sum() < area[~half].sum() else ~half
    mixed = _reversed(f, smaller)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = on((v, mixed), jaw="upper", name="half_reversed")
    assert any(f"{int(smaller.sum())} of the mesh's {len(f)} faces were wound against the rest;" in str(w.message)
               for w in seen)
    np.testing.assert_array_equal(result.labels, plain.labels)  # the faces wound back are the scan's own
    assert "reversed" not in [kind for kind, _ in result.confidence.findings]
    np.testing.assert_array_equal(result.faces, mixed)  # the outputs keep the file's own faces
    doc = json.loads(result.save_json(tmp_path / "half.json").read_text())
    assert doc["faces_rewound"] == int(smaller.sum())
    off = Segmenter(infer={"consistent_winding": False})((v, mixed), jaw="upper", name="half_reversed")
    assert "faces_rewound" not in off.meta and (off.labels != plain.labels).mean() > 0.05
    # the larger half reversed instead: the mesh as a whole was inside out, the same faces counted, and a mix is
    # no evidence of a mirror image (no `reversed` finding), while a mirror image with a patch the other way is
    larger = _reversed(f, ~smaller)
    flipped = on((v, larger), jaw="upper", name="larger_reversed")
    assert flipped.meta["faces_reversed"] and flipped.meta["faces_rewound"] == int(smaller.sum())
    np.testing.assert_array_equal(flipped.labels, plain.labels)
    assert "reversed" not in [kind for kind, _ in flipped.confidence.findings]
    patch = np.zeros(len(f), dtype=bool)
    patch[np.argsort(((centre - centre[0]) ** 2).sum(1))[:200]] = True  # 200 faces about face 0
    mirrored = on((v, _reversed(f, ~patch)), jaw="upper", name="inside_out_patch")
    assert mirrored.meta["faces_reversed"] and mirrored.meta["faces_rewound"] == 200
    assert "reversed" in [kind for kind, _ in mirrored.confidence.findings]
