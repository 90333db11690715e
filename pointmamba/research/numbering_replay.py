#!/usr/bin/env python3
"""Replay the tooth numbering on stored graph cuts: a numbering switch measured in seconds, not in network runs.

    python -m pointmamba.research.numbering_replay cache --config FILE [--checkpoint CKPT] [--average-with CKPT ...]
        [--split val] [--removals [--removal-mode flatten|close]] --out CACHE [--set key=value ...]
    python -m pointmamba.research.numbering_replay replay CACHE --out DIR [--set infer.KEY=VALUE ...]

``cache`` runs the full path of tools/predict.py once per labelled scan of the split (and with
``--removals``, once per single-tooth removal of each complete arch, as
``pointmamba.research.removal_check --mode flatten`` makes them; ``--removal-mode close`` as its ``--mode close``
does) and stores what the numbering starts from: the network's probabilities, the canonical vertices and
normals, the faces, the graph cut's labels, the reference labels and the inference options. About 1 s a scan
on one core, 10 MB a 150k-vertex scan.

``replay`` numbers every stored cut again under the stored options with ``--set`` applied: the options that
act after the graph cut (the numbering's priors, the dentition, the mends and merges) on the stored cut, and
the graph cut's own options by cutting the stored probabilities again (also where today's default of a cut
option differs from the one the cache's cut was made with: a cache written before
``infer.graph_cut_tooth_pair_cost`` existed is cut again under its default). The options that act on the network's
probabilities (the views, the averaged networks) would need the network and are refused. An option a cache
stores keeps its stored value, an old default included: the replay names those that differ from today's
defaults (one line on stderr, and ``stored_not_default`` in replay.json); ``--set`` replays under today's. It writes
DIR/per_scan.csv (per-scan mIoU, as tools/test.py scores it), DIR/removals.csv and DIR/replay.json and
DIR/summary.md (the per-scan mean, 10th percentile and kept share, the scans flagged for review below 0.80
and at or above it; the removal check's share of removals changing another tooth). With the stored options
unchanged these are tools/test.py's and removal_check's figures to the last digit (docs/results/review_flag/log.md, the
touching spacing), each scan's ``review`` and ``findings`` included; the dentition-given columns are not
replayed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..cli._common import add_config_args, add_study_args, open_eval_run, parse_args, run_main, write_study

# infer options that act on the network's probabilities: the stored probabilities cannot show what they change
ON_THE_NETWORK = ("mirror_tta", "average_networks", "tta_angles")
# the graph cut's: a replay that changes one cuts the stored probabilities again (seconds a scan, not a network run)
THE_CUT = ("graph_cut", "graph_cut_smoothing", "graph_cut_density_power", "graph_cut_coarse_first",
           "graph_cut_fine_cycles", "graph_cut_tooth_pair_cost")
# a cut option that a cache written before it existed does not store: the value its cut was made with
BEFORE_OPTION = {"graph_cut_tooth_pair_cost": 1}
REMOVAL_MARK = "__without_"  # a cached removal is named <scan>__without_<FDI>


def cache_scan(path: Path, scan: Any, model: Any, cfg: dict[str, Any], device: Any) -> np.ndarray:
    """Predict ``scan`` (its jaw known) as tools/predict.py does and store what its numbering starts from in
    ``path`` (.npz); returns the predicted FDI labels."""
    from ..data import class_to_fdi
    from ..inference.pipeline import _cut, refine_either_jaw, scan_probabilities

    num_classes = cfg["data"]["num_classes"]
    if scan.jaw is None or scan.labels is None:
        raise ValueError(f"{scan.path or scan.name}: a replay needs the jaw and the reference labels")
    options, probs, aligned, normals = scan_probabilities(model, scan, cfg, device)
    if num_classes != 17 or not options["instance_numbering"]:
        raise ValueError(f"{scan.path or scan.name}: nothing to replay without the instance numbering (17 classes)")
    cut = _cut(probs, aligned, scan.faces, normals, options, lambda step: None)
    classes, _, _ = refine_either_jaw(probs, aligned, scan.faces, normals, scan.jaw, num_classes, options, cut=cut)
    np.savez(path, probs=probs, aligned=aligned, normals=normals, faces=scan.faces, cut=cut, labels=scan.labels,
             jaw=np.array(scan.jaw), num_classes=np.array(num_classes), options=np.array(json.dumps(options)))
    return class_to_fdi(classes, scan.jaw, num_classes)


def replay_options(stored: dict[str, Any], overrides: dict[str, Any], where: str) -> dict[str, Any]:
    """``stored`` with ``overrides``; ValueError naming ``where`` for an option the stored probabilities depend on."""
    refused = sorted(k for k, v in overrides.items() if k in ON_THE_NETWORK and v != stored.get(k))
    if refused:
        raise ValueError(f"{where}: infer.{refused[0]} acts on the network's probabilities; the cache holds those "
                         f"made with {refused[0]}={stored.get(refused[0])!r}: cache again with the new value")
    return {**stored, **overrides}


class Replayed(NamedTuple):
    """One cached scan numbered again: its predicted and reference FDI labels, its jaw and, where asked, the
    review flag and its findings' kinds as tools/test.py reports them, with the teeth's confidences
    (:class:`~pointmamba.inference.confidence.ToothConfidence`: number, runner-up ...) and the instance id
    of each vertex."""

    fdi: np.ndarray
    reference: np.ndarray
    jaw: str
    review: bool | None = None
    findings: str | None = None
    teeth: list | None = None
    instances: np.ndarray | None = None


def replay_file(path: Path, overrides: dict[str, Any], review: bool = False) -> Replayed:
    """One cached scan numbered again under its stored options with ``overrides`` (an option of the graph cut:
    the stored probabilities cut again); ``review``: with its review flag (the scan's confidence, about 0.1 s
    more)."""
    from ..data import class_to_fdi
    from ..evaluation.scan_summary import finding_kinds, prediction_confidence
    from ..inference.config import infer_options
    from ..inference.pipeline import refine_either_jaw, refined_prediction

    with np.load(path) as d:
        jaw, num_classes = str(d["jaw"]), int(d["num_classes"])
        stored = json.loads(str(d["options"]))
        options = replay_options(stored, overrides, str(path))
        probs, aligned, faces = d["probs"], d["aligned"], d["faces"]
        effective = infer_options({"infer": options})  # today's defaults where neither stores nor sets one
        recut = any(effective[k] != stored.get(k, BEFORE_OPTION.get(k)) for k in THE_CUT)
        classes, numbering, call = refine_either_jaw(probs, aligned, faces, d["normals"], jaw, num_classes, options,
                                                     cut=None if recut else d["cut"])
        if not review:
            return Replayed(class_to_fdi(classes, jaw, num_classes), d["labels"], jaw)
        pred = refined_prediction(classes, numbering, call, probs, aligned, jaw, num_classes)
        instances, conf = prediction_confidence(pred, jaw, faces)
        return Replayed(pred.fdi, d["labels"], jaw, conf.review, finding_kinds(conf), conf.teeth, instances)


def stored_not_default(files: list[Path], overrides: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{option: (value stored in some of ``files``, today's default)} for the options the cached scans were made
    with that differ from today's defaults and that ``overrides`` does not set (a cache made before a default
    changed replays under the old value)."""
    from ..inference.config import INFER_DEFAULTS

    out: dict[str, tuple[Any, Any]] = {}
    for path in files:
        with np.load(path) as d:
            stored = json.loads(str(d["options"]))
        for key, value in stored.items():
            if key in INFER_DEFAULTS and key not in overrides and value != INFER_DEFAULTS[key]:
                out.setdefault(key, (value, INFER_DEFAULTS[key]))
    return out


