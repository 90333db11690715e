"""pointmamba-ablate --seeds: RelPos diagnostics at init / epoch 1 / epoch 10 and the claims, seed by seed."""
from __future__ import annotations

import csv
import json

import pytest

from pointmamba.cli import ablate
from pointmamba.cli.ablation_diagnostics import (claim_lines, diagnostics_lines, diagnostics_points, diagnostics_rows,
                                                 read_diagnostics)


def _line(step, epoch, gate=None, contrib=None, relpos_ratio=None, modules=2):
    mods = {}
    for i in range(modules):
        m = {"enabled": float(gate is not None), "ramp": 1.0}
        if gate is not None:
            m.update(gate_mean=gate + 0.01 * i, contrib_ratio=contrib * (i + 1))
        mods[f"enc{i}.order0"] = m
    groups = {"cpe": {"ratio": 0.5}, "mixer": {"ratio": 1e-3}}
    if relpos_ratio is not None:
        groups["relpos"] = {"ratio": relpos_ratio}
    return {"step": step, "epoch": epoch, "modules": mods, "groups": groups}


def _write(path, lines, tail=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail)


def test_points_pick_init_and_each_epochs_last_line(tmp_path):
    lines = [_line(1, 1, 0.12, 0.01, 1e-3), _line(3, 1, 0.13, 0.02, 2e-3), _line(4, 2, 0.9, 0.9, 9.0),
             _line(6, 2, 0.2, 0.05, 5e-4), _line(6, 2, 0.25, 0.06, 6e-4)]  # step 6 again (resumed): last wins
    _write(tmp_path / "d.jsonl", lines, tail='{"step": 7, "ep')  # cut short by a crash
    with pytest.warns(UserWarning, match=r"d\.jsonl: line 6 is cut short"):
        got = read_diagnostics(tmp_path / "d.jsonl")
    assert sorted(got) == [1, 3, 4, 6]
    pts = diagnostics_points(got, 2)
    assert list(pts) == ["init", "ep 1", "ep 2"]
    assert pts["init"]["step"] == 1 and pts["ep 1"]["step"] == 3 and pts["ep 2"]["step"] == 6
    assert pts["ep 1"]["gate_mean"] == pytest.approx(0.135) and pts["ep 1"]["contrib_ratio"] == pytest.approx(0.03)
    assert pts["ep 2"]["grad_ratio_relpos"] == pytest.approx(6e-4) and pts["ep 2"]["grad_ratio_cpe"] == 0.5
    assert diagnostics_points(got, 10)["ep 10"] is None  # not reached
    assert read_diagnostics(tmp_path / "absent.jsonl") == {}
    (tmp_path / "bad.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match="bad.jsonl: line 2"):
        read_diagnostics(tmp_path / "bad.jsonl")


def test_warmup_off_and_no_relpos(tmp_path):
    _write(tmp_path / "w" / "diagnostics.jsonl", [_line(1, 1), _line(2, 1), _line(4, 2, 0.1, 0.01, 1e-3)])
    _write(tmp_path / "c" / "diagnostics.jsonl", [_line(1, 1, modules=0), _line(2, 1, modules=0)])
    runs = [{"stem": "warm", "seed": 0, "dir": tmp_path / "w"}, {"stem": "cpe", "seed": 0, "dir": tmp_path / "c"}]
    rows = diagnostics_rows(runs, 2)
    assert [(r["config"], r["point"], r["relpos"]) for r in rows] == [
        ("warm", "init", "off"), ("warm", "ep 1", "off"), ("warm", "ep 2", "on"),
        ("cpe", "init", "none"), ("cpe", "ep 1", "none")]
    assert rows[0]["gate_mean"] is None and rows[0]["grad_ratio_relpos"] is None
    md = "\n".join(diagnostics_lines(rows))
    assert "| `warm` | init | off | – | – | – | 0.5 (one run) |" in md
    assert "| `warm` | ep 2 | on | 0.105 (one run) | 0.015 (one run) | 0.001 (one run) | 0.5 (one run) |" in md
    assert "`cpe`" not in md  # no RelPos modules: not in the diagnostics table


def _rows(losses_by_config, miou=0.3):
    """summarize_seeds rows from {config: [epoch-10 loss per seed]}."""
    runs = []
    for config, per_seed in losses_by_config.items():
        for seed, loss10 in enumerate(per_seed):
            recs = [{"epoch": e, "train_loss": loss10 + (10 - e) * 0.1, "val_miou": miou} for e in range(1, 11)]
            runs.append({"stem": config, "seed": seed, "name": f"{config} seed {seed}", "status": "done",
                         "records": recs, "cfg": {}})
    rows, meta, _ = ablate.summarize_seeds(runs, "cpe")
    return rows, meta


def test_claims_hold_fail_or_are_not_shown():
    rows, meta = _rows({"cpe": [1.0, 1.1, 0.9], "cpe_relpos_naive": [1.2, 1.3, 1.0],
                        "cpe_relpos_fixed": [1.05, 1.3, 0.95], "cpe_relpos_quantile": [1.0, 1.35, 0.9],
                        "cpe_relpos_warmup": [1.1, 1.4, 1.0], "relpos_abs": [0.99, 1.2, 0.89]})
    md = "\n".join(claim_lines(rows, meta["epoch"], ablate.ACCEPT))
    assert "| naive init converges slower than CPE | `cpe_relpos_naive` | `cpe` | 3/3 | +0.1667 ± 0.0577 |" in md
    assert "3/3 | +0.1667 ± 0.0577 | +0.0000 ± 0.0000 | **holds** (t = 5.00, df 2) |" in md
    # fixed: ratios 1.05, 1.18, 1.056: seed 1 above 1.1
    assert "| `cpe_relpos_fixed` | ratio to baseline | 2/3 | ratio 1.096 ± 0.075 | – | not shown (seeds disagree) (t = -0.10, df 2) |" in md
    assert "quantile normalization helps" in md and "| 2/3 |" in md
    assert "warm-up helps (vs quantile normalization without it) | `cpe_relpos_warmup` | `cpe_relpos_quantile` | 0/3" in md
    assert "| 0/3 | +0.0833 ± 0.0289 | +0.0000 ± 0.0000 | **does not hold** (t = 5.00, df 2) |" in md
    # every seed agrees, but the differences are small against their spread: not called a result
    assert "| 3/3 | -0.0567 ± 0.0808 | +0.0000 ± 0.0000 | same direction in every seed, not significant (t = -1.21" in md
    rows, meta = _rows({"cpe": [1.0, 1.1], "cpe_relpos_naive": [1.2, 1.3]})
    assert "CPE and RelPos conflict" not in "\n".join(claim_lines(rows, meta["epoch"], ablate.ACCEPT))  # not run


def test_seed_tables_write_diagnostics_and_claims(tmp_path):
    rows, meta = _rows({"cpe": [1.0, 1.1], "cpe_relpos_naive": [1.2, 1.3]})
    runs = []
    for config in ("cpe", "cpe_relpos_naive"):
        for seed in (0, 1):
            d = tmp_path / config / f"seed{seed}"
            n = 0 if config == "cpe" else 1
            _write(d / "diagnostics.jsonl", [_line(1, 1, 0.1, 0.01, 1e-3, modules=n), _line(21, 1, 0.2, 0.02, 1e-3, modules=n),
                                             _line(210, 10, 0.3, 0.03, 1e-4, modules=n)])
            recs = [{"epoch": e, "train_loss": 1.0 + (config != "cpe") * 0.2 + seed * 0.1 + (10 - e) * 0.1, "val_miou": 0.3}
                    for e in range(1, 11)]
            runs.append({"stem": config, "seed": seed, "name": f"{config} seed {seed}", "status": "done",
                         "records": recs, "cfg": {}, "dir": d})
    rows, meta, notes = ablate.summarize_seeds(runs, "cpe")
    ablate.write_seed_tables(rows, ablate.aggregate(rows), meta, runs, tmp_path, notes)
    md = (tmp_path / "results.md").read_text()
    assert "| `cpe_relpos_naive` | ep 10 | on | 0.300 ± 0.000 | 0.03 ± 0 | 0.0001 ± 0 | 0.5 ± 0 |" in md
    assert "| naive init converges slower than CPE | `cpe_relpos_naive` | `cpe` | 2/2 |" in md  # t undefined: zero spread
    assert md.index("## RelPos diagnostics") < md.index("## The design notes' claims") < md.index("## Every run")
    diag = list(csv.DictReader((tmp_path / "diagnostics.csv").open()))
    assert len(diag) == 12 and {d["point"] for d in diag} == {"init", "ep 1", "ep 10"}


def test_plot_diagnostics(tmp_path):
    from pointmamba.cli.ablation_diagnostics import plot_diagnostics

    _write(tmp_path / "r" / "diagnostics.jsonl", [_line(1, 1), _line(2, 1), _line(4, 2, 0.1, 0.01, 1e-3)])
    _write(tmp_path / "c" / "diagnostics.jsonl", [_line(1, 1, modules=0)])
    runs = [{"stem": "warm", "seed": 0, "dir": tmp_path / "r"}, {"stem": "cpe", "seed": 0, "dir": tmp_path / "c"}]
    assert plot_diagnostics(runs, tmp_path / "d.png") and (tmp_path / "d.png").stat().st_size > 10_000
    assert not plot_diagnostics(runs[1:], tmp_path / "none.png") and not (tmp_path / "none.png").exists()
