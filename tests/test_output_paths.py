"""Where tools/predict.py writes (issue 46): every output inside --out, checked before any work (tooth
meshes and the report included), one run at a time per --out, a full disk in one line."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pointmamba.cli.output_files import LOCK_FILE, output_stems, plan_outputs

from support.predict_runs import FAST, SAMPLE, ckpt, one_error_line, predict  # noqa: F401 (ckpt: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_no_output_outside_out_when_one_folder_path_ends_another(tmp_path: Path) -> None:
    """The issue's reproduction: the root part '/' entered a stem, and JSON, PLY and PNG landed in /."""
    stems = output_stems(["/data/s_upper.obj", "/data/data/s_upper.obj"])
    assert stems == ["data_s_upper", "data_data_s_upper"]
    out = tmp_path / "out"
    plan = plan_outputs(["/data/s_upper.obj", "/data/data/s_upper.obj"], out, (".json", ".ply", ".png", "_11.stl"))
    assert all(path.parent == out for files in plan for path in files.values())


def test_a_folder_at_a_tooth_output_is_refused_before_any_work(ckpt: Path, tmp_path: Path) -> None:
    """With --overwrite, a folder sitting at a tooth's name gave a traceback after inference (only the
    gingiva STL written)."""
    out = tmp_path / "out"
    (out / "MSN022_upper_11.stl").mkdir(parents=True)
    code, _, err = predict(ckpt, SAMPLE, "--out", out, "--export-teeth", "--overwrite", *FAST)
    assert one_error_line(code, err) and "MSN022_upper_11.stl is a folder" in err, err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "MSN022_upper_11.stl"]


def test_the_report_is_never_a_file_the_run_writes(ckpt: Path, tmp_path: Path) -> None:
    """--report DIR/summary.csv silently replaced the summary table with the page."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a_upper", "b_upper"):
        shutil.copy(SAMPLE, folder / f"{name}.obj")
    out = tmp_path / "out"
    for report in (out / "summary.csv", out / "a_upper.png", out / LOCK_FILE):
        code, _, err = predict(ckpt, folder, "--out", out, "--report", report, *FAST)
        assert one_error_line(code, err) and f"{report} would overwrite" in err, err
    assert not out.exists() or not list(out.glob("*.json"))


def test_a_second_run_into_the_same_out_stops_at_once(ckpt: Path, tmp_path: Path) -> None:
    """Two runs writing one --out both succeeded, and summary.csv disagreed with its own JSON files."""
    out = tmp_path / "out"
    out.mkdir()
    # another run holding --out: a process that takes the lock exactly as predict does, then waits
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pointmamba.cli.output_files import lock_out_dir; "
                               "lock_out_dir(sys.argv[1]); print('locked', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, _, err = predict(ckpt, SAMPLE, "--out", out, *FAST)
        assert one_error_line(code, err) and f"--out {out} is in use by another run (pid {holder.pid})" in err, err
        assert not (out / "MSN022_upper.json").exists()
    finally:
        holder.communicate("")  # ends it: its lock goes with it
    code, _, err = predict(ckpt, SAMPLE, "--out", out, *FAST)
    assert code == 0, err


class _FullDisk:
    """A file whose every write fails as on a full disk (ENOSPC from the write system call)."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()


def test_a_full_disk_names_the_file_and_the_free_space(ckpt: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk gave a traceback naming no file; no half-written file may be left."""
    import pointmamba.utils.atomic_file as atomic_file

    real = os.fdopen
    monkeypatch.setattr(atomic_file.os, "fdopen", lambda fd, *a, **k: _FullDisk(real(fd, *a, **k)))
    out = tmp_path / "out"
    code, _, err = predict(ckpt, SAMPLE, "--out", out, *FAST)
    monkeypatch.undo()
    assert one_error_line(code, err), err
    line = next(ln for ln in err.splitlines() if ln.startswith("error:"))
    assert f"{out / 'MSN022_upper.json'}: cannot write it, the disk is full (" in line and " free in " in line
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # no temp file, no half a result
