"""tools/predict.py on a folder: recursive, Teeth3DS layout, --reference auto, one summary table, the
output folder inside the input folder never read back as input, one-line errors."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from pointmamba.data import read_mesh, write_stl

from support.tiny import untrained_checkpoint
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth")


def one_error_line(code: int, err: str) -> bool:
    return code == 2 and "Traceback" not in err and len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_folder_is_predicted_recursively_with_one_summary(ckpt: Path, scans_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "clinic"
    shutil.copytree(scans_dir / "MSN001", root / "2024" / "MSN001")  # Teeth3DS layout, label files beside
    v, f = read_mesh(scans_dir / "MSN002" / "MSN002_upper.obj")
    write_stl(root / "walk-in" / "Patient 9 upper.STL", v, f)  # a user's own name, no label file
    (root / "walk-in" / "notes.txt").write_text("not a mesh")
    (root / ".trash").mkdir()
    (root / ".trash" / "old_lower.obj").write_text("v 0 0 0\n")  # hidden folders are skipped
    truth = (root / "2024" / "MSN001" / "MSN001_lower.json").read_bytes()
    out = root / "results"  # inside the input folder
    args = ("predict", root, "--checkpoint", ckpt, "--out", out, "--reference", "auto", "--set", "infer.graph_cut=false")
    code, stdout, err = run_tool(*args)
    assert code == 0, err
    table = rows(out / "summary.csv")
    assert [r["output"] for r in table] == ["MSN001_lower", "MSN001_upper", "Patient 9 upper"]
    assert list(table[0])[:10] == ["scan", "output", "jaw", "vertices", "teeth", "num_teeth", "min_confidence",
                                   "review", "findings", "seconds"]
    assert table[0]["accuracy"] and not table[2]["accuracy"]  # a reference where a label file lies beside
    assert table[2]["jaw"] == "upper" and int(table[2]["vertices"]) == len(v)
    assert all(r["review"] in ("yes", "no") and float(r["seconds"]) > 0 for r in table)
    assert stdout.count("vs reference:") == 2 and "predict: 100%" in err  # one progress bar for the folder
    flagged = [r["output"] for r in table if r["review"] == "yes"]
    for name in flagged:  # one terminal line per flagged scan
        assert sum(line.startswith(f"{name}: review ") for line in stdout.splitlines()) == 1
    assert f"{len(flagged)} of 3 scans flagged for review" in stdout
    assert (root / "2024" / "MSN001" / "MSN001_lower.json").read_bytes() == truth
    labels = json.loads((out / "Patient 9 upper.json").read_text())["labels"]
    assert len(labels) == len(v)

    # again: the results folder inside the input is not read as input; earlier results need --overwrite
    code, _, err = run_tool(*args)
    assert one_error_line(code, err) and "not written by this run" in err
    code, _, err = run_tool(*args, "--overwrite")
    assert code == 0, err
    assert len(rows(out / "summary.csv")) == 3


def test_folder_mistakes_give_one_line_and_write_nothing(ckpt: Path, scans_dir: Path, tmp_path: Path) -> None:
    patient = tmp_path / "p" / "MSN001"
    shutil.copytree(scans_dir / "MSN001", patient)
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "sub" / "readme.txt").write_text("x")
    cases = [
        ((tmp_path / "empty",), "empty: no mesh files (.obj, .ply, .stl) in this folder or below it"),
        ((tmp_path / "nowhere",), "nowhere: no such file or folder"),
        ((patient, "--reference", "auto", patient / "MSN001_lower.json"),
         "--reference auto stands alone"),
        ((patient, "--report", tmp_path), "is a folder: name the page"),
        ((patient, "--report", patient / "MSN001_lower.json"), "MSN001_lower.json would overwrite"),
    ]
    for args, message in cases:
        code, _, err = run_tool("predict", *args, "--checkpoint", ckpt, "--out", tmp_path / "o")
        assert one_error_line(code, err) and message in err, (args, err)
    assert not (tmp_path / "o").exists()
