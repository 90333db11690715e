"""The command-line tools end to end on a tiny checkpoint: predict (real scan) and test."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import load_config
from pointmamba.training.trainer import Trainer

from support.tiny import tiny_overrides, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("tools")
    synth = write_synthetic(tmp / "synth")
    overrides = tiny_overrides(synth, tmp / "work", epochs=1) + ["train.max_steps_per_epoch=1"]
    trainer = Trainer(load_config(None, overrides))
    trainer.train()
    trainer.close()
    return tmp / "work", overrides


def count_obj_vertices(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.startswith("v "))


def test_predict_real_scan_writes_full_resolution_json(tiny_run: tuple[Path, list[str]], scans_dir: Path, tmp_path: Path) -> None:
    work, _ = tiny_run
    scan = scans_dir / "MSN001" / "MSN001_lower.obj"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "predict.py"), str(scan), "--checkpoint",
                           str(work / "last.pth"), "--out", str(tmp_path), "--verbose"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = next(line for line in proc.stdout.splitlines() if line.strip().startswith("steps:"))  # --verbose
    for name in ("load", "preprocess", "network", "refine", "write", "picture", "total"):
        assert f"{name} " in steps, steps
    out = json.loads((tmp_path / "MSN001_lower.json").read_text())
    assert out["jaw"] == "lower" and out["id_patient"] == "MSN001"
    assert len(out["labels"]) == count_obj_vertices(scan)
    assert len(out["instances"]) == len(out["labels"])
    assert set(out["labels"]) <= {0} | set(range(31, 39)) | set(range(41, 49))
    assert (tmp_path / "MSN001_lower.ply").stat().st_size > 0 and (tmp_path / "MSN001_lower.png").stat().st_size > 0


def test_predict_takes_the_jaw_or_tells_it_from_the_teeth(tiny_run: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A name that does not say the jaw: told from the teeth (recorded as such), or given by --jaw; with the
    numbering off nothing can tell it, and the scan fails naming it."""
    work, _ = tiny_run
    from pointmamba.data import synthetic_jaw, write_obj

    scan = synthetic_jaw(3, "upper", 3000)
    write_obj(tmp_path / "patient.obj", scan.vertices, scan.faces)
    cmd = [sys.executable, str(ROOT / "tools" / "predict.py"), str(tmp_path / "patient.obj"), "--checkpoint",
           str(work / "last.pth")]
    for out, extra, source in (("teeth", [], "teeth"), ("given", ["--jaw", "upper"], "given")):
        proc = subprocess.run(cmd + ["--out", str(tmp_path / out)] + extra, capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads((tmp_path / out / "patient.json").read_text())
        assert len(doc["labels"]) == len(scan.vertices)
        assert doc["confidence"]["jaw"]["source"] == source and doc["jaw"] == doc["confidence"]["jaw"]["used"]
    proc = subprocess.run(cmd + ["--out", str(tmp_path / "off"), "--set", "infer.instance_numbering=false"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1 and "jaw unknown" in proc.stderr and "patient.obj" in proc.stderr, proc.stderr[-2000:]


def test_test_tool_writes_metrics(tiny_run: tuple[Path, list[str]], tmp_path: Path) -> None:
    work, overrides = tiny_run
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "test.py"), "--config", str(work / "config.yaml"),
                           "--checkpoint", str(work / "last.pth"), "--split", "val", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    overall = metrics["overall"]
    for key in ("accuracy", "miou", "mdice", "TSA", "TLA", "TIR", "score"):
        assert 0.0 <= overall[key] <= 1.0, key
    assert metrics["per_scan"][0]["name"] == "SYN00002_upper"
    assert metrics["per_scan"][0]["lone_premolar"] is False  # a complete synthetic arch
    for name in ("per_scan.csv", "per_class.csv", "confusion.png", "summary.md"):
        assert (tmp_path / name).stat().st_size > 0
    summary = metrics["summary"]
    assert set(summary) >= {"all", "source synth", "jaw upper"} and summary["all"]["scans"] == 1
    assert summary["all"]["mean_scan_miou"] == pytest.approx(metrics["per_scan"][0]["miou"])
    assert "| all | 1 |" in (tmp_path / "summary.md").read_text()


def test_removal_check_tool(tiny_run: tuple[Path, list[str]], tmp_path: Path) -> None:
    from support.tools import run_tool

    work, _ = tiny_run
    samples = ROOT / "data" / "samples"
    code, out, err = run_tool("removal_check", "--config", work / "config.yaml", "--checkpoint", work / "last.pth",
                              "--set", f"data.root={samples}", "data.val_names=[MSN022_upper]",
                              "infer.mirror_tta=false", "--out", tmp_path / "rc")
    assert code == 0, err[-3000:]
    result = json.loads((tmp_path / "rc" / "removal_check.json").read_text())
    assert result["scans"] == ["MSN022_upper"] and result["summary"]["removals"] == 14
    assert result["summary"]["teeth_checked"] == 14 * 13
    rows = (tmp_path / "rc" / "removals.csv").read_text().splitlines()
    assert rows[0] == "scan,removed,others,changed" and len(rows) == 15


def _runtime_probe(env: dict[str, str], torch_first: bool = False) -> dict:
    """tune_cpu_runtime() in a fresh interpreter (libgomp and malloc settings are per process)."""
    code = ("import json, os; " + ("import torch; " if torch_first else "")
            + "from pointmamba.utils.cpu_runtime import tune_cpu_runtime; a = tune_cpu_runtime(); "
            "print(json.dumps({'applied': a, 'spin': os.environ.get('GOMP_SPINCOUNT')}))")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "POINTMAMBA_CPU_TUNING") and not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cpu_runtime_tuning_respects_the_user():
    default = _runtime_probe({})
    assert default["spin"] == "10000" and "GOMP_SPINCOUNT" in default["applied"]
    if sys.platform.startswith("linux"):
        assert "malloc" in default["applied"]
    mine = _runtime_probe({"GOMP_SPINCOUNT": "123", "MALLOC_ARENA_MAX": "2"})
    assert mine["spin"] == "123" and mine["applied"] == {}
    assert _runtime_probe({"POINTMAMBA_CPU_TUNING": "0"}) == {"applied": {}, "spin": None}
    late = _runtime_probe({}, torch_first=True)  # too late for libgomp: left alone, not pretended
    assert late["spin"] is None and "GOMP_SPINCOUNT" not in late["applied"]


def test_console_entry_points_resolve() -> None:
    """The ``console_scripts`` of setup.py are the user tools, each a callable ``cli`` in ``pointmamba.cli``;
    the studies in ``pointmamba.research`` run with ``python -m`` (each has ``main`` and a ``__main__`` block)."""
    import importlib
    import re

    text = (ROOT / "setup.py").read_text()
    entries = re.findall(r'"(pointmamba-[\w-]+) = ([\w.]+):(\w+)"', text)
    assert sorted(script for script, _, _ in entries) == sorted(
        f"pointmamba-{t}" for t in ("train", "test", "predict", "check-data", "export-model", "ablate", "plot-distances"))
    for script, module, attr in entries:
        assert module.startswith("pointmamba.cli.") and callable(getattr(importlib.import_module(module), attr)), script
    for path in sorted((ROOT / "pointmamba" / "research").glob("[!_]*.py")):
        module = importlib.import_module(f"pointmamba.research.{path.stem}")
        assert callable(module.main) and 'if __name__ == "__main__":' in path.read_text(), path.name
