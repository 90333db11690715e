"""pointmamba-ablate: criterion table, resumable runs (skip finished, resume interrupted), config checks."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pointmamba.config import load_config

from support.tiny import TINY_MODEL, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
from pointmamba.cli import ablate  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the in-process Trainer: see test_warmup._one_thread
    yield
    torch.set_num_threads(previous)


def _tiny_overrides(root, epochs):
    """Every run's --set for the tiny synthetic ablations: two train scans, one val jaw, one step per epoch."""
    return TINY_MODEL + [f"data.root={root}", "data.train_names=[SYN00000, SYN00001]",
                         "data.val_names=[SYN00002_upper]", "data.grid_size=0.8", "data.max_points=600",
                         f"data.cache_dir={root / '.cache'}", f"train.epochs={epochs}", "train.batch_size=1",
                         "train.max_steps_per_epoch=1", "train.progress=false"]


def _records(losses, miou=None):
    return [{"epoch": i + 1, "train_loss": v, **({"val_miou": miou[i]} if miou else {})} for i, v in enumerate(losses)]


def _run(stem, losses, miou=None):
    return {"stem": stem, "status": "done", "records": _records(losses, miou), "cfg": {}}


def test_criterion_at_epoch_10():
    base = [2.0 - 0.1 * i for i in range(12)]  # epoch 10: 1.1
    runs = [_run("cpe", base, [0.1 * i / 12 for i in range(12)]),
            _run("good", [x * 1.05 for x in base]),
            _run("meh", [x * 1.15 for x in base]),
            _run("bad", [x * 1.5 for x in base]),
            _run("fast", [x * 0.9 for x in base])]
    rows, meta = ablate.summarize(runs, "cpe")
    assert meta == {"baseline": "cpe", "epoch": 10, "baseline_loss": pytest.approx(1.1), "fallback": False}
    by = {r["config"]: r for r in rows}
    assert by["cpe"]["loss_ratio"] == pytest.approx(1.0) and by["cpe"]["epochs_to_baseline_loss"] == 10
    assert by["good"]["verdict"] == "acceptable" and by["meh"]["verdict"] == "borderline"
    assert by["bad"]["verdict"] == "needs adjustment" and by["bad"]["epochs_to_baseline_loss"] == "not reached"
    assert by["fast"]["epochs_to_baseline_loss"] == 9  # 0.9 * (2.0 - 0.8) = 1.08 <= 1.1
    assert by["cpe"]["best_val_miou"] == pytest.approx(11 / 120) and by["cpe"]["best_epoch"] == 12


def test_criterion_falls_back_to_last_common_epoch_and_missing_baseline():
    rows, meta = ablate.summarize([_run("cpe", [2.0, 1.5, 1.2]), _run("x", [2.0, 1.4])], "cpe")
    assert meta["epoch"] == 2 and meta["fallback"] and meta["baseline_loss"] == 1.5
    assert rows[1]["loss_ratio"] == pytest.approx(1.4 / 1.5) and rows[1]["epochs_to_baseline_loss"] == 2
    rows, meta = ablate.summarize([_run("a", [1.0]), _run("b", [2.0])], "cpe")
    assert meta["baseline"] is None and all(r["loss_ratio"] is None for r in rows)


def test_expand_configs(tmp_path):
    for name in ("_base.yaml", "b.yaml", "a.yaml"):
        (tmp_path / name).write_text("seed: 0\n")
    got = ablate.expand_configs([str(tmp_path / "*.yaml"), str(tmp_path / "a.yaml")])
    assert [p.name for p in got] == ["a.yaml", "b.yaml"]  # bases skipped, duplicates dropped
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yaml").write_text("seed: 0\n")
    with pytest.raises(ValueError, match="share a file name"):
        ablate.expand_configs([str(tmp_path / "a.yaml"), str(tmp_path / "sub" / "a.yaml")])
    with pytest.raises(FileNotFoundError):
        ablate.expand_configs([str(tmp_path / "nothing*.yaml")])


