"""tools/predict.py with careless or hostile input: units, colliding names, never overwriting inputs or
files it did not write, every input checked before any output, one-line errors instead of tracebacks."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.data import read_mesh, write_obj

from support.tiny import untrained_checkpoint
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth")


@pytest.fixture(scope="module")
def lower(scans_dir: Path) -> Path:
    return scans_dir / "MSN001" / "MSN001_lower.obj"


def predict(ckpt: Path, *args) -> tuple[int, str, str]:
    return run_tool("predict", *args, "--checkpoint", ckpt)


def labels(path: Path) -> np.ndarray:
    return np.array(json.loads(path.read_text())["labels"])


def one_error_line(code: int, err: str) -> bool:
    return code == 2 and "Traceback" not in err and len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1


def test_units_are_detected_and_same_names_do_not_collide(ckpt: Path, lower: Path, tmp_path: Path) -> None:
    v, f = read_mesh(lower)
    for folder, scale in (("mm", 1.0), ("metres", 0.001), ("tenfold", 10.0)):
        write_obj(tmp_path / folder / lower.name, v * scale, f, precision=9)
    code, out, err = predict(ckpt, *(tmp_path / d / lower.name for d in ("mm", "metres", "tenfold")),
                             "--out", tmp_path / "o")
    assert code == 0, err
    assert "read as m and scaled by 1000" in err and "read as 0.1 mm and scaled by 0.1" in err
    mm, metres, tenfold = (labels(tmp_path / "o" / f"{d}_MSN001_lower.json") for d in ("mm", "metres", "tenfold"))
    assert (mm == metres).mean() > 0.99 and (mm == tenfold).mean() > 0.99
    ply = read_mesh(tmp_path / "o" / "metres_MSN001_lower.ply")[0]
    assert np.allclose(ply, v * 0.001, atol=1e-6)  # the coloured mesh keeps the file's own units
    code, _, err = predict(ckpt, tmp_path / "metres" / lower.name, "--units", "m", "--out", tmp_path / "o2")
    assert code == 0 and "scaled" not in err
    assert (labels(tmp_path / "o2" / "MSN001_lower.json") == metres).all()


def test_predict_never_overwrites_inputs_or_files_it_did_not_write(ckpt: Path, lower: Path, tmp_path: Path) -> None:
    patient = tmp_path / "MSN001"
    shutil.copytree(lower.parent, patient)
    truth = (patient / "MSN001_lower.json").read_bytes()
    for extra in ((), ("--overwrite",)):  # --out = the Teeth3DS folder: its ground truth is an input's
        code, _, err = predict(ckpt, patient / "MSN001_lower.obj", "--out", patient, *extra)
        assert one_error_line(code, err) and "MSN001_lower.json would overwrite" in err and "label or reference file" in err
    assert (patient / "MSN001_lower.json").read_bytes() == truth
    assert not (patient / "MSN001_lower.png").exists()

    v, f = read_mesh(lower)  # a PLY input predicted into its own folder would be replaced by the coloured PLY
    from pointmamba.data import write_ply

    write_ply(tmp_path / "ply" / "P_lower.ply", v, f)
    before = (tmp_path / "ply" / "P_lower.ply").read_bytes()
    code, _, err = predict(ckpt, tmp_path / "ply" / "P_lower.ply", "--out", tmp_path / "ply", "--overwrite")
    assert one_error_line(code, err) and "would overwrite input" in err
    assert (tmp_path / "ply" / "P_lower.ply").read_bytes() == before

    out, victim = tmp_path / "o", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("precious")
    (out / "MSN001_lower.png").symlink_to(victim)  # planted link
    code, _, err = predict(ckpt, lower, "--out", out)
    assert one_error_line(code, err) and "is a symbolic link (not written by this run)" in err
    assert not (out / "MSN001_lower.json").exists()
    code, _, err = predict(ckpt, lower, "--out", out, "--overwrite")
    assert code == 0, err
    assert victim.read_text() == "precious"
    assert not (out / "MSN001_lower.png").is_symlink() and (out / "MSN001_lower.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = predict(ckpt, lower, "--out", out)  # an earlier run's results: only with --overwrite
    assert one_error_line(code, err) and "exists (not written by this run): pass --overwrite" in err


def test_every_input_is_checked_before_any_output(ckpt: Path, lower: Path, scans_dir: Path, tmp_path: Path) -> None:
    """With --strict, one bad input stops the run before any work (without it, see
    tests/test_predict_batch.py: the bad scan is skipped with one line)."""
    upper = scans_dir / "MSN001" / "MSN001_upper.obj"
    bad = tmp_path / "bad_lower.obj"
    lines = lower.read_bytes().split(b"\n")
    bad.write_bytes(b"\n".join(lines[: len(lines) * 3 // 4]) + b"\n")  # truncated in the faces
    code, _, err = predict(ckpt, lower, upper, bad, "--out", tmp_path / "o", "--strict")
    assert one_error_line(code, err) and "bad_lower.obj: faces:" in err
    assert not (tmp_path / "o").exists()

    wrong = tmp_path / "ref.json"
    wrong.write_text(json.dumps({"id_patient": "X", "jaw": "lower", "labels": [0] * 10}))
    code, _, err = predict(ckpt, lower, upper, "--reference", lower.with_suffix(".json"), wrong, "--out", tmp_path / "o",
                           "--strict")
    assert one_error_line(code, err) and "ref.json: labels: 10 labels but the mesh has" in err
    assert not (tmp_path / "o").exists()

    stale = tmp_path / "stale"  # predict needs no labels: a stale label file beside the mesh is ignored
    stale.mkdir()
    shutil.copy(lower, stale / lower.name)
    (stale / "MSN001_lower.json").write_text(json.dumps({"id_patient": "MSN001", "jaw": "lower", "labels": [0] * 7}))
    code, _, err = predict(ckpt, stale / lower.name, "--out", tmp_path / "o3")
    assert code == 0, err
    assert len(labels(tmp_path / "o3" / "MSN001_lower.json")) == 5467


def test_bad_arguments_and_meshes_give_one_line(ckpt: Path, lower: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    cases = [
        (("--out", tmp_path / "file"), "is a file, not a directory"),
        (("--out", tmp_path / "file" / "sub"), "is a file, not a directory"),
        (("--out", tmp_path / "o", "--device", "gpu0"), "--device='gpu0' is not a device"),
    ]
    if not torch.cuda.is_available():
        cases.append((("--out", tmp_path / "o", "--device", "cuda"), "no CUDA device is available"))
    if Path("/proc/self").is_dir():
        cases.append((("--out", "/proc/pointmamba-out"), "cannot write in /proc"))  # unwritable, even for root
    for args, message in cases:
        code, _, err = predict(ckpt, lower, *args)
        assert one_error_line(code, err) and message in err, (args, err)

    meshes = {
        "huge_lower.obj": "v 0 0 0\nv 1e39 0 0\nv 0 1 0\nf 1 2 3\n",
        "tri_lower.obj": "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
        "quad_lower.obj": "v 0 0 0\nv 60 0 0\nv 0 60 0\nv 60 60 5\nf 1 2 3\nf 2 4 3\n",
    }
    for name, text in meshes.items():
        (tmp_path / name).write_text(text)
        code, _, err = predict(ckpt, tmp_path / name, "--out", tmp_path / "o")
        assert one_error_line(code, err) and name in err, (name, err)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------ second round
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "MSN022" / "MSN022_upper.obj"


def test_overwrite_never_replaces_a_labelled_scan_in_out(ckpt: Path, tmp_path: Path) -> None:
    """The input mesh came from another folder, --out held a scan of that name with its ground truth:
    --overwrite replaced the ground-truth JSON."""
    data = tmp_path / "data" / "MSN022"
    shutil.copytree(SAMPLE.parent, data)
    elsewhere = tmp_path / "in" / SAMPLE.name
    elsewhere.parent.mkdir()
    shutil.copy(SAMPLE, elsewhere)
    truth = (data / "MSN022_upper.json").read_bytes()
    for extra in (("--overwrite",), ()):
        code, _, err = predict(ckpt, elsewhere, "--out", data, *extra, "--set", "infer.graph_cut=false")
        assert one_error_line(code, err) and (f"{data / 'MSN022_upper.json'} would overwrite the ground truth of the "
                                              f"labelled scan {data / 'MSN022_upper.obj'}") in err, err
    assert (data / "MSN022_upper.json").read_bytes() == truth and not (data / "MSN022_upper.png").exists()

    v, f = read_mesh(SAMPLE)  # a PLY scan with its labels: neither file is replaced
    from pointmamba.data import write_ply

    write_ply(data / "scan_upper.ply", v, f)
    shutil.copy(data / "MSN022_upper.json", data / "scan_upper.json")
    shutil.copy(SAMPLE, tmp_path / "in" / "scan_upper.obj")
    code, _, err = predict(ckpt, tmp_path / "in" / "scan_upper.obj", "--out", data, "--overwrite")
    assert one_error_line(code, err) and "the ground truth of the labelled scan" in err

    out = tmp_path / "results"  # results of an earlier run are still replaced with --overwrite
    for _ in range(2):
        code, _, err = predict(ckpt, elsewhere, "--out", out, "--overwrite", "--set", "infer.graph_cut=false")
        assert code == 0, err


def test_each_input_is_read_once_and_warned_about_once(ckpt: Path, tmp_path: Path, monkeypatch) -> None:
    """Predict read every scan twice (check, then prediction) and so printed each scan warning twice."""
    import pointmamba.data.scan as scan_module

    scan = tmp_path / "cut_upper.obj"
    scan.write_bytes(SAMPLE.read_bytes().rstrip(b"\n"))  # no newline at the end: a warning
    reads = []
    real = scan_module.read_mesh
    monkeypatch.setattr(scan_module, "read_mesh", lambda path: reads.append(path) or real(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = predict(ckpt, scan, "--out", tmp_path / "o", "--set", "infer.graph_cut=false")
    assert code == 0, err
    assert len(reads) == 1
    assert sum("the file ends without a newline" in str(w.message) for w in caught) == 1

    import pointmamba.data.preflight as preflight  # beyond the memory budget: read again, warned once

    monkeypatch.setattr(preflight, "KEEP_VERTICES", 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = predict(ckpt, scan, "--out", tmp_path / "o2", "--set", "infer.graph_cut=false")
    assert code == 0 and len(reads) == 3
    assert sum("the file ends without a newline" in str(w.message) for w in caught) == 1


def test_large_scans_show_each_step(ckpt: Path, tmp_path: Path, monkeypatch) -> None:
    """A 3.2M-vertex scan ran over 3 minutes showing nothing (1.3M vertices here: network 64 s, graph cut
    156 s, relabelling 28 s). From LARGE_SCAN_VERTICES on, each step is shown as it starts."""
    import pointmamba.cli.predict as predict_module

    monkeypatch.setattr(predict_module, "LARGE_SCAN_VERTICES", 1000, raising=False)  # the sample as a large scan
    code, _, err = predict(ckpt, SAMPLE, "--out", tmp_path / "o")
    assert code == 0, err
    steps = ["preprocessing", "network, 2 views", "graph cut", "numbering teeth", "writing results",
             "drawing the picture"]
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{SAMPLE}: ") and ln.endswith(" s)")]
    assert [ln.split(": ", 1)[1].rsplit(" (", 1)[0] for ln in lines] == steps
