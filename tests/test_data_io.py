"""Scan and label I/O: real files load, round trips are exact, and every bad input names file and field."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import (ScanFormatError, class_to_fdi, fdi_to_class, instances_from_labels, load_scan,
                             read_labels, read_obj, save_labels, save_scan, synthetic_jaw, write_obj, write_ply,
                             write_stl)


# ------------------------------------------------------------------------------------ real data
def test_every_shared_scan_loads(scans_dir: Path) -> None:
    objs = sorted(scans_dir.glob("*/*.obj"))
    assert len(objs) == 49
    for obj in objs:
        scan = load_scan(obj)
        v_lines = sum(1 for line in obj.read_bytes().splitlines() if line.startswith(b"v "))
        assert scan.num_vertices == v_lines, obj
        assert scan.jaw in ("upper", "lower") and obj.stem.endswith(scan.jaw)
        assert scan.id_patient == obj.parent.name
        assert scan.labels is not None and scan.labels.shape == (v_lines,)
        fdi_to_class(scan.labels, scan.jaw, 17)  # raises on any number not valid for the jaw
        assert (scan.labels > 0).any() and (scan.labels == 0).any()
        assert np.array_equal(scan.instances == 0, scan.labels == 0)
        assert scan.faces.min() == 0 and scan.faces.max() < v_lines


def test_teeth3ds_label_files_map_to_classes_and_back(teeth3ds_labels_dir: Path) -> None:
    files = sorted(f for f in teeth3ds_labels_dir.glob("*.json") if "__" not in f.name)
    assert len(files) == 3
    for f in files:
        lab = read_labels(f)
        assert lab.jaw in ("upper", "lower") and len(lab.labels) > 100_000
        assert np.array_equal(instances_from_labels(lab.labels) > 0, lab.instances > 0)
        for nc in (17, 33):
            cls = fdi_to_class(lab.labels, lab.jaw, nc)
            assert cls.min() == 0 and cls.max() < nc
            assert np.array_equal(class_to_fdi(cls, lab.jaw, nc), lab.labels), (f, nc)
        assert np.array_equal(class_to_fdi(fdi_to_class(lab.labels, None, 33), None, 33), lab.labels)


# ------------------------------------------------------------------------------------ round trips
def test_obj_json_round_trip_is_exact(tmp_path: Path) -> None:
    scan = synthetic_jaw(3, "lower", 5000, missing=(36,))
    obj = save_scan(tmp_path, scan)
    assert obj == tmp_path / scan.id_patient / f"{scan.id_patient}_lower.obj"
    back = load_scan(obj)
    written = np.array([float("%.6f" % x) for x in scan.vertices.ravel()]).reshape(-1, 3)
    assert np.array_equal(back.vertices, written)  # exactly what was written, in file order
    assert np.array_equal(back.faces, scan.faces)
    assert np.array_equal(back.labels, scan.labels)
    assert np.array_equal(back.instances, scan.instances)
    assert (back.jaw, back.id_patient) == ("lower", scan.id_patient)
    assert not list(tmp_path.rglob("*.tmp"))


def test_obj_face_formats_and_ignored_lines(tmp_path: Path) -> None:
    body = "# comment\nmtllib x.mtl\nv 0 0 0\nv 1 0 0 0.5 0.5 0.5\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nvt 0 0\n"
    expected = np.array([[0, 1, 2], [0, 2, 3]])
    for faces in ("f 1 2 3\nf 1 3 4\n", "f 1/1 2/1 3/1\nf 1/1 3/1 4/1\n", "f 1//1 2//1 3//1\nf 1//1 3//1 4//1\n",
                  "f 1/1/1 2/1/1 3/1/1\nf 1/1/1 3/1/1 4/1/1\n", "f 1 2 3 4\n", "f  1 2 3\nf 1 3 4 \n"):
        path = tmp_path / "quad.obj"
        path.write_text(body + "g group\nusemtl m\n" + faces)
        v, f = read_obj(path)
        assert np.array_equal(v, [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]), faces
        assert np.array_equal(f, expected), faces


def test_read_obj_fast_path_matches_slow_path(tmp_path: Path) -> None:
    scan = synthetic_jaw(0, "upper", 3000, pose="canonical")
    fast = write_obj(tmp_path / "a.obj", scan.vertices, scan.faces)
    text = fast.read_text().replace("\nf ", "\nf  ")  # double spaces force the per-line parser
    (tmp_path / "b.obj").write_text(text)
    va, fa = read_obj(fast)
    vb, fb = read_obj(tmp_path / "b.obj")
    assert np.array_equal(va, vb) and np.array_equal(fa, fb)


def test_ply_and_stl_round_trips(tmp_path: Path) -> None:
    scan = synthetic_jaw(1, "upper", 2000, pose="canonical")
    colors = (np.arange(scan.num_vertices * 3).reshape(-1, 3) % 256).astype(np.uint8)
    ply = write_ply(tmp_path / "a_upper.ply", scan.vertices, scan.faces, colors=colors, labels=scan.labels)
    back = load_scan(ply)
    assert back.jaw == "upper" and back.labels is None
    assert np.allclose(back.vertices, scan.vertices.astype(np.float32)) and np.array_equal(back.faces, scan.faces)
    from plyfile import PlyData

    vert = PlyData.read(str(ply))["vertex"].data
    assert np.array_equal(np.stack([vert["red"], vert["green"], vert["blue"]], 1), colors)
    assert np.array_equal(vert["label"], scan.labels)
    for ascii in (False, True):
        stl = write_stl(tmp_path / f"s{int(ascii)}.stl", scan.vertices, scan.faces, ascii=ascii)
        s = load_scan(stl, jaw="lower")
        assert s.jaw == "lower"
        # corners shared again: as many vertices as distinct float32 points, same triangles
        assert s.num_vertices == len(np.unique(scan.vertices.astype(np.float32), axis=0))
        assert np.allclose(s.vertices[s.faces], scan.vertices[scan.faces], atol=1e-5)
        assert len(np.unique(np.sort(s.faces, 1), axis=0)) == scan.num_faces


def test_load_scan_label_sources_and_jaw(tmp_path: Path) -> None:
    scan = synthetic_jaw(2, "upper", 2000)
    obj = save_scan(tmp_path, scan)
    bare = tmp_path / "bare.obj"
    bare.write_bytes(obj.read_bytes())
    assert load_scan(bare).labels is None and load_scan(bare).jaw is None
    assert load_scan(bare, jaw="upper").jaw == "upper"
    s = load_scan(bare, labels=obj.with_suffix(".json"))  # a JSON path
    assert s.jaw == "upper" and np.array_equal(s.labels, scan.labels) and s.id_patient == scan.id_patient
    s = load_scan(bare, labels=scan.labels, jaw="upper")  # an array
    assert np.array_equal(s.labels, scan.labels)
    with pytest.raises(ValueError, match="unknown jaw"):
        load_scan(bare, jaw="middle")


def test_save_labels_schema(tmp_path: Path) -> None:
    labels = np.array([0, 11, 11, 21, 0, 17, 21])
    path = save_labels(tmp_path / "p" / "X_upper.json", labels, "upper", "X")
    doc = json.loads(path.read_text())
    assert set(doc) == {"id_patient", "jaw", "labels", "instances"}
    assert doc["labels"] == labels.tolist() and doc["jaw"] == "upper" and doc["id_patient"] == "X"
    assert doc["instances"] == [0, 1, 1, 3, 0, 2, 3]  # 0 gingiva, one id per tooth
    with pytest.raises(ValueError, match="not valid for the upper jaw"):
        save_labels(tmp_path / "bad.json", np.array([0, 31]), "upper", "X")
    with pytest.raises(ValueError, match="unknown jaw"):
        save_labels(tmp_path / "bad.json", labels, "uper", "X")
    assert not (tmp_path / "bad.json").exists()
    assert not list(tmp_path.rglob("*.tmp"))


# ------------------------------------------------------------------------------------ bad inputs
TRI = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 3\nf 2 4 3\n"


def _labels_doc(labels: object = (0, 11, 21, 0), jaw: object = "upper", **extra: object) -> str:
    doc = {"id_patient": "P", "jaw": jaw, "labels": list(labels) if isinstance(labels, tuple) else labels,
           "instances": [0, 1, 2, 0]}
    doc.update(extra)
    return json.dumps(doc)


BAD_CASES = {
    # name: (mesh file name, mesh text, json text or None, file that must be named, field)
    "label count": ("P_upper.obj", TRI, _labels_doc((0, 11, 21)), "json", "labels"),
    "fdi for jaw": ("P_upper.obj", TRI, _labels_doc((0, 11, 31, 0)), "json", "labels"),
    "fdi not a tooth": ("P_upper.obj", TRI, _labels_doc((0, 19, 21, 0)), "json", "labels"),
    "labels not ints": ("P_upper.obj", TRI, _labels_doc((0, "11", 21, 0)), "json", "labels"),
    "instances count": ("P_upper.obj", TRI, _labels_doc(instances=[0, 1]), "json", "instances"),
    "unknown jaw": ("P_upper.obj", TRI, _labels_doc(jaw="middle"), "json", "jaw"),
    "jaw conflict": ("P_lower.obj", TRI, _labels_doc(), "json", "jaw"),
    "malformed json": ("P_upper.obj", TRI, '{"id_patient": "P", "jaw": "upper", "labels": [0, 11,', "json", "json"),
    "json not object": ("P_upper.obj", TRI, "[0, 11, 21, 0]", "json", "json"),
    "missing labels key": ("P_upper.obj", TRI, json.dumps({"id_patient": "P", "jaw": "upper"}), "json", "labels"),
    "missing jaw key": ("P_upper.obj", TRI, json.dumps({"id_patient": "P", "labels": [0, 0, 0, 0]}), "json", "jaw"),
    "non-finite": ("P_upper.obj", TRI.replace("v 1 0 0", "v 1 nan 0"), None, "mesh", "vertices"),
    "inf": ("P_upper.obj", TRI.replace("v 1 0 0", "v 1 inf 0"), None, "mesh", "vertices"),
    "face out of range": ("P_upper.obj", TRI + "f 1 2 9\n", None, "mesh", "faces"),
    "face index zero": ("P_upper.obj", TRI + "f 0 1 2\n", None, "mesh", "f"),
    "face not integer": ("P_upper.obj", TRI + "f 1 2 x\n", None, "mesh", "f"),
    "face two corners": ("P_upper.obj", TRI + "f 1 2\n", None, "mesh", "f"),
    "vertex not numbers": ("P_upper.obj", TRI + "v 1 2\n", None, "mesh", "v"),
    "empty mesh": ("P_upper.obj", "# nothing\n", None, "mesh", "vertices"),
    "no faces": ("P_upper.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\n", None, "mesh", "faces"),
    "unknown suffix": ("P_upper.xyz", TRI, None, "mesh", "format"),
    "broken stl": ("P_upper.stl", "this is not an stl file", None, "mesh", "stl"),
    "broken ply": ("P_upper.ply", "ply\nformat nonsense\n", None, "mesh", "ply"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_names_file_and_field(tmp_path: Path, case: str) -> None:
    mesh_name, mesh_text, json_text, blamed, field = BAD_CASES[case]
    mesh = tmp_path / mesh_name
    mesh.write_text(mesh_text)
    label = mesh.with_suffix(".json")
    if json_text is not None:
        label.write_text(json_text)
    with pytest.raises(ScanFormatError) as info:
        load_scan(mesh)
    err = info.value
    expected = label if blamed == "json" else mesh
    assert isinstance(err, ValueError)
    assert err.path == str(expected) and err.field == field, str(err)
    assert str(expected) in str(err) and f": {field}:" in str(err)


def test_missing_files_are_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.obj"):
        load_scan(tmp_path / "nope.obj")
    (tmp_path / "a.obj").write_text(TRI)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_scan(tmp_path / "a.obj", labels=tmp_path / "nope.json")
