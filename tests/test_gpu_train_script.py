"""bench/gpu_train.sh: what it says when a device call is set up wrong (no GPU or data needed to get there).

The training paths themselves need the shared data and ran by hand (docs/gpu_runbook.md, "Training across two
calls of one lease"); these check that a wrong call stops at once with one line naming what is missing,
before anything is unpacked or trained.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_train.sh"


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_TRAIN_STATE": str(tmp_path / "state"), "GPU_TRAIN_CARRY": str(tmp_path / "carry"),
           "OUT": str(tmp_path / "out")}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_finish_of_a_run_never_started_names_it(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    done = run(["finish", "B_gpu_e28_s1"], tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "B_gpu_e28_s1 missing" in lines[0] and "given back" in lines[0]
    assert not (tmp_path / "out").exists()  # nothing exported


def test_start_without_the_carried_data_stops_before_training(tmp_path: Path) -> None:
    (tmp_path / "carry").mkdir()
    done = run(["start", "B_a:configs/shared_data_recipe_split2.yaml:seed=1"], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'carry'}/data.tar.xz missing: run 'prepare' here and carry .gpu_train"]
    assert not (tmp_path / "state" / "B_a").exists()


def test_unknown_verb_prints_usage(tmp_path: Path) -> None:
    done = run(["train"], tmp_path)
    assert done.returncode == 2 and "usage:" in done.stderr and "finish NAME" in done.stderr


def test_data_without_the_carried_data_names_it(tmp_path: Path) -> None:
    """'data' (gpu_session.sh's calls that train nothing unpack through it) stops as 'start' does."""
    (tmp_path / "carry").mkdir()
    done = run(["data"], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'carry'}/data.tar.xz missing: run 'prepare' here and carry .gpu_train"]
