"""What ``pointmamba-ablate --seeds`` adds to its table: RelPos diagnostics at init / epoch 1 / epoch 10, and the
design notes' claims tested seed by seed.

Diagnostics come from each run's ``diagnostics.jsonl`` (written by the diagnostics hook; the ablation base
turns on ``diagnostics.epoch_ends`` so that the first step and every epoch's last step have a line). Per
point: gate mean and contribution ratio std(ramp*scale*gate*pos)/std(feat), each averaged over the active
RelPos modules, and the grad-norm/param-norm ratios of the RelPos and CPE parameter groups.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..utils.atomic_file import save_figure
from ..training.work_dir import read_jsonl
from .ablation_table import format_pm, mean_std

DIAG_KEYS = ("gate_mean", "contrib_ratio", "grad_ratio_relpos", "grad_ratio_cpe")
DIAG_LABELS = {"gate_mean": "gate mean", "contrib_ratio": "contribution ratio",
               "grad_ratio_relpos": "grad/param RelPos", "grad_ratio_cpe": "grad/param CPE"}

# (claim, config A, config B or None, kind): "a_slower" holds in a seed when A's criterion-epoch loss is above
# B's; "a_better" when it is below; "ratio_accept" when A's loss ratio to the baseline is <= ACCEPT
CLAIMS: tuple[tuple[str, str, str | None, str], ...] = (
    ("naive init converges slower than CPE", "cpe_relpos_naive", "cpe", "a_slower"),
    ("the fixed init reaches a loss <= 1.1x the CPE baseline", "cpe_relpos_fixed", None, "ratio_accept"),
    ("quantile normalization helps (vs the fixed init without it)", "cpe_relpos_quantile", "cpe_relpos_fixed", "a_better"),
    ("warm-up helps (vs quantile normalization without it)", "cpe_relpos_warmup", "cpe_relpos_quantile", "a_better"),
    ("CPE and RelPos conflict: RelPos (+abs) without CPE beats RelPos with CPE", "relpos_abs", "cpe_relpos_quantile",
     "a_better"),
)


T_95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812)
"""One-sided 95 % quantile of Student's t for 1..10 degrees of freedom (paired differences over seeds)."""


def t_stat(xs: list[float], centre: float = 0.0) -> float | None:
    """Paired t statistic of ``xs`` against ``centre`` (None with fewer than 2 values or zero spread)."""
    if len(xs) < 2:
        return None
    sd = statistics.stdev(xs)
    return None if sd == 0 else (statistics.mean(xs) - centre) / (sd / len(xs) ** 0.5)


