#!/usr/bin/env python3
"""Does the review flag mean something? Segment labelled scans and compare the confidence with the truth.

    python -m pointmamba.research.calibrate_confidence SCAN_OR_FOLDER [...] --out DIR [--checkpoint CKPT]
        [--set infer.KEY=VALUE ...]
    python -m pointmamba.research.calibrate_confidence --config FILE [--split val] --out DIR [--checkpoint CKPT]

Each scan needs its Teeth3DS label file beside it (``<stem>.json``). A predicted tooth is **wrong** when
the reference's most common label on its vertices is not its predicted number (gingiva included); a scan
is wrong when one of its teeth is. Writes DIR/calibration.md (how often flagged and unflagged scans were
wrong, with counts; the same for other ``review_below`` values; which findings fired; the per-tooth
reliability table), DIR/reliability.png, DIR/teeth.csv, DIR/scans.csv and DIR/calibration.json.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..utils import finite_json
from ..cli._common import parse_args, run_main

SWEEP = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="*", help="labelled scans or folders of them (Teeth3DS layout)")
    parser.add_argument("--config", help="take the scans of a config's split instead (data.root, *_names)")
    parser.add_argument("--split", default="val", choices=("train", "val", "test"))
    parser.add_argument("--checkpoint", help="checkpoint (default: the shipped model)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--bins", type=int, default=10, help="confidence bins of the reliability plot")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="inference switches, e.g. --set infer.graph_cut=false")
    args = parse_args(parser)

    from tqdm import tqdm

    from pointmamba.cli.output_files import check_out_dir, make_out_dir
    from pointmamba.cli._common import infer_overrides
    from pointmamba.data.scan_files import expand_scan_paths, label_file_beside
    from pointmamba.data.teeth3ds import read_labels
    from pointmamba.data.units import infer_units
    from pointmamba.utils.device import resolve_device
    from pointmamba.checkpoints.shipped import DEFAULT_MODEL
    from pointmamba.inference.segmenter import Segmenter

    if bool(args.scans) == bool(args.config):
        raise ValueError("give labelled scans (files or folders) or --config, not both and not neither")
    infer = infer_overrides(args.overrides)
    check_out_dir(args.out)
    if args.config:
        from pointmamba.config import load_config
        from pointmamba.training.data_builders import build_dataset

        paths = list(build_dataset(load_config(args.config), args.split, train=False).paths)
    else:
        paths = expand_scan_paths(args.scans)
    missing = [p for p in paths if label_file_beside(p) is None]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise FileNotFoundError(f"{missing[0]}: no label file {Path(missing[0]).with_suffix('.json').name} "
                                f"beside it{more}")
    segmenter = Segmenter(args.checkpoint, resolve_device(args.device, "--device"), infer)
    out = make_out_dir(args.out)
    scans: list[dict[str, Any]] = []
    for path in tqdm(paths, desc="calibrate"):
        scan = segmenter.load(path)
        reference = read_labels(label_file_beside(path), scan.num_vertices)
        result = segmenter.segment(scan, infer_units(scan.vertices, "auto", path))
        scans.append(scan_record(result, reference.labels, str(path)))
    report = summarize(scans, segmenter.rules, args.bins)
    shipped = segmenter.checkpoint == DEFAULT_MODEL
    report.update({"checkpoint": f"pointmamba/checkpoints/{DEFAULT_MODEL.name} (the shipped model)" if shipped
                   else str(segmenter.checkpoint), "infer": segmenter.infer})
    write_outputs(out, scans, report, " ".join(["python -m pointmamba.research.calibrate_confidence", *map(str, args.scans)]
                                                + ([f"--config {args.config} --split {args.split}"] if args.config else [])))
    rows = report["table"]
    print(f"flagged: {rows['flagged']['wrong']}/{rows['flagged']['scans']} wrong; unflagged: "
          f"{rows['unflagged']['wrong']}/{rows['unflagged']['scans']} wrong -> {out / 'calibration.md'}")


def scan_record(result: Any, reference, source: str) -> dict[str, Any]:
    """What the summary needs of one scan: its teeth with their truth, and what re-deciding review takes."""
    from pointmamba.inference.confidence import tooth_truth

    truth = tooth_truth(result.instances, reference)
    teeth = [{"scan": result.name, "fdi": t.fdi, "reference": truth[t.instance], "wrong": truth[t.instance] != t.fdi,
              "confidence": t.confidence, "runner_up": t.runner_up, "runner_up_confidence": t.runner_up_confidence,
              "width_mm": t.width_mm, "vertices": t.vertices, "posterior": t.number_posterior}
             for t in result.confidence.teeth]
    ref_teeth = {int(t) for t in set(reference.tolist()) if t > 0}
    found = {int(v) for v in truth.values()}
    from pointmamba.inference.confidence import TOOTH_FINDINGS

    return {"name": result.name, "source": source, "jaw": result.jaw, "teeth": teeth,
            "wrong": any(t["wrong"] for t in teeth), "missed": sorted(ref_teeth - found),
            "confidence": result.confidence, "aligned": result.aligned, "instances": result.instances,
            "arch_findings": [f for f in result.confidence.findings if f[0] not in TOOTH_FINDINGS]}


def flagged(scan: dict[str, Any], rules: Any, whole_arch: bool = True) -> list[tuple[str, str]]:
    """The scan's review findings re-decided at ``rules`` (the per-tooth ones: confidence, widths, spacing),
    plus, with ``whole_arch``, those of the checks on the whole arch as the segmentation made them (the
    dentition, split / dropped / lost teeth, parts, the jaw): the flag ``tools/predict.py`` shows."""
    from pointmamba.inference.confidence import review_findings

    c = scan["confidence"]
    found = review_findings(c.teeth, scan["jaw"], scan["aligned"], scan["instances"], rules)
    return found + (scan["arch_findings"] if whole_arch else [])


def _table(scans: list[dict[str, Any]], rules: Any, whole_arch: bool = True) -> dict[str, dict[str, Any]]:
    rows = {"flagged": {"scans": 0, "wrong": 0}, "unflagged": {"scans": 0, "wrong": 0}}
    for s in scans:
        row = rows["flagged" if flagged(s, rules, whole_arch) else "unflagged"]
        row["scans"] += 1
        row["wrong"] += int(s["wrong"])
    for row in rows.values():
        row["rate"] = row["wrong"] / row["scans"] if row["scans"] else None
    return rows


def _ranking_auc(conf: Any, right: Any) -> float | None:
    """How often a wrong tooth has a lower value than a right one (ties half; 0.5: no better than chance)."""
    wrong_c, right_c = conf[~right][:, None], conf[right][None, :]
    if not (wrong_c.size and right_c.size):
        return None
    return float((wrong_c < right_c).mean() + 0.5 * (wrong_c == right_c).mean())


def summarize(scans: list[dict[str, Any]], rules: Any, bins: int) -> dict[str, Any]:
    """The scan table at ``rules``, the sweep over ``review_below``, findings by kind, tooth reliability."""
    import numpy as np

    from pointmamba.inference.confidence import FINDINGS

    teeth = [t for s in scans for t in s["teeth"]]
    conf = np.array([t["confidence"] for t in teeth])
    right = np.array([not t["wrong"] for t in teeth])
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(conf, edges) - 1, 0, bins - 1)
    reliability = [{"bin": f"{edges[b]:.2f}-{edges[b + 1]:.2f}", "teeth": int((which == b).sum()),
                    "mean_confidence": float(conf[which == b].mean()) if (which == b).any() else None,
                    "fraction_right": float(right[which == b].mean()) if (which == b).any() else None}
                   for b in range(bins)]
    kinds = {k: {"scans": 0, "wrong_scans": 0} for k in FINDINGS}
    for s in scans:
        for k in {k for k, _ in s["confidence"].findings}:
            kinds[k]["scans"] += 1
            kinds[k]["wrong_scans"] += int(s["wrong"])
    sweep = [{"review_below": x, **{f"{side}_{key}": v for side, row in _table(scans, replace(rules, review_below=x)).items()
                                    for key, v in row.items()}} for x in SWEEP]
    no_geometry = replace(rules, wide=np.inf, narrow=0.0, room=np.inf, touch=0.0)
    posterior = np.array([t.get("posterior", t["confidence"]) for t in teeth])
    return {"rules": rules.__dict__, "table": _table(scans, rules), "sweep": sweep,
            "ranking_auc": _ranking_auc(conf, right), "ranking_auc_posterior": _ranking_auc(posterior, right),
            "confidence_only": _table(scans, no_geometry, whole_arch=False), "findings": kinds, "reliability": reliability,
            "teeth": {"count": len(teeth), "wrong": int((~right).sum())},
            "scans": {"count": len(scans), "wrong": sum(s["wrong"] for s in scans),
                      "missing_a_tooth": sum(bool(s["missed"]) for s in scans)}}


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _rate(row: dict[str, Any]) -> str:
    return "–" if row["rate"] is None else f"{row['rate']:.0%} ({row['wrong']} of {row['scans']})"


def write_outputs(out: Path, scans: list[dict[str, Any]], report: dict[str, Any], command: str) -> None:
    from pointmamba.utils.atomic_file import atomic_write, write_csv

    t = report["table"]
    lines = [
        "# Review flag and tooth confidence on labelled scans", "",
        f"Model: `{report['checkpoint']}`; inference: " + ", ".join(f"{k}={v}" for k, v in report["infer"].items()) + ".",
        f"Scans: {report['scans']['count']} ({report['scans']['wrong']} wrong), teeth: {report['teeth']['count']} "
        f"({report['teeth']['wrong']} wrong). Command: `{command}`.", "",
        "A predicted tooth is **wrong** when the most common reference label on its vertices is not its predicted "
        "number (a tooth predicted on gingiva included); a scan is wrong when it has a wrong tooth. "
        f"{report['scans']['missing_a_tooth']} scan(s) also miss a reference tooth altogether (no predicted tooth "
        "covers most of it); that alone does not make a scan wrong here.", "",
        "## How often a scan was wrong", "",
        "| | scans | wrong | rate |", "|---|---|---|---|",
        f"| flagged for review | {t['flagged']['scans']} | {t['flagged']['wrong']} | {_rate(t['flagged'])} |",
        f"| not flagged | {t['unflagged']['scans']} | {t['unflagged']['wrong']} | {_rate(t['unflagged'])} |", "",
        "Rules: " + ", ".join(f"{k}={v}" for k, v in report["rules"].items()) + " (`ReviewRules` in "
        "`pointmamba/inference/confidence.py`).", "",
        f"With the tooth confidence alone (no width or spacing checks): flagged {_rate(report['confidence_only']['flagged'])} "
        f"wrong, not flagged {_rate(report['confidence_only']['unflagged'])} wrong.", "",
        "## Other `review_below` values (the other rules as above)", "",
        "| review_below | flagged: wrong | not flagged: wrong |", "|---|---|---|",
    ]
    for row in report["sweep"]:
        f = {"wrong": row["flagged_wrong"], "scans": row["flagged_scans"], "rate": row["flagged_rate"]}
        u = {"wrong": row["unflagged_wrong"], "scans": row["unflagged_scans"], "rate": row["unflagged_rate"]}
        lines.append(f"| {row['review_below']} | {_rate(f)} | {_rate(u)} |")
    lines += ["", "## Findings (scans where each fired, and how many of them were wrong)", "",
              "| finding | scans | wrong |", "|---|---|---|"]
    lines += [f"| {k} | {v['scans']} | {v['wrong_scans']} |" for k, v in report["findings"].items()]
    lines += ["", "## Tooth confidence: reliability (`reliability.png`)", "",
              f"A wrong tooth has a lower confidence than a right one in {_num(report['ranking_auc'])} of all "
              "(wrong, right) pairs (AUC; 0.5 = no better than chance); by the numbers' posteriors alone, before "
              f"a flagged scan's teeth were lowered (`infer.flagged_confidence_scale`), {_num(report['ranking_auc_posterior'])}.", "",
              "| confidence | teeth | mean confidence | fraction right |", "|---|---|---|---|"]
    lines += [f"| {r['bin']} | {r['teeth']} | {_num(r['mean_confidence'])} | {_num(r['fraction_right'])} |"
              for r in report["reliability"]]
    lines += ["", "## Scans", "", "| scan | wrong teeth (predicted→reference) | review |", "|---|---|---|"]
    for s in scans:
        wrong = " ".join(f"{t['fdi']}→{t['reference']}" for t in s["teeth"] if t["wrong"]) or "–"
        lines.append(f"| {s['name']} | {wrong} | {'; '.join(s['confidence'].reasons) or '–'} |")
    atomic_write(out / "calibration.md", ("\n".join(lines) + "\n").encode())
    write_csv(out / "teeth.csv", [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in t.items()}
                                  for s in scans for t in s["teeth"]])
    write_csv(out / "scans.csv", [{"scan": s["name"], "source": s["source"], "wrong": s["wrong"],
                                   "review": s["confidence"].review,
                                   "min_confidence": round(s["confidence"].min_confidence or 0.0, 4),
                                   "missed_teeth": " ".join(map(str, s["missed"])),
                                   "findings": "; ".join(s["confidence"].reasons)} for s in scans])
    atomic_write(out / "calibration.json", finite_json.dumps(report, indent=1, default=float).encode())
    plot_reliability(out / "reliability.png", scans, report)


def plot_reliability(path: Path, scans: list[dict[str, Any]], report: dict[str, Any]) -> None:
    """Left: per-tooth reliability (mean confidence vs fraction right per bin, teeth per bin). Right: each
    scan's lowest tooth confidence, wrong vs right scans, flagged ones ringed, ``review_below`` dashed."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pointmamba.utils.atomic_file import save_figure

    fig = Figure(figsize=(11, 4.4))
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(1, 2)
    rel = [r for r in report["reliability"] if r["teeth"]]
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="calibrated")
    ax.plot([r["mean_confidence"] for r in rel], [r["fraction_right"] for r in rel], "o-", color="C0",
            label="teeth per bin")
    for r in rel:
        ax.annotate(str(r["teeth"]), (r["mean_confidence"], r["fraction_right"]), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("tooth confidence (probability of its number)")
    ax.set_ylabel("fraction of teeth numbered right")
    ax.set_title(f"{report['teeth']['count']} teeth, {report['teeth']['wrong']} wrong", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    rng = np.random.default_rng(0)
    for row, wrong in ((0, False), (1, True)):
        sel = [s for s in scans if s["wrong"] == wrong]
        x = [s["confidence"].min_confidence or 0.0 for s in sel]
        y = row + rng.uniform(-0.15, 0.15, len(sel))
        bx.scatter(x, y, c="C3" if wrong else "C2", s=28, zorder=3)
        review = [s["confidence"].review for s in sel]
        bx.scatter(np.array(x)[review], y[review], facecolors="none", edgecolors="k", s=90, lw=1, zorder=4)
    bx.axvline(report["rules"]["review_below"], color="k", ls="--", lw=1)
    bx.set_yticks([0, 1], ["right", "wrong"])
    bx.set_ylim(-0.6, 1.6)
    bx.set_xlim(0, 1)
    bx.set_xlabel("scan's lowest tooth confidence (ringed: flagged for review)")
    t = report["table"]
    bx.set_title(f"flagged: {t['flagged']['wrong']}/{t['flagged']['scans']} wrong; "
                 f"not flagged: {t['unflagged']['wrong']}/{t['unflagged']['scans']} wrong", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.calibrate_confidence``."""
    run_main(main)


if __name__ == "__main__":
    cli()
