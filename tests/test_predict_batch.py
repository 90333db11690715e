"""tools/predict.py on a batch (issue 46): one bad scan costs one line and never the batch, degenerate meshes
caught at the check, long and newline names, an earlier run's outputs in an input folder not read as
scans, symlinked folders followed once, names with control characters escaped on the terminal."""
from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import find_scans, read_mesh, write_obj, write_stl
from pointmamba.data.scan_files import expand_scan_paths

from support.predict_runs import FAST, SAMPLE, ckpt, predict  # noqa: F401 (ckpt: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def failed_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("failed: ")]


def collinear_mesh(path: Path, n: int = 600) -> Path:
    """A jaw-sized 'scan' whose vertices lie on one line (80 mm long): it passed the old check, then
    stopped the whole folder in voxel_keys."""
    t = np.linspace(0.0, 80.0, n)
    vertices = np.stack([t, 0.5 * t, np.zeros(n)], 1)
    faces = np.stack([np.arange(n - 2), np.arange(1, n - 1), np.arange(2, n)], 1)
    return write_obj(path, vertices, faces)


def test_one_bad_scan_costs_one_line_and_never_the_batch(ckpt: Path, tmp_path: Path) -> None:
    """The issue's three triggers in one folder (a collinear mesh, a newline in a name, a 250-character
    name with --export-teeth) beside a good scan: the degenerate mesh is caught at the check with one line,
    the others are done, summary.csv and the page list the failed one, and the exit status says so."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(SAMPLE, folder / "a_upper.obj")
    collinear_mesh(folder / "b_line_upper.obj")
    shutil.copy(SAMPLE, folder / "c new\nline_upper.obj")
    long_name = "d" * 240 + "_upper.obj"
    assert len(long_name) == 250
    shutil.copy(SAMPLE, folder / long_name)
    out = tmp_path / "out"
    code, stdout, err = predict(ckpt, folder, "--out", out, "--export-teeth", "--report", out / "index.html", *FAST)
    assert code == 1, err
    assert "Traceback" not in err
    failed = failed_lines(err)
    assert len(failed) == 1 and "b_line_upper.obj" in failed[0] and "degenerate mesh" in failed[0], err
    table = rows(out / "summary.csv")
    assert [r["status"] for r in table] == ["done", "failed", "done", "done"]
    assert "degenerate mesh" in table[1]["error"] and table[1]["scan"].endswith("b_line_upper.obj")
    assert table[2]["scan"].endswith("c new\nline_upper.obj")  # a newline in a cell: still one row
    long_stem = table[3]["output"]
    assert len((long_stem + "_gingiva.stl").encode()) <= 255
    for suffix in (".json", ".ply", ".png", "_gingiva.stl"):
        assert (out / f"{long_stem}{suffix}").is_file(), suffix
    assert len(json.loads((out / "c new\nline_upper.json").read_text())["labels"]) == len(read_mesh(SAMPLE)[0])
    assert not list(out.glob(".*.tmp"))
    page = (out / "index.html").read_text()
    assert '"failed":' in page and "b_line_upper" in page
    assert "1 failed" in stdout


def test_a_scan_failing_at_run_time_is_listed_and_the_others_go_on(ckpt: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that passes the check and then fails in the model (here: an error injected into the one
    scan 'boom') costs its line and its own files; the scans before and after it are done."""
    from pointmamba.inference.segmenter import Segmenter

    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a_upper", "boom_upper", "c_upper"):
        shutil.copy(SAMPLE, folder / f"{name}.obj")
    real = Segmenter.segment

    def segment(self, scan, *args, **kwargs):
        if "boom" in scan.meta.get("name", ""):
            raise RuntimeError("simulated failure inside the network")
        return real(self, scan, *args, **kwargs)

    monkeypatch.setattr(Segmenter, "segment", segment)
    out = tmp_path / "out"
    code, _, err = predict(ckpt, folder, "--out", out, *FAST)
    assert code == 1 and "Traceback" not in err, err
    failed = failed_lines(err)
    assert len(failed) == 1 and "boom_upper.obj" in failed[0] and "RuntimeError: simulated failure" in failed[0]
    table = rows(out / "summary.csv")
    assert [(r["output"], r["status"]) for r in table] == [("a_upper", "done"), ("boom_upper", "failed"),
                                                           ("c_upper", "done")]
    assert (out / "a_upper.json").is_file() and (out / "c_upper.png").is_file()
    assert not list(out.glob("boom_upper.*"))