def test_ablation_configs_load():
    configs = ablate.expand_configs([str(ROOT / "configs" / "ablation" / "*.yaml")])
    stems = {p.stem for p in configs}
    assert {"cpe", "cpe_relpos_naive", "cpe_relpos_fixed", "cpe_relpos_quantile", "cpe_relpos_warmup", "relpos_abs",
            "sinusoidal", "spherical", "gru", "logical", "sin_gru", "sin_logical"} == stems
    cfgs = {p.stem: load_config(p) for p in configs}
    assert len({(c["seed"], c["train"]["epochs"], c["train"]["batch_size"], c["train"]["lr"]) for c in cfgs.values()}) == 1
    assert not ablate.budget_notes([{"stem": s, "cfg": c} for s, c in cfgs.items()])
    m = {s: c["model"] for s, c in cfgs.items()}
    assert m["cpe"]["position"] == "cpe" and m["gru"]["position"] == "gru" and m["sinusoidal"]["position"] == "sinusoidal"
    assert m["cpe_relpos_naive"]["relpos"]["preset"] == "naive" and m["cpe_relpos_fixed"]["relpos"]["preset"] == "fixed"
    assert m["cpe_relpos_fixed"]["relpos"]["normalization"] == "fixed"
    assert m["cpe_relpos_quantile"]["relpos"]["normalization"] == "quantile"
    assert cfgs["cpe_relpos_warmup"]["warmup"]["epochs"] > 0 and cfgs["cpe_relpos_quantile"]["warmup"]["epochs"] == 0
    assert m["relpos_abs"]["position"] == "relpos+abs" and m["spherical"]["relpos"]["direction"] == "angles"
    assert (m["logical"]["position"], m["sin_gru"]["position"], m["sin_logical"]["position"]) == ("logical", "sin+gru", "sin+logical")
    # one switch at a time along the ladder
    assert m["cpe_relpos_quantile"] == {**m["cpe_relpos_fixed"], "relpos": {**m["cpe_relpos_fixed"]["relpos"], "normalization": "quantile"}}
    assert m["cpe_relpos_warmup"] == m["cpe_relpos_quantile"]


def _two_configs(factory: pytest.TempPathFactory, name: str, position: str, epochs: int) -> tuple[Path, Path, list[str]]:
    """(folder with cpe.yaml and NAME.yaml setting model.position, the ablation's out folder, tiny overrides
    on a fresh synthetic data set)."""
    root = write_synthetic(factory.mktemp("synth"))
    tmp = factory.mktemp("ablate")
    (tmp / "cpe.yaml").write_text("model:\n  position: cpe\n")
    (tmp / f"{name}.yaml").write_text(f"model:\n  position: {position}\n")
    return tmp, tmp / "out", _tiny_overrides(root, epochs=epochs)


