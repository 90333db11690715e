"""The Python API (pointmamba.Segmenter): README's example as written, files vs arrays, units, clear errors,
and the command-line tool giving the same labels (a thin layer over it)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import read_mesh

from support.tiny import untrained_checkpoint
from support.tools import run_tool

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def readme_example() -> str:
    """The first python block of README's "Using it" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs_as_written(scans_dir: Path, tmp_path: Path) -> None:
    code = readme_example()
    assert len([ln for ln in code.splitlines() if ln.strip()]) == 5, code
    for name in re.findall(r'"([\w.]+\.(?:obj|ply|stl))"', code.split("\n")[2]):  # the scan it reads
        shutil.copy(scans_dir / name.split("_")[0] / name, tmp_path / name)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    teeth = json.loads(proc.stdout.split("] ")[0] + "]")
    doc = json.loads((tmp_path / "MSN001_lower.json").read_text())
    assert teeth == sorted(set(doc["labels"]) - {0}) and len(teeth) >= 10  # the shipped model finds the teeth
    assert (tmp_path / "MSN001_lower.ply").is_file() and (tmp_path / "teeth" / "MSN001_lower_gingiva.stl").is_file()
    assert doc["confidence"]["teeth"] and "review" in doc["confidence"]


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory: pytest.TempPathFactory):
    from pointmamba import Segmenter

    return Segmenter(untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth"), device="cpu",
                     infer={"graph_cut": False})


def test_a_file_and_its_arrays_give_the_same_result_in_any_units(segmenter, scans_dir: Path) -> None:
    path = scans_dir / "MSN001" / "MSN001_lower.obj"
    from_file = segmenter(path)
    v, f = read_mesh(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # mm arrays: nothing to warn about
        from_arrays = segmenter((v, f), jaw="lower", name="MSN001_lower")
    assert (from_file.labels == from_arrays.labels).all()
    assert from_file.name == from_arrays.name == "MSN001_lower" and from_arrays.id_patient == "MSN001"
    with pytest.warns(UserWarning, match="read as m and scaled by 1000"):
        metres = segmenter((v / 1000.0, f), jaw="lower")
    assert (metres.labels == from_file.labels).mean() > 0.99
    assert np.allclose(metres.vertices, v / 1000.0)  # the result keeps the caller's units ...
    assert np.allclose(metres.aligned, from_file.aligned, atol=1e-6)  # ... the model worked in mm
    mesh = type("Trimesh", (), {"vertices": v, "faces": f})()  # any object with .vertices and .faces
    assert (segmenter(mesh, jaw="lower").labels == from_file.labels).all()
    explicit = segmenter((v / 10.0, f), jaw="lower", units="cm")
    assert (explicit.labels == from_file.labels).mean() > 0.99
    inches = segmenter((v / 25.4, f), jaw="lower", units="in")  # never guessed, so said
    assert (inches.labels == from_file.labels).mean() > 0.99
    # what the result holds
    assert from_file.labels.shape == from_file.instances.shape == (len(v),)
    assert from_file.probabilities.shape == (len(v), 17)
    assert {t.fdi for t in from_file.confidence.teeth} == set(from_file.teeth)


def test_bad_input_is_one_clear_error_naming_it(segmenter, scans_dir: Path, tmp_path: Path) -> None:
    v, f = read_mesh(scans_dir / "MSN001" / "MSN001_lower.obj")
    with pytest.raises(ValueError, match="patient7: faces:.*out of range"):
        segmenter((v, f + 10), jaw="lower", name="patient7")
    with pytest.raises(ValueError, match="patient7: faces: faces must be integer"):
        segmenter((v, f.astype(float)), jaw="lower", name="patient7")
    with pytest.raises(ValueError, match="unknown jaw"):
        segmenter((v, f), jaw="top")
    with pytest.raises(FileNotFoundError):
        segmenter(tmp_path / "missing_lower.obj")
    with pytest.raises(TypeError, match="mesh file path, \\(vertices, faces\\), a mesh object"):
        segmenter(v)
    from pointmamba import Segmenter
    from pointmamba.config import ConfigError

    with pytest.raises(ConfigError, match="graph_cutt"):
        Segmenter(infer={"graph_cutt": False})


def test_results_are_saved_but_never_over_the_scan_itself(segmenter, scans_dir: Path, tmp_path: Path) -> None:
    from pointmamba.data import write_ply

    v, f = read_mesh(scans_dir / "MSN001" / "MSN001_lower.obj")
    source = write_ply(tmp_path / "MSN001_lower.ply", v, f)
    before = source.read_bytes()
    result = segmenter(source)
    with pytest.raises(ValueError, match="is the scan being segmented"):
        result.save_ply(source)
    assert source.read_bytes() == before
    png = result.save_png(tmp_path / "out.png", reference=scans_dir / "MSN001" / "MSN001_lower.json")
    assert png.read_bytes()[:4] == b"\x89PNG"
    metrics = result.compare(scans_dir / "MSN001" / "MSN001_lower.json")
    assert set(metrics) == {"accuracy", "miou", "TSA", "TLA", "TIR", "wrong_teeth"}


def test_the_command_line_tool_is_a_thin_layer_over_the_api(segmenter, scans_dir: Path, tmp_path: Path) -> None:
    path = scans_dir / "MSN001" / "MSN001_upper.obj"
    code, out, err = run_tool("predict", path, "--checkpoint", segmenter.checkpoint, "--out", tmp_path,
                              "--set", "infer.graph_cut=false")
    assert code == 0, err
    doc = json.loads((tmp_path / "MSN001_upper.json").read_text())
    result = segmenter(path)
    assert doc == json.loads(json.dumps(result.to_json()))  # labels, instances and confidence alike
    assert (result.review_line() or "") in out