def test_earlier_outputs_in_an_input_folder_are_not_read_as_scans(ckpt: Path, tmp_path: Path) -> None:
    """An earlier run wrote its results beside the scans: its coloured PLY and tooth STLs were segmented as
    patients, and the real scan got renamed."""
    folder = tmp_path / "clinic"
    folder.mkdir()
    shutil.copy(SAMPLE, folder / SAMPLE.name)
    code, _, err = predict(ckpt, folder, "--out", folder, "--export-teeth", *FAST)
    assert code == 0, err
    assert (folder / "MSN022_upper.ply").is_file() and list(folder.glob("MSN022_upper_*.stl"))
    code, _, err = predict(ckpt, folder, "--out", tmp_path / "again", *FAST)
    assert code == 0, err
    assert [r["output"] for r in rows(tmp_path / "again" / "summary.csv")] == ["MSN022_upper"]
    assert "that an earlier run wrote" in err


def test_a_summary_marks_an_older_runs_tooth_meshes(tmp_path: Path) -> None:
    """Tooth STLs from before the STL marker: the run's summary.csv beside them says they are outputs."""
    v, f = read_mesh(SAMPLE)
    write_stl(tmp_path / "P_upper_11.stl", v, f)  # the plain header every write_stl gave
    write_stl(tmp_path / "P_upper.stl", v, f)
    assert [p.name for p in expand_scan_paths([tmp_path])] == ["P_upper.stl", "P_upper_11.stl"]
    (tmp_path / "summary.csv").write_text("scan,output,jaw,vertices\n/x/P_upper.stl,P_upper,upper,5\n")
    skipped: list[Path] = []
    assert [p.name for p in expand_scan_paths([tmp_path], skipped=skipped)] == ["P_upper.stl"]
    assert [p.name for p in skipped] == ["P_upper_11.stl"]


def test_symlinked_folders_are_followed_once_by_predict_and_training(tmp_path: Path) -> None:
    """Predict skipped a symlinked patient folder silently while training followed it: one rule for both,
    and a link loop ends."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere" / "P2"
    (root / "P1").mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    shutil.copy(SAMPLE, root / "P1" / "P1_upper.obj")
    shutil.copy(SAMPLE, elsewhere / "P2_upper.obj")
    (root / "P2").symlink_to(elsewhere, target_is_directory=True)
    (root / "P2again").symlink_to(elsewhere, target_is_directory=True)
    (root / "P1" / "loop").symlink_to(root, target_is_directory=True)
    found = expand_scan_paths([root])
    assert [p.name for p in found] == ["P1_upper.obj", "P2_upper.obj"]
    assert sorted(find_scans(root)) == ["P1_upper", "P2_upper"]


def test_control_characters_in_names_reach_the_terminal_escaped(ckpt: Path, tmp_path: Path) -> None:
    """An escape sequence or carriage return in a file name was printed raw in progress lines and messages."""
    evil = tmp_path / "in" / "x\x1b[2J\rmal_upper.obj"
    evil.parent.mkdir()
    shutil.copy(SAMPLE, evil)
    code, stdout, err = predict(ckpt, evil, "--out", tmp_path / "out", *FAST)
    assert code == 0, err
    assert "\x1b" not in stdout + err and "\r" not in stdout + err
    assert "x\\x1b[2J\\rmal_upper.obj" in stdout
    bad = tmp_path / "in" / "y\x1b[31m_upper.obj"
    bad.write_text("v 0 0 0\n")
    code, _, err = predict(ckpt, bad, "--out", tmp_path / "out2")
    assert code == 2 and "\x1b" not in err and "y\\x1b[31m_upper.obj" in err


def test_the_check_of_a_folder_shows_its_progress(ckpt: Path, tmp_path: Path) -> None:
    """The up-front check of a large folder ran for minutes without a sign of life."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a_upper", "b_upper"):
        shutil.copy(SAMPLE, folder / f"{name}.obj")
    code, _, err = predict(ckpt, folder, "--out", tmp_path / "out", *FAST)
    assert code == 0, err
    assert "checking scans" in err