def test_ablate_two_tiny_configs(tmp_path_factory):
    """Runs two configs (one interrupted beforehand, so it resumes), then skips both on a rerun."""
    from pointmamba.training.hooks import Hook
    from pointmamba.training.trainer import Trainer

    tmp, out, overrides = _two_configs(tmp_path_factory, "relpos", "cpe+relpos\n  relpos:\n    preset: fixed", epochs=2)

    class Interrupt(Hook):
        def after_epoch(self, trainer: Trainer) -> None:
            raise KeyboardInterrupt

    trainer = Trainer(load_config(tmp / "relpos.yaml", overrides + [f"work_dir={out / 'relpos'}"]), hooks=[Interrupt()])
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    trainer.close()
    assert len((out / "relpos" / "metrics.jsonl").read_text().splitlines()) == 1

    cmd = [sys.executable, "-m", "pointmamba.cli.ablate", str(tmp / "cpe.yaml"), str(tmp / "relpos.yaml"),
           "--out", str(out), "--set", *overrides]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "relpos: resuming after epoch 1 of 2" in res.stdout and "cpe: training 2 epochs" in res.stdout
    md = (out / "results.md").read_text()
    assert "| `cpe` (baseline) | done | 2 |" in md and "| `relpos` | done | 2 |" in md
    assert "fewer than 10 epochs were run: last common epoch 2" in md
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["config"] for r in rows] == ["cpe", "relpos"]
    assert float(rows[0]["loss_ratio"]) == 1.0 and float(rows[1]["loss_ratio"]) > 0
    assert all(r["final_val_miou"] != "" for r in rows)
    assert len(list(csv.DictReader((out / "epochs.csv").open()))) == 4
    assert (out / "curves.png").stat().st_size > 10_000
    for stem in ("cpe", "relpos"):
        assert [ln for ln in (out / stem / "metrics.jsonl").read_text().splitlines() if ln.strip()].__len__() == 2

    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("finished (2 epochs), skipped") == 2
    assert (out / "results.md").read_text() == md

    changed = subprocess.run(cmd + ["train.epochs=3"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert changed.returncode == 2 and "different settings (train.epochs)" in changed.stderr


def test_failed_run_does_not_move_the_criterion_epoch():
    base = [2.0 - 0.1 * i for i in range(10)]
    failed = {**_run("broken", base[:2]), "status": "failed (exit 1)"}
    rows, meta = ablate.summarize([_run("cpe", base), _run("x", base), failed], "cpe")
    assert meta["epoch"] == 10 and not meta["fallback"]
    assert rows[2]["loss_at_epoch"] is None and rows[2]["verdict"] == "–"


def _seed_run(stem, seed, losses, miou=None):
    return {**_run(stem, losses, miou), "seed": seed, "name": f"{stem} seed {seed}"}


def test_seeds_pair_ratios_by_seed_and_report_mean_std(tmp_path):
    ten = [3.0 - 0.2 * i for i in range(10)]  # epoch 10: 1.2
    runs = [_seed_run("cpe", 0, ten, [0.2] * 10), _seed_run("x", 0, [v * 1.1 for v in ten], [0.3] * 10),
            _seed_run("cpe", 1, [v * 2 for v in ten], [0.4] * 10), _seed_run("x", 1, [v * 2 for v in ten], [0.5] * 10)]
    rows, meta, notes = ablate.summarize_seeds(runs, "cpe")
    assert [(r["config"], r["seed"]) for r in rows] == [("cpe", 0), ("cpe", 1), ("x", 0), ("x", 1)]
    assert [r["loss_ratio"] for r in rows] == pytest.approx([1.0, 1.0, 1.1, 1.0])  # each against its own seed's baseline
    assert meta["epoch"] == 10 and meta["baseline"] == "cpe" and not notes
    agg = {a["config"]: a for a in ablate.aggregate(rows)}
    assert agg["x"]["loss_ratio_mean"] == pytest.approx(1.05) and agg["x"]["loss_ratio_std"] == pytest.approx(0.0707107)
    assert agg["x"]["loss_at_epoch_mean"] == pytest.approx((1.32 + 2.4) / 2) and agg["x"]["n"] == 2
    assert agg["x"]["best_val_miou_mean"] == pytest.approx(0.4) and agg["x"]["verdict"] == "acceptable"
    ablate.write_seed_tables(rows, list(agg.values()), meta, runs, tmp_path, notes)
    md = (tmp_path / "results.md").read_text()
    assert "| `x` | 2/2 | 1.8600 ± 0.7637 | 1.050 ± 0.071 | acceptable | 0.4000 ± 0.1414 |" in md
    assert "| `cpe` | 1 | done | 10 | 2.4000 | 1.000 | 0.4000 (1) |" in md
    assert len(list(csv.DictReader((tmp_path / "epochs.csv").open()))) == 40
    assert [r["config"] for r in csv.DictReader((tmp_path / "summary.csv").open())] == ["cpe", "x"]
    ablate.plot_seed_curves(runs, meta, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000


@pytest.mark.slow
def test_ablate_seeds_in_parallel_and_resume(tmp_path_factory):
    """Two configs x two seeds, two at a time; a rerun skips all four."""
    tmp, out, overrides = _two_configs(tmp_path_factory, "logical", "logical", epochs=1)
    cmd = [sys.executable, "-m", "pointmamba.cli.ablate", str(tmp / "cpe.yaml"), str(tmp / "logical.yaml"),
           "--out", str(out), "--seeds", "0", "1", "--jobs", "2", "--set", *overrides]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for stem in ("cpe", "logical"):
        for seed in (0, 1):
            work = out / stem / f"seed{seed}"
            assert load_config(work / "config.yaml")["seed"] == seed and (work / "ablate.log").is_file()
    md = (out / "results.md").read_text()
    assert "Seeds 0, 1" in md and "| `logical` | 2/2 |" in md and "| `cpe` (baseline) | 2/2 |" in md
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0 and again.stdout.count("finished (1 epochs), skipped") == 4
    bad = subprocess.run(cmd + ["seed=3"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "drop seed=" in bad.stderr


def test_runs_not_started_have_no_time():
    """A run not started yet has no train time (it used to count as 0 s and pull the mean down)."""
    ten = [3.0 - 0.2 * i for i in range(10)]
    runs = [_seed_run("cpe", 0, ten), _seed_run("cpe", 1, ten)]
    for r, t in zip(runs, (100.0, 120.0)):
        for x in r["records"]:
            x["epoch_s"] = t / 10
    runs.append({**_seed_run("cpe", 2, []), "status": "not run"})
    rows, _, _ = ablate.summarize_seeds(runs, "cpe")
    assert rows[2]["train_time_s"] is None
    agg = ablate.aggregate(rows)[0]
    assert agg["train_time_s_mean"] == pytest.approx(110.0) and agg["train_time_s_std"] == pytest.approx(14.1421356)


def test_one_run_has_no_spread_and_runs_not_started_reach_nothing(tmp_path):
    ten = [3.0 - 0.2 * i for i in range(10)]
    runs = [_seed_run("cpe", 0, ten), _seed_run("cpe", 1, ten), _seed_run("x", 0, [v * 1.1 for v in ten]),
            {**_seed_run("x", 1, []), "status": "not run"}]
    rows, meta, notes = ablate.summarize_seeds(runs, "cpe")
    assert [r["epochs_to_baseline_loss"] for r in rows] == [10, 10, "not reached", None]
    agg = ablate.aggregate(rows)
    assert agg[1]["loss_at_epoch_mean"] == pytest.approx(1.32) and agg[1]["loss_at_epoch_std"] is None
    ablate.write_seed_tables(rows, agg, meta, runs, tmp_path, notes)
    md = (tmp_path / "results.md").read_text()
    assert "| `x` | 1/2 | 1.3200 (one run) | 1.100 (one run) |" in md and "| not reached – |" in md
