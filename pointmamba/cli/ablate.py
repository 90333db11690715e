#!/usr/bin/env python3
"""Run ablation configs with the same seed and budget and compare their training curves.

    pointmamba-ablate CONFIG [CONFIG ... | 'configs/ablation/*.yaml'] --out DIR [--set key=value ...] [--baseline STEM]
                      [--seeds 0 1 2] [--jobs N] [--no-progress] [--verbose]

Each config trains in its own subprocess (``tools/train.py C --out DIR/<stem> --set ...``; ``--no-progress``
and ``--verbose`` are passed on); a time estimate is printed before the first run starts
(``ablation_estimate.py``);
``--set`` overrides apply to every run (e.g. ``train.epochs=2``). Resumable: a run whose metrics.jsonl
holds every epoch is skipped, an interrupted one continues with ``--resume``. Writes ``DIR/results.md``
and ``DIR/results.csv`` (one row per run), ``DIR/epochs.csv`` (one row per run and epoch) and
``DIR/curves.png`` (train loss and val mIoU per epoch).

``--seeds 0 1 2`` runs every config once per seed (``seed=K``, run directory ``DIR/<stem>/seed<K>``);
each run's loss ratio and val mIoU difference are taken against the baseline run of the same seed, and
``results.md`` / ``summary.csv`` give mean ± std over the seeds per config (curves: mean, band min-max), the
RelPos diagnostics at init / epoch 1 / epoch 10 from each run's ``diagnostics.jsonl`` (``diagnostics.csv``) and
the claims the ablation configs were written to test, checked seed by seed (``ablation_diagnostics.py``). ``--jobs N``
trains N runs at once, each with cpu_count // N torch threads unless OMP_NUM_THREADS is set, and writes
each run's output to its ``ablate.log``.

Verdicts (docs/ablations.md says why): against the baseline (the config named ``cpe``, or ``--baseline``),
1. on validation: each config's best val mIoU minus the baseline's, paired by seed, mean ± sample std over the
   seeds: "better" / "worse" where the mean lies beyond one std of zero, "within the seed spread" otherwise
   (one seed has no spread: "one seed: no spread");
2. on training speed, beside it: the train loss at epoch 10 over the baseline's (<= 1.1 acceptable, > 1.2 needs
   adjustment), and the epochs a config needs to reach the baseline's epoch-10 loss. With fewer than 10 epochs
   the last epoch all runs share is used instead.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..utils.atomic_file import atomic_write, save_figure, write_csv
from ..config import flatten
from ._common import parse_args, run_main
from .ablation_diagnostics import claim_lines, diagnostics_lines, diagnostics_rows, line_style, plot_diagnostics
from ..training.work_dir import read_metrics as read_metric_lines, resume_checkpoint
from .ablation_table import format_pm, mean_std

TRAIN_MODULE = "pointmamba.cli.train"  # run as python -m, from this package
CRITERION_EPOCH = 10
ACCEPT, ADJUST = 1.1, 1.2
BUDGET_KEYS = ("seed", "train.epochs", "train.batch_size", "train.max_steps_per_epoch", "train.lr", "train.schedule")


def expand_configs(items: list[str]) -> list[Path]:
    """Config paths from explicit files and globs, in the given order, duplicates dropped."""
    out: list[Path] = []
    for item in items:
        matches = sorted(glob.glob(item)) if any(ch in item for ch in "*?[") else [item]
        if not matches:
            raise FileNotFoundError(f"no config matches {item!r}")
        for m in matches:
            p = Path(m)
            if p.name.startswith("_"):
                continue  # shared bases (configs/ablation/_base.yaml) are not runs of their own
            if not p.is_file():
                raise FileNotFoundError(f"config file not found: {p}")
            if p.resolve() not in [q.resolve() for q in out]:
                out.append(p)
    if not out:
        raise ValueError("no configs to run (files starting with '_' are bases and are skipped)")
    stems = [p.stem for p in out]
    dup = sorted({s for s in stems if stems.count(s) > 1})
    if dup:
        raise ValueError(f"configs share a file name (their run directories would clash): {', '.join(dup)}")
    return out


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Epoch records of a metrics.jsonl (last record per epoch wins), sorted by epoch; [] if absent."""
    by_epoch = {rec["epoch"]: rec for rec in read_metric_lines(path)}
    return [by_epoch[e] for e in sorted(by_epoch)]