def test_wrong_units_say_how_wide_the_scan_would_be(ckpt: Path, tmp_path: Path) -> None:
    """--units m on a scan in mm stopped in the network with 'largest grid coordinate ... needs depth 17'."""
    code, _, err = predict(ckpt, SAMPLE, "--units", "m", "--out", tmp_path / "out", *FAST)
    assert code == 2 and "Traceback" not in err, err
    line = next(ln for ln in err.splitlines() if ln.startswith("error:"))
    assert "MSN022_upper.obj: read in m, the scan would be" in line and " m wide" in line and "--units" in line
    width = float(line.split("would be ")[1].split(" m wide")[0])
    assert 50 < width < 120  # an arch of 50-120 mm, read as metres
    assert not (tmp_path / "out").exists()

    from pointmamba import Segmenter  # the API says the same, before the network

    with pytest.raises(ValueError, match=r"MSN022_upper.obj: read in m, the scan would be [\d.]+ m wide"):
        Segmenter(ckpt, device="cpu")(SAMPLE, units="m")


@pytest.mark.parametrize("text, shape", [
    ("v 0 0 0\nv 1 1 1\nv 2 2 2\nf 1 2 3\n", "its vertices lie on one line"),
    ("v 3 3 3\nv 3 3 3\nv 3 3 3\nf 1 2 3\n", "all its vertices are one point"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 1 2\nf 2 3 3\n", "every face has zero area"),
    (None, "its vertices lie on one line"),  # 600 vertices 80 mm along a line, rounded by the OBJ text
])
def test_degenerate_meshes_are_refused_naming_the_file(tmp_path: Path, text: str | None, shape: str) -> None:
    from pointmamba.data import ScanFormatError

    mesh = tmp_path / "flat_upper.obj"
    if text is None:
        collinear_mesh(mesh)
    else:
        mesh.write_text(text)
    with pytest.raises(ScanFormatError, match=f"flat_upper.obj: faces: degenerate mesh: {shape}"):
        read_mesh(mesh)


def test_minor_cases_fifo_huge_index_and_non_numeric_arrays(ckpt: Path, tmp_path: Path) -> None:
    from pointmamba import Segmenter
    from pointmamba.data import ScanFormatError

    fifo = tmp_path / "pipe_upper.obj"
    os.mkfifo(fifo)
    with pytest.raises(ScanFormatError, match="pipe_upper.obj: file: not a regular file"):
        read_mesh(fifo)  # not "mesh file not found"; and never blocks reading it

    (tmp_path / "big.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9223372036854775808\n")
    with pytest.raises(ScanFormatError, match="vertex index 9223372036854775808 "):
        read_mesh(tmp_path / "big.obj")

    segmenter = Segmenter(ckpt, device="cpu")
    v, f = read_mesh(SAMPLE)
    huge = f.astype(np.uint64)
    huge[5, 1] = 2 ** 63
    with pytest.raises(ScanFormatError, match="face 5 \\(0-based\\) has vertex index 9223372036854775808"):
        segmenter.load((v, huge), jaw="upper")
    with pytest.raises(ScanFormatError, match="coordinates must be real numbers, got <U"):
        segmenter.load((v.astype(str), f), jaw="upper")
    with pytest.raises(ScanFormatError, match="coordinates must be real numbers, got complex128"):
        segmenter.load((v + 1j, f), jaw="upper")
    from pointmamba.data.scan import Scan

    with pytest.raises(ScanFormatError, match="coordinates must be real numbers"):
        segmenter.load(Scan(v.astype(complex), f, jaw="upper"))
