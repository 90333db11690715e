"""bench/train_step.py on the CPU: the recipe's step taken apart on a synthetic set, one row per sparse-conv
backend, the same network under both, the gathered conv dispatching fewer ops."""
from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

from support.tiny import tiny_overrides, write_synthetic

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_rows_per_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("POINTMAMBA_CPU_TUNING", "0")
    monkeypatch.delenv("POINTMAMBA_BACKEND_SPCONV", raising=False)
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("train_step", None)
    train_step = importlib.import_module("train_step")
    root = write_synthetic(tmp_path / "synth")
    out = tmp_path / "rows.json"
    overrides = tiny_overrides(root, tmp_path / "work") + ["data.num_workers=0"]
    config = tmp_path / "tiny.yaml"  # the defaults; the recipe's own file names its real scans
    config.write_text("seed: 0\n")
    assert train_step.main(["--config", str(config), "--steps", "2", "--device", "cpu", "--json", str(out),
                            "--set", *overrides]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["spconv"] for r in rows] == ["torch", "gather"]
    assert [r["backends"]["spconv"] for r in rows] == ["torch", "gather"]
    for r in rows:
        assert r["step_s"] > 0 and r["loader_s"] > 0 and r["points_per_step"] > 100 and r["host_waits"] > 0
        assert "gpu_busy_s" not in r  # CUDA rows only
    assert rows[1]["ops"] < rows[0]["ops"]
    assert "spconv=gather" in capsys.readouterr().out
    assert "POINTMAMBA_BACKEND_SPCONV" not in os.environ  # restored


def test_cuda_profile_runs_where_there_is_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiler part of the CUDA rows, run on the CPU: no kernels, the CPU ops listed (its code can
    only fail on a GPU day otherwise)."""
    import torch

    from pointmamba.config import load_config
    from pointmamba.training.data_builders import build_dataset

    monkeypatch.setenv("POINTMAMBA_CPU_TUNING", "0")
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("train_step", None)
    train_step = importlib.import_module("train_step")
    root = write_synthetic(tmp_path / "synth")
    cfg = load_config(None, tiny_overrides(root, tmp_path / "work") + ["data.num_workers=0"])
    _, batches = train_step.loader_seconds(build_dataset(cfg, "train", True), cfg, 2)
    out = train_step.cuda_profile(train_step.make_step(cfg, torch.device("cpu")), batches[:2], torch.device("cpu"))
    assert out["kernels"] == 0 and out["gpu_busy_s"] == 0
    assert len(out["top_cpu_ops"]) == 10 and all(ms >= 0 for _, _, ms in out["top_cpu_ops"])


def test_the_trainer_row_runs_tools_train_s_own_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--trainer: the trainer's own step on the same seeded network gives the bare step's loss (the two rows
    time the same computation; the trainer adds its hooks, checks and logs), on the same batches."""
    import torch

    from pointmamba.config import load_config
    from pointmamba.training.data_builders import build_dataset

    monkeypatch.setenv("POINTMAMBA_CPU_TUNING", "0")
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("train_step", None)
    train_step = importlib.import_module("train_step")
    root = write_synthetic(tmp_path / "synth")
    cfg = load_config(None, tiny_overrides(root, tmp_path / "work") + ["data.num_workers=0", "model.drop_path=0.0"])
    _, batches = train_step.loader_seconds(build_dataset(cfg, "train", True), cfg, 2)
    cpu = torch.device("cpu")
    bare, trainer = train_step.make_step(cfg, cpu), train_step.make_trainer_step(cfg, cpu)
    for b in batches[:2]:
        assert trainer(b) == pytest.approx(bare(b), rel=1e-5)


def test_amp_rows_in_the_order_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--amp on off: a row each, in that order, for each backend. On the CPU both run float32 (autocast is
    CUDA's only) and say so; a GPU session compares them interleaved."""
    monkeypatch.setenv("POINTMAMBA_CPU_TUNING", "0")
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("train_step", None)
    train_step = importlib.import_module("train_step")
    root = write_synthetic(tmp_path / "synth")
    out = tmp_path / "rows.json"
    config = tmp_path / "tiny.yaml"
    config.write_text("seed: 0\n")
    overrides = tiny_overrides(root, tmp_path / "work") + ["data.num_workers=0"]
    assert train_step.main(["--config", str(config), "--steps", "2", "--device", "cpu", "--backends", "gather",
                            "--amp", "on", "off", "--json", str(out), "--set", *overrides]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["spconv"], r["amp"]) for r in rows] == [("gather", False), ("gather", False)]
    assert rows[0]["ops"] == rows[1]["ops"]  # the same float32 step twice
    with pytest.raises(SystemExit):
        train_step.main(["--config", str(config), "--amp", "bf16"])


def test_the_amp_rule_reads_both_kinds_of_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("train_step", None)
    train_step = importlib.import_module("train_step")

    def rows(bf16: list[float], fp32: list[float]) -> list[dict]:
        return [{"amp": True, "step_s": s} for s in bf16] + [{"amp": False, "step_s": s} for s in fp32]

    assert "float32 trains" in train_step.amp_verdict(rows([0.30, 0.26], [0.25, 0.25]))  # 0.89x
    assert "bf16 autocast stays" in train_step.amp_verdict(rows([0.30, 0.26], [0.26, 0.26]))  # 0.93x
    assert train_step.amp_verdict(rows([], [0.3, 0.3])) is None