def _config_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in set(fa) | set(fb) if k != "work_dir" and not k.startswith("_") and fa.get(k) != fb.get(k))


def plan_run(config: Path, out: Path, overrides: list[str], seed: int | None = None) -> dict[str, Any]:
    """What one run needs: {stem, seed, name, dir, epochs, cfg, overrides, records, status}; status "done" when
    finished, "todo" otherwise. Raises if its directory holds a run with other settings."""
    import yaml

    from pointmamba.config import load_config

    stem = config.stem
    work = out / stem if seed is None else out / stem / f"seed{seed}"
    overrides = overrides + ([] if seed is None else [f"seed={seed}"])
    cfg = load_config(config, overrides + [f"work_dir={work}"])
    epochs = cfg["train"]["epochs"]
    info: dict[str, Any] = {"stem": stem, "seed": seed, "name": stem if seed is None else f"{stem} seed {seed}",
                            "config": config, "dir": work, "epochs": epochs, "cfg": cfg, "overrides": overrides}
    records = read_metrics(work / "metrics.jsonl")
    saved = work / "config.yaml"
    if saved.is_file() and (records or resume_checkpoint(work) is not None):
        diff = _config_diff(yaml.safe_load(saved.read_text()) or {}, cfg)
        if diff:
            raise ValueError(
                f"{work} holds a run of {config} with different settings ({', '.join(diff[:6])}"
                f"{', ...' if len(diff) > 6 else ''}); delete that directory or use another --out"
            )
    done = len(records) >= epochs and records[-1]["epoch"] >= epochs
    info.update(status="done" if done else "todo", records=records)
    return info


def train_run(info: dict[str, Any], python: str, threads: int | None = None, log: bool = False,
              flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Train a planned run unless finished (resuming an interrupted one); updates and returns ``info``.

    ``threads`` sets OMP_NUM_THREADS for the run unless the environment has it; ``log`` sends the run's
    output to its ``ablate.log`` (parallel runs) instead of this process's; ``flags`` go to tools/train.py
    (``--no-progress``, ``--verbose``)."""
    name, work, epochs = info["name"], info["dir"], info["epochs"]
    if info["status"] == "done":
        print(f"[ablate] {name}: finished ({epochs} epochs), skipped", flush=True)
        return info
    records = info["records"]
    cmd = [python, "-m", TRAIN_MODULE, str(info["config"]), "--out", str(work), *flags]
    if info["overrides"]:
        cmd += ["--set", *info["overrides"]]
    if resume_checkpoint(work) is not None:  # last.pth, or best.pth of a run killed between its first two saves
        cmd.append("--resume")
        print(f"[ablate] {name}: resuming after epoch {records[-1]['epoch'] if records else '?'} of {epochs}", flush=True)
    else:
        cmd.append("--overwrite")  # remains of a run that died before its first checkpoint (metric lines)
        print(f"[ablate] {name}: training {epochs} epochs -> {work}", flush=True)
    print("[ablate] $ " + " ".join(cmd), flush=True)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the directory holding pointmamba/
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if threads is not None and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(threads)
    if log:
        work.mkdir(parents=True, exist_ok=True)
        fd = os.open(work / "ablate.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "ab") as fh:  # never through a link planted in the run's directory
            rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    else:
        rc = subprocess.run(cmd, env=env).returncode
    records = read_metrics(work / "metrics.jsonl")
    if rc != 0:
        where = work / ("ablate.log" if log else "train.log")
        print(f"[ablate] {name}: FAILED (exit code {rc}); see {where}", file=sys.stderr, flush=True)
        info.update(status=f"failed (exit {rc})", records=records)
    elif not records or records[-1]["epoch"] < epochs:
        info.update(status="incomplete", records=records)
    else:
        print(f"[ablate] {name}: done", flush=True)
        info.update(status="done", records=records)
    return info


def run_all(plans: list[dict[str, Any]], python: str, jobs: int = 1, flags: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Train every planned run, ``jobs`` at a time (in the given order; results in that order too)."""
    if jobs <= 1:
        return [train_run(p, python, flags=flags) for p in plans]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda p: train_run(p, python, threads=threads, log=True, flags=flags), plans))