def line_style(i: int) -> dict[str, Any]:
    """Colour and dash of the i-th config's line: 20 colours, then dashed, so a dozen configs stay apart."""
    import matplotlib

    colors = matplotlib.colormaps["tab20"].colors
    return {"color": colors[(2 * i) % 20 + (2 * i) // 20 % 2], "linestyle": "-" if i < 10 else "--"}


def read_diagnostics(path: Path) -> dict[int, dict[str, Any]]:
    """Lines of a diagnostics.jsonl by step (a resumed run's repeated step: the last line wins); {} if absent."""
    return {int(rec["step"]): rec for rec in read_jsonl(path)}


def point_summary(rec: dict[str, Any]) -> dict[str, Any]:
    """One diagnostics line -> {relpos: "none" | "off" | "on", gate_mean, contrib_ratio, grad_ratio_*}."""
    modules = rec.get("modules", {})
    active = [m for m in modules.values() if "gate_mean" in m]
    groups = rec.get("groups", {})
    out: dict[str, Any] = {"step": rec["step"], "relpos": "on" if active else ("off" if modules else "none")}
    out["gate_mean"] = statistics.mean(m["gate_mean"] for m in active) if active else None
    out["contrib_ratio"] = statistics.mean(m["contrib_ratio"] for m in active) if active else None
    for g in ("relpos", "cpe"):
        out[f"grad_ratio_{g}"] = groups[g]["ratio"] if g in groups else None
    return out


def epoch_end(lines: dict[int, dict[str, Any]], epoch: int) -> dict[str, Any] | None:
    """Summary of epoch ``epoch``'s last line (0: the first step, the model at init); None if it has none."""
    if epoch == 0:
        return point_summary(lines[1]) if 1 in lines else None
    steps = [s for s, rec in lines.items() if int(rec.get("epoch", 0)) == epoch]
    return point_summary(lines[max(steps)]) if steps else None


def diagnostics_points(lines: dict[int, dict[str, Any]], epoch: int) -> dict[str, dict[str, Any] | None]:
    """{"init": step 1, "ep 1": epoch 1's last line, "ep <epoch>": that epoch's last line}; None where missing."""
    points = {"init": epoch_end(lines, 0)}
    for e in dict.fromkeys((1, epoch)):
        if e > 0:
            points[f"ep {e}"] = epoch_end(lines, e)
    return points


def _pm(xs: list[float], spec: str) -> str:
    mean, std, _ = mean_std(xs)
    return format_pm(mean, std, spec)


def diagnostics_rows(runs: list[dict[str, Any]], epoch: int) -> list[dict[str, Any]]:
    """Per run and point, the summary (for results.csv-like output): config, seed, point, relpos, keys."""
    rows = []
    for r in runs:
        if r.get("dir") is None:
            continue
        points = diagnostics_points(read_diagnostics(Path(r["dir"]) / "diagnostics.jsonl"), epoch)
        for label, p in points.items():
            if p is not None:
                rows.append({"config": r["stem"], "seed": r.get("seed"), "point": label, **p})
    return rows


def diagnostics_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown section: configs that have RelPos modules, mean ± std over seeds per point."""
    stems = [c for c in dict.fromkeys(r["config"] for r in rows) if any(x["config"] == c and x["relpos"] != "none" for x in rows)]
    if not stems:
        return []
    lines = ["", "## RelPos diagnostics (mean ± std over seeds)", "",
             "At init (the first step's forward and gradients), at the last step of epoch 1 and of the criterion epoch. "
             "Gate mean and contribution ratio std(ramp·scale·gate·pos)/std(feat) are averaged over the RelPos modules "
             "(one per stage and curve order); grad/param is the gradient norm over the parameter norm of the group, "
             "before clipping. \"off\": RelPos switched off (warm-up) at that point.", "",
             "| config | point | RelPos | " + " | ".join(DIAG_LABELS[k] for k in DIAG_KEYS) + " |",
             "|---|---|---|" + "---|" * len(DIAG_KEYS)]
    for stem in stems:
        mine = [x for x in rows if x["config"] == stem]
        for point in dict.fromkeys(x["point"] for x in mine):
            at = [x for x in mine if x["point"] == point]
            state = "/".join(sorted({x["relpos"] for x in at}))
            cells = [_pm([x[k] for x in at if x[k] is not None], ".3g" if k != "gate_mean" else ".3f") for k in DIAG_KEYS]
            lines.append(f"| `{stem}` | {point} | {state} | " + " | ".join(cells) + " |")
    return lines


def claim_lines(rows: list[dict[str, Any]], epoch: int, accept: float) -> list[str]:
    """Markdown section: each claim whose configs were run, seed by seed on the criterion-epoch loss."""
    by = {(r["config"], r["seed"]): r for r in rows}
    configs = {r["config"] for r in rows}
    lines = ["", f"## The design notes' claims, seed by seed (train loss at epoch {epoch})", "",
             "Differences are paired by seed (A − B). \"holds\" needs every seed to agree and a one-sided paired t-test "
             "at 95 % (for the 1.1× bound: the mean ratio's upper 95 % limit under 1.1); \"does not hold\" the same "
             "against the claim. With 3 seeds, all three agreeing happens by chance 1 time in 8. Best val mIoU is "
             "given beside the loss; the claims are about the loss.", "",
             "| claim | A | B | seeds agreeing | loss A − B (or ratio) | best val mIoU A − B | verdict |",
             "|---|---|---|---|---|---|---|"]
    shown = False
    for text, a, b, kind in CLAIMS:
        if a not in configs or (b is not None and b not in configs):
            continue
        seeds = sorted({r["seed"] for r in rows if r["config"] == a})
        agree, deltas, mdeltas = [], [], []
        for s in seeds:
            ra, rb = by.get((a, s)), by.get((b, s)) if b else None
            if ra is None or ra["loss_at_epoch"] is None:
                continue
            if kind == "ratio_accept":
                if ra["loss_ratio"] is None:
                    continue
                deltas.append(ra["loss_ratio"])
                agree.append(ra["loss_ratio"] <= accept)
                continue
            if rb is None or rb["loss_at_epoch"] is None:
                continue
            d = ra["loss_at_epoch"] - rb["loss_at_epoch"]
            deltas.append(d)
            agree.append(d > 0 if kind == "a_slower" else d < 0)
            if ra["best_val_miou"] is not None and rb["best_val_miou"] is not None:
                mdeltas.append(ra["best_val_miou"] - rb["best_val_miou"])
        if not agree:
            continue
        shown = True
        k, n = sum(agree), len(agree)
        if kind == "ratio_accept":  # the claim is a bound: does the mean's upper 95 % limit stay under it?
            t = t_stat(deltas, accept)
            sig = t is not None and n - 1 <= len(T_95) and -t >= T_95[n - 2]
        else:
            t = t_stat(deltas)
            sig = t is not None and n - 1 <= len(T_95) and abs(t) >= T_95[n - 2]
        if k == n:
            verdict = "**holds**" if sig else "same direction in every seed, not significant"
        elif k == 0:
            verdict = "**does not hold**" if sig else "opposite direction in every seed, not significant"
        else:
            verdict = "not shown (seeds disagree)"
        verdict += "" if t is None else f" (t = {t:.2f}, df {n - 1})"
        delta = (f"ratio {_pm(deltas, '.3f')}" if kind == "ratio_accept" else f"{_pm(deltas, '+.4f')}")
        lines.append(f"| {text} | `{a}` | {f'`{b}`' if b else 'ratio to baseline'} | {k}/{n} | {delta} | "
                     f"{_pm(mdeltas, '+.4f')} | {verdict} |")
    return lines if shown else []


def plot_diagnostics(runs: list[dict[str, Any]], path: Path) -> bool:
    """Gate mean, contribution ratio and RelPos grad/param at every epoch's end (mean over seeds, band min-max)
    for the configs with RelPos modules; False (nothing written) when no run has them."""
    series: dict[str, dict[str, dict[int, list[float]]]] = {}
    for r in runs:
        if r.get("dir") is None:
            continue
        lines = read_diagnostics(Path(r["dir"]) / "diagnostics.jsonl")
        epochs = sorted({int(rec.get("epoch", 0)) for rec in lines.values()})
        for e in [0] + epochs:  # 0: the first step (init)
            p = epoch_end(lines, e)
            if p is None or p["relpos"] == "none":
                continue
            for key in ("gate_mean", "contrib_ratio", "grad_ratio_relpos"):
                if p[key] is not None:
                    series.setdefault(r["stem"], {}).setdefault(key, {}).setdefault(e, []).append(p[key])
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("gate_mean", "contrib_ratio", "grad_ratio_relpos")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, (stem, by_key) in enumerate(series.items()):
        for ax, key in zip(axes, keys):
            by = by_key.get(key)
            if not by:
                continue
            ep = sorted(by)
            line, = ax.plot(ep, [statistics.mean(by[k]) for k in ep], marker=".", label=stem, **line_style(i))
            ax.fill_between(ep, [min(by[k]) for k in ep], [max(by[k]) for k in ep], color=line.get_color(), alpha=0.15)
    for ax, key in zip(axes, keys):
        ax.set(xlabel="epoch (0: init)", title=DIAG_LABELS[key])
        ax.grid(alpha=0.3)
        if key != "gate_mean":
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle("RelPos diagnostics at init and each epoch's end (mean over seeds, band min-max)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return True