def _cache(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    from pointmamba.cli.output_files import make_out_dir
    from pointmamba.data import load_scan
    from pointmamba.data.missing_teeth import arch_is_complete
    from pointmamba.evaluation.removal_check import without_tooth

    run = open_eval_run(args)
    make_out_dir(run.out)
    scans = [load_scan(p) for p in run.dataset.paths]
    jobs = [(scan.name, scan, None) for scan in scans]
    if args.removals:
        jobs += [(f"{scan.name}{REMOVAL_MARK}{int(t)}", scan, int(t)) for scan in scans
                 if scan.labels is not None and arch_is_complete(scan.labels, scan.jaw)
                 for t in np.unique(scan.labels) if t > 0]
    for name, scan, tooth in tqdm(jobs, desc="numbering cache"):
        path = run.out / f"{name}.npz"
        if not path.exists():  # a stopped cache goes on where it stopped
            cache_scan(path, scan if tooth is None else without_tooth(scan, tooth, args.removal_mode), run.model,
                       run.cfg, run.device)


def _replay(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    from pointmamba.cli._common import infer_overrides
    from pointmamba.cli.output_files import check_out_dir, make_out_dir
    from pointmamba.data import fdi_to_class
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.evaluation.removal_check import removal, removal_rows, removal_summary, tooth_numbers
    from pointmamba.evaluation.scan_summary import kept_and_flagged
    from pointmamba.utils.atomic_file import write_csv

    cache, out = Path(args.cache), Path(args.out)
    files = sorted(cache.glob("*.npz"))
    if not files:
        raise ValueError(f"{cache}: no cached scan (.npz) here: run `numbering_replay cache` first")
    check_out_dir(out)
    overrides = infer_overrides(args.overrides)
    stale = stored_not_default(files, overrides)
    if stale:  # a cache keeps the options it was made with, old defaults included: say which, once
        print(f"note: {cache}: replayed under the options its scans were cached with, which differ from today's "
              f"defaults in {', '.join(f'{k}={v} (today {d})' for k, (v, d) in sorted(stale.items()))}; "
              "--set infer.KEY=VALUE to replay under today's", file=sys.stderr)
    numbered = {f.stem: replay_file(f, overrides, review=REMOVAL_MARK not in f.stem)
                for f in tqdm(files, desc="numbering replay")}
    rows, bases = [], {}  # bases: each whole scan's tooth numbers, which its removals are compared with
    for name, (fdi, ref, jaw, review, findings, *_) in numbered.items():
        if REMOVAL_MARK not in name:
            cm = ConfusionMatrix(17).update(fdi_to_class(fdi, jaw, 17), fdi_to_class(ref, jaw, 17))
            rows.append({"name": name, "miou": cm.miou(), "review": review, "findings": findings})
            bases[name] = tooth_numbers(ref, fdi)
    removals = []
    for name, (fdi, ref, *_) in numbered.items():
        if REMOVAL_MARK in name:
            scan, tooth = name.split(REMOVAL_MARK)
            if scan not in bases:
                raise ValueError(f"{cache}: {name}.npz has no {scan}.npz beside it")
            removals.append(removal(scan, int(tooth), bases[scan], ref, fdi))
    make_out_dir(out)
    write_csv(out / "per_scan.csv", rows)
    write_csv(out / "removals.csv", removal_rows(removals))
    scans = kept_and_flagged([r["miou"] for r in rows], [bool(r["review"]) for r in rows]) if rows else {"scans": 0}
    summary = removal_summary(removals) if removals else None
    table = ("| scans | mean | 10th pct | kept (>= 0.80) | flagged: below 0.80 / kept | removals changing another tooth |"
             "\n|---|---|---|---|---|---|\n"
             f"| {scans['scans']} | {scans.get('mean', float('nan')):.4f} | {scans.get('p10', float('nan')):.4f} | "
             f"{scans.get('kept', 0)} | {scans.get('below_flagged', 0)} of {scans.get('below', 0)} / "
             f"{scans.get('kept_flagged', 0)} of {scans.get('kept', 0)} | "
             + (f"{summary['removals_changing_any']} of {summary['removals']} "
                                            f"({summary['share_of_removals_changing_any']:.1%})" if summary else "-")
             + " |\n")
    write_study(out, "replay.json", {"cache": str(cache), "overrides": overrides, "scans": scans,
                                     "removal_check": summary,
                                     "stored_not_default": {k: v for k, (v, _) in sorted(stale.items())}},
                table, "per_scan.csv, removals.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="predict a split once and store what the numbering starts from")
    add_config_args(cache)
    add_study_args(cache)
    cache.add_argument("--removals", action="store_true",
                       help="also each single-tooth removal of the complete arches (the removal check)")
    cache.add_argument("--removal-mode", default="flatten", choices=("flatten", "close"),
                       help="how --removals takes a tooth out (removal_check's --mode): flattened, or its space closed")
    replay = sub.add_parser("replay", help="number the stored cuts again under --set infer.KEY=VALUE")
    replay.add_argument("cache", help="a folder written by `numbering_replay cache`")
    replay.add_argument("--out", required=True, help="output directory")
    replay.add_argument("--set", dest="overrides", nargs="*", default=[], metavar="infer.KEY=VALUE")
    for command in (cache, replay):  # parse_args gives the parent parser these; they follow the command
        command.add_argument("--verbose", action="store_true", help="show debug log lines")
        command.add_argument("--no-progress", action="store_true", help="no progress bars (logs, CI)")
    args = parse_args(parser)
    (_cache if args.command == "cache" else _replay)(args)


def cli() -> None:
    run_main(main)


if __name__ == "__main__":
    cli()