# ---------------------------------------------------------------------------------------------- analysis
def verdict(ratio: float | None) -> str:
    """The criterion's word for a loss ratio to the baseline."""
    if ratio is None:
        return "–"
    return "acceptable" if ratio <= ACCEPT else "borderline" if ratio <= ADJUST else "needs adjustment"


def miou_verdict(mean: float | None, std: float | None) -> str:
    """The verdict on a config's val mIoU difference to the baseline (mean, sample std over seeds)."""
    if mean is None:
        return "–"
    if std is None:
        return "one seed: no spread"
    if abs(mean) <= std:
        return "within the seed spread"
    return "better" if mean > 0 else "worse"


def _loss_at(records: list[dict[str, Any]], epoch: int) -> float | None:
    for r in records:
        if r["epoch"] == epoch:
            return float(r["train_loss"])
    return None


def _fmt(x: Any, spec: str = ".4f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return format(x, spec) if isinstance(x, float) else str(x)


def criterion_epoch(runs: list[dict[str, Any]]) -> int:
    """Epoch 10, or the last epoch every finished run reached when that is earlier (0: none has one)."""
    # a failed run cut short does not drag it down
    done = [r for r in runs if r["records"] and r["status"] == "done"] or [r for r in runs if r["records"]]
    last_common = min((r["records"][-1]["epoch"] for r in done), default=0)
    return CRITERION_EPOCH if last_common >= CRITERION_EPOCH else last_common


def summarize(runs: list[dict[str, Any]], baseline: str | None,
              epoch: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One row per run with the criterion columns; plus what the criterion compared (epoch, baseline).

    ``epoch`` fixes the criterion epoch (several seeds share one); by default :func:`criterion_epoch`."""
    base = next((r for r in runs if r["stem"] == baseline), None) if baseline else None
    crit_epoch = criterion_epoch(runs) if epoch is None else epoch
    base_loss = _loss_at(base["records"], crit_epoch) if base and base["records"] else None
    base_miou = max((x["val_miou"] for x in base["records"] if x.get("val_miou") is not None), default=None) if base else None
    meta = {"baseline": baseline if base else None, "epoch": crit_epoch, "baseline_loss": base_loss,
            "fallback": crit_epoch != CRITERION_EPOCH}
    rows = []
    for r in runs:
        recs = r["records"]
        miou = [(x["epoch"], x["val_miou"]) for x in recs if x.get("val_miou") is not None]
        best = max(miou, key=lambda t: t[1]) if miou else (None, None)
        loss = _loss_at(recs, crit_epoch) if crit_epoch else None
        ratio = loss / base_loss if loss is not None and base_loss else None
        reach = None
        if base_loss is not None and recs:
            reach = next((x["epoch"] for x in recs if float(x["train_loss"]) <= base_loss), None)
        row = {
            "config": r["stem"],
            "status": r["status"],
            "epochs_run": recs[-1]["epoch"] if recs else 0,
            "final_train_loss": float(recs[-1]["train_loss"]) if recs else None,
            "loss_at_epoch": loss,
            "loss_ratio": ratio,
            "verdict": verdict(ratio),
            "epochs_to_baseline_loss": reach if reach is not None else (None if base_loss is None or not recs else "not reached"),
            "final_val_miou": miou[-1][1] if miou else None,
            "best_val_miou": best[1],
            "best_epoch": best[0],
            "miou_delta": best[1] - base_miou if best[1] is not None and base_miou is not None else None,
            "train_time_s": sum(float(x.get("epoch_s", 0.0)) for x in recs) if recs else None,  # not run: no time
        }
        row["miou_verdict"] = miou_verdict(row["miou_delta"], None)
        rows.append(row)
    return rows, meta


def _criterion(meta: dict[str, Any], lines: list[str]) -> str | None:
    """The epoch the loss verdict reads ("epoch N", flagged where fewer epochs were run than the criterion);
    None, with the reason added to ``lines``, where no run finished an epoch or there is no baseline."""
    e = meta["epoch"]
    if e == 0:
        lines.append("No run has finished an epoch yet: nothing to compare.")
        return None
    if meta["baseline"] is None:
        lines.append("No baseline run (config stem `cpe` or `--baseline`): loss ratios are not computed.")
        return None
    return f"epoch {e}" + (f" (**fewer than {CRITERION_EPOCH} epochs were run: last common epoch {e} used "
                           f"instead of epoch {CRITERION_EPOCH}**)" if meta["fallback"] else "")


def write_tables(rows: list[dict[str, Any]], meta: dict[str, Any], runs: list[dict[str, Any]], out: Path,
                 notes: list[str]) -> None:
    e = meta["epoch"]
    write_csv(out / "results.csv", rows)
    write_csv(out / "epochs.csv", [{"config": r["stem"], "epoch": x["epoch"], "train_loss": x["train_loss"],
                                    "val_miou": x.get("val_miou", "")} for r in runs for x in r["records"]],
              ["config", "epoch", "train_loss", "val_miou"])

    base = meta["baseline"]
    lines = ["# Ablation results", ""]
    crit = _criterion(meta, lines)
    if crit is not None:
        lines.append(f"Baseline `{base}`. Verdict on validation: each config's best val mIoU minus the baseline's; "
                     "one seed gives no spread to judge it by (`--seeds 0 1 2`). Beside it, training speed: train "
                     f"loss at {crit} ({_fmt(meta['baseline_loss'])} for the baseline) over the baseline's, ≤ {ACCEPT} "
                     f"acceptable, > {ADJUST} needs adjustment; last column: first epoch whose train loss reaches the "
                     f"baseline's epoch-{e} loss. docs/ablations.md says why.")
    lines += [""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    head = ["config", "status", "epochs", "final loss", f"loss @ ep {e}", f"ratio vs {base or '–'}", "loss verdict",
            "final val mIoU", "best val mIoU (epoch)", f"Δ best val mIoU vs {base or '–'}", "val mIoU verdict",
            "time (s)", f"epochs to baseline ep-{e} loss"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        best = (f"{_fmt(row['best_val_miou'])} ({row['best_epoch']})" if row["best_val_miou"] is not None else "–")
        cells = [f"`{row['config']}`" + (" (baseline)" if row["config"] == base else ""), row["status"],
                 str(row["epochs_run"]), _fmt(row["final_train_loss"]), _fmt(row["loss_at_epoch"]),
                 _fmt(row["loss_ratio"], ".3f"), row["verdict"], _fmt(row["final_val_miou"]), best,
                 _fmt(row["miou_delta"], "+.4f"), "baseline" if row["config"] == base else row["miou_verdict"],
                 _fmt(row["train_time_s"] if row["epochs_run"] else None, ".0f"), _fmt(row["epochs_to_baseline_loss"])]
        lines.append("| " + " | ".join(cells) + " |")
    epochs = sorted({x["epoch"] for r in runs for x in r["records"]})
    if epochs:
        lines += ["", "## Train loss per epoch", "", "| config | " + " | ".join(str(x) for x in epochs) + " |",
                  "|---|" + "---|" * len(epochs)]
        for r in runs:
            by = {x["epoch"]: x["train_loss"] for x in r["records"]}
            lines.append(f"| `{r['stem']}` | " + " | ".join(_fmt(by.get(x)) for x in epochs) + " |")
    atomic_write(out / "results.md", ("\n".join(lines) + "\n").encode())


def _epoch_axis(ax: Any) -> None:
    """Whole epochs on the x axis (a 2-epoch run was labelled 1.2, 1.4, ...), and a light grid."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _save_panels(fig: Any, axes: tuple[Any, ...], path: Path) -> None:
    """Integer epochs and a legend on each panel that has lines, then the figure saved and closed."""
    import matplotlib.pyplot as plt

    for ax in axes:
        _epoch_axis(ax)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def plot_curves(runs: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_miou) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in runs:
        recs = r["records"]
        if not recs:
            continue
        style = {"linewidth": 2.5, "color": "black"} if r["stem"] == meta["baseline"] else {}
        ax_loss.plot([x["epoch"] for x in recs], [x["train_loss"] for x in recs], marker=".", label=r["stem"], **style)
        val = [(x["epoch"], x["val_miou"]) for x in recs if x.get("val_miou") is not None]
        if val:
            ax_miou.plot(*zip(*val), marker=".", label=r["stem"], **style)
    if meta["baseline_loss"] is not None:
        ax_loss.axhline(meta["baseline_loss"], color="grey", linestyle=":", label=f"{meta['baseline']} @ ep {meta['epoch']}")
    ax_loss.set(xlabel="epoch", ylabel="train loss", title="train loss")
    ax_miou.set(xlabel="epoch", ylabel="val mIoU", title="val mIoU")
    _save_panels(fig, (ax_loss, ax_miou), path)


def summarize_seeds(runs: list[dict[str, Any]], baseline: str | None) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Rows of :func:`summarize` per seed (ratios against the same seed's baseline run, one criterion epoch
    for all), ordered by config (first seen) then seed; the criterion meta; budget notes per seed."""
    epoch = criterion_epoch(runs)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    meta: dict[str, Any] = {}
    base_found = False
    for seed in sorted({r["seed"] for r in runs}):
        mine = [r for r in runs if r["seed"] == seed]
        seed_rows, meta = summarize(mine, baseline, epoch)
        base_found |= meta["baseline"] is not None
        rows += [{"config": row["config"], "seed": seed, **{k: v for k, v in row.items() if k != "config"}} for row in seed_rows]
        notes += [f"seed {seed}: {n}" for n in budget_notes(mine, ignore=("seed",))]
    meta.update(baseline=baseline if base_found else None, baseline_loss=None)  # one baseline loss per seed
    order = {stem: i for i, stem in enumerate(dict.fromkeys(r["stem"] for r in runs))}
    rows.sort(key=lambda row: (order[row["config"]], row["seed"]))
    return rows, meta, notes


AGGREGATED = ("loss_at_epoch", "loss_ratio", "final_train_loss", "best_val_miou", "final_val_miou", "miou_delta",
              "train_time_s")


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per config (first-seen order), mean and sample std over its seeds of :data:`AGGREGATED` columns;
    ``n`` counts the runs with a value at the criterion epoch."""
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == config]
        row: dict[str, Any] = {"config": config, "seeds": " ".join(str(r["seed"]) for r in mine),
                               "done": sum(r["status"] == "done" for r in mine)}
        for key in AGGREGATED:
            mean, std, n = mean_std([r[key] for r in mine])
            row[f"{key}_mean"], row[f"{key}_std"] = mean, std
            if key == "loss_at_epoch":
                row["n"] = n
        row["verdict"] = verdict(row["loss_ratio_mean"])
        row["miou_verdict"] = miou_verdict(row["miou_delta_mean"], row["miou_delta_std"])
        row["epochs_to_baseline_loss"] = " ".join(_fmt(r["epochs_to_baseline_loss"]) for r in mine)
        out.append(row)
    return out


def _pm(row: dict[str, Any], key: str, spec: str = ".4f") -> str:
    return format_pm(row[f"{key}_mean"], row[f"{key}_std"], spec)


def write_seed_tables(rows: list[dict[str, Any]], agg: list[dict[str, Any]], meta: dict[str, Any],
                      runs: list[dict[str, Any]], out: Path, notes: list[str]) -> None:
    """``summary.csv`` (mean/std per config), ``results.csv`` and ``epochs.csv`` (per run, with its seed),
    ``diagnostics.csv`` (per run and point, when runs wrote diagnostics) and ``results.md`` (mean ± std per
    config, RelPos diagnostics, the claims, then every run)."""
    write_csv(out / "summary.csv", agg)
    write_csv(out / "results.csv", rows)
    write_csv(out / "epochs.csv", [{"config": r["stem"], "seed": r["seed"], "epoch": x["epoch"], "train_loss": x["train_loss"],
                                    "val_miou": x.get("val_miou", "")} for r in runs for x in r["records"]],
              ["config", "seed", "epoch", "train_loss", "val_miou"])

    e, base = meta["epoch"], meta["baseline"]
    seeds = sorted({r["seed"] for r in runs})
    lines = ["# Ablation results", "", f"Seeds {', '.join(map(str, seeds))}: mean ± sample std over the seeds of each config."]
    crit = _criterion(meta, lines)
    if crit is not None:
        lines.append(f"Baseline `{base}`. Verdict on validation: each run's best val mIoU minus the baseline run's of the "
                     "same seed, then mean ± std over the seeds; \"better\" or \"worse\" where the mean lies more than "
                     "one std from zero, else \"within the seed spread\". Beside it, training speed at "
                     f"{crit}: each run's train loss divided by the baseline run's of the same seed, then mean ± std; "
                     f"loss verdict on the mean ratio (≤ {ACCEPT} acceptable, > {ADJUST} needs adjustment). Last "
                     "column: per seed, the first epoch whose loss reaches that seed's baseline loss. "
                     "docs/ablations.md says why.")
    lines += [""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    head = ["config", "runs done", f"loss @ ep {e}", f"ratio vs {base or '–'}", "loss verdict", "best val mIoU",
            f"Δ best val mIoU vs {base or '–'} (paired by seed)", "val mIoU verdict", "final val mIoU", "time (s)",
            f"epochs to baseline ep-{e} loss"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in agg:
        cells = [f"`{row['config']}`" + (" (baseline)" if row["config"] == base else ""),
                 f"{row['done']}/{len(row['seeds'].split())}", _pm(row, "loss_at_epoch"), _pm(row, "loss_ratio", ".3f"),
                 row["verdict"], _pm(row, "best_val_miou"), _pm(row, "miou_delta", "+.4f"),
                 "baseline" if row["config"] == base else row["miou_verdict"], _pm(row, "final_val_miou"),
                 _pm(row, "train_time_s", ".0f"), row["epochs_to_baseline_loss"]]
        lines.append("| " + " | ".join(cells) + " |")
    diag_rows = diagnostics_rows(runs, e)
    if diag_rows:
        write_csv(out / "diagnostics.csv", diag_rows)
    lines += diagnostics_lines(diag_rows)
    if base is not None and e:
        lines += claim_lines(rows, e, ACCEPT)
    lines += ["", "## Every run", "", "| config | seed | status | epochs | loss @ ep " + str(e) + " | ratio | best val mIoU (epoch) |",
              "|---|---|---|---|---|---|---|"]
    for row in rows:
        best = (f"{_fmt(row['best_val_miou'])} ({row['best_epoch']})" if row["best_val_miou"] is not None else "–")
        lines.append(f"| `{row['config']}` | {row['seed']} | {row['status']} | {row['epochs_run']} | "
                     f"{_fmt(row['loss_at_epoch'])} | {_fmt(row['loss_ratio'], '.3f')} | {best} |")
    atomic_write(out / "results.md", ("\n".join(lines) + "\n").encode())


def plot_seed_curves(runs: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    """Per config: mean over seeds per epoch (over the seeds that reached it), band from min to max, of the
    train loss, the train loss divided by the same seed's baseline loss at that epoch, and val mIoU."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = {(r["seed"], int(x["epoch"])): float(x["train_loss"])
            for r in runs if r["stem"] == meta["baseline"] for x in r["records"]}
    fig, (ax_loss, ax_ratio, ax_miou) = plt.subplots(1, 3, figsize=(18, 4.8))
    for i, stem in enumerate(dict.fromkeys(r["stem"] for r in runs)):
        mine = [r for r in runs if r["stem"] == stem]
        style = {"linewidth": 2.5, "color": "black"} if stem == meta["baseline"] else line_style(i)
        panels = (
            (ax_loss, [(int(x["epoch"]), float(x["train_loss"])) for r in mine for x in r["records"]]),
            (ax_ratio, [(int(x["epoch"]), float(x["train_loss"]) / base[(r["seed"], int(x["epoch"]))])
                        for r in mine for x in r["records"] if (r["seed"], int(x["epoch"])) in base]),
            (ax_miou, [(int(x["epoch"]), float(x["val_miou"])) for r in mine for x in r["records"]
                       if x.get("val_miou") is not None]),
        )
        for ax, points in panels:
            by: dict[int, list[float]] = {}
            for e, v in points:
                by.setdefault(e, []).append(v)
            if not by:
                continue
            ep = sorted(by)
            line, = ax.plot(ep, [statistics.mean(by[k]) for k in ep], marker=".", label=stem, **style)
            ax.fill_between(ep, [min(by[k]) for k in ep], [max(by[k]) for k in ep], color=line.get_color(), alpha=0.12)
    ax_loss.set(xlabel="epoch", ylabel="train loss", title="train loss (mean over seeds, band min-max)")
    ax_ratio.set(xlabel="epoch", ylabel=f"train loss / {meta['baseline']}'s (same seed, same epoch)",
                 title=f"train loss relative to {meta['baseline']}")
    ax_ratio.axhline(ACCEPT, color="grey", linestyle=":", label=f"{ACCEPT}x")
    ax_miou.set(xlabel="epoch", ylabel="val mIoU", title="val mIoU (mean over seeds, band min-max)")
    _save_panels(fig, (ax_loss, ax_ratio, ax_miou), path)


def budget_notes(runs: list[dict[str, Any]], ignore: tuple[str, ...] = ()) -> list[str]:
    """Warnings where runs differ in seed or training budget (the comparison assumes they do not)."""
    notes = []
    for key in BUDGET_KEYS:
        if key in ignore:
            continue
        values = {r.get("name", r["stem"]): flatten(r["cfg"]).get(key) for r in runs}
        if len({json.dumps(v) for v in values.values()}) > 1:
            notes.append(f"**runs differ in `{key}`**: " + ", ".join(f"{s}={v}" for s, v in values.items()))
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="config files or globs (files named _*.yaml are skipped)")
    parser.add_argument("--out", required=True, help="output directory (one run directory per config stem)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="overrides applied to every run, e.g. --set train.epochs=2")
    parser.add_argument("--baseline", default=None, help="stem of the baseline config (default: cpe)")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, metavar="SEED",
                        help="run every config once per seed (DIR/<stem>/seed<K>) and report mean ± std over them")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once (default 1)")
    parser.add_argument("--no-train", action="store_true", help="only collect finished/partial runs and write the tables")
    args = parse_args(parser, backends=False)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    if args.seeds is not None:
        if len(set(args.seeds)) != len(args.seeds):
            raise ValueError(f"--seeds has duplicates: {args.seeds}")
        if any(o.split("=", 1)[0].strip() == "seed" for o in args.overrides):
            raise ValueError("--seeds sets each run's seed: drop seed=... from --set")

    from pointmamba.config import load_config

    configs = expand_configs(args.configs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for c in configs:  # fail on a bad config before hours of training
        load_config(c, args.overrides)
    seeds: list[int | None] = list(args.seeds) if args.seeds is not None else [None]
    # every run's directory checked before any trains; seed-major, so the first runs give a complete table
    plans = [plan_run(c, out, args.overrides, seed) for seed in seeds for c in configs]
    if args.no_train:
        for p in plans:
            p["status"] = "done" if p["status"] == "done" else ("incomplete" if p["records"] else "not run")
        runs = plans
    else:
        from .ablation_estimate import estimate

        line = estimate(plans, args.jobs)
        if line:
            print(line, flush=True)
        flags = tuple(f for f, on in (("--no-progress", args.no_progress), ("--verbose", args.verbose)) if on)
        runs = run_all(plans, sys.executable, args.jobs, flags)
    baseline = args.baseline or "cpe"
    if args.baseline and args.baseline not in [r["stem"] for r in runs]:
        raise ValueError(f"--baseline {args.baseline!r} is not among the configs: {', '.join(r['stem'] for r in runs)}")
    if args.seeds is None:
        rows, meta = summarize(runs, baseline)
        write_tables(rows, meta, runs, out, budget_notes(runs))
        plot_curves(runs, meta, out / "curves.png")
        written = ["results.md", "results.csv", "epochs.csv", "curves.png"]
    else:
        rows, meta, notes = summarize_seeds(runs, baseline)
        write_seed_tables(rows, aggregate(rows), meta, runs, out, notes)
        plot_seed_curves(runs, meta, out / "curves.png")
        written = ["results.md", "summary.csv", "results.csv", "epochs.csv", "curves.png"]
        written += ["diagnostics.csv"] if (out / "diagnostics.csv").is_file() else []
        if plot_diagnostics(runs, out / "diagnostics.png"):
            written.append("diagnostics.png")
    print((out / "results.md").read_text())
    print("[ablate] wrote " + ", ".join(str(out / w) for w in written))
    failed = [r["name"] for r in runs if r["status"].startswith("failed")]
    if failed:
        raise SystemExit(f"error: {len(failed)} run(s) failed: {', '.join(failed)}")


def cli() -> None:
    """Entry point of ``pointmamba-ablate``."""
    run_main(main)


if __name__ == "__main__":
    cli()
