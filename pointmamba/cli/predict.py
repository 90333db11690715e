#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN_OR_FOLDER [...] [--checkpoint CKPT] [--jaw upper|lower] [--units auto|mm|cm|m] --out DIR
                     [--overwrite] [--reference JSON ... | --reference auto] [--set infer.KEY=VALUE ...]
                     [--report DIR/index.html] [--export-teeth]

Without --checkpoint the shipped model (pointmamba/pretrained/, see its MODEL_CARD.md) is used. A folder
stands for every mesh under it (recursive, sorted; the Teeth3DS layout <ID>/<ID>_<jaw>.obj included), with
one progress bar. ``--reference auto`` takes the label file beside each mesh (<stem>.json, the Teeth3DS
layout) as its reference where there is one.

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances; plus "confidence": each tooth's probability of its number and the runner-up, the
scan's lowest, "review" and its findings), DIR/<stem>.ply (the mesh coloured by class, with an FDI
`label` vertex property) and DIR/<stem>.png (the shaded mesh coloured by tooth with FDI numbers; with a
reference, the reference beside it and the wrong vertices marked); with --export-teeth one STL per tooth,
DIR/<stem>_<FDI>.stl, and DIR/<stem>_gingiva.stl, together exactly the scan's faces in its own units.
A scan flagged for review gets one line ("MSN023_lower: review tooth 35 (0.52; 34: 0.41)"). With a folder
or several scans, DIR/summary.csv has a row per scan (teeth, review, time, metrics with references);
--report writes one self-contained HTML page to review them all in 3D (opens from disk, no network).

The jaw comes from --jaw, else the file name (*_upper / *_lower) or a label file beside it. Scans in cm or
m are detected from their size and scaled to mm with a warning (--units to say). Every input is checked
before any work; nothing is written over an input or a file this run did not write (--overwrite replaces
earlier results, and removes an earlier run's tooth meshes of the same scan); inputs sharing a file name
get their folder's name as a prefix.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ._common import infer_overrides, parse_args, run_main, step_printer

SCAN_FILES = (".json", ".ply", ".png")
LARGE_SCAN_VERTICES = 200_000
"""From this many vertices a scan's steps are shown as they start (minutes each at millions of vertices)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl) or folders of them (recursive)")
    parser.add_argument("--checkpoint", help="checkpoint written by tools/train.py (default: the shipped model)")
    parser.add_argument("--jaw", choices=("upper", "lower"), help="jaw of every scan (default: from file name)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[],
                        help="ground-truth Teeth3DS JSON per scan, or 'auto' (the label file beside each mesh): "
                             "prints metrics")
    parser.add_argument("--units", default="auto", choices=("auto", "mm", "cm", "m"),
                        help="units of the scans' coordinates (auto: from their size; the model works in mm)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing files in --out (never an input)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="inference switches, e.g. --set infer.graph_cut=false infer.mirror_tta=false")
    parser.add_argument("--report", metavar="HTML", help="write a review page of all scans (e.g. DIR/index.html)")
    parser.add_argument("--export-teeth", action="store_true",
                        help="also write each tooth as DIR/<stem>_<FDI>.stl and the gingiva as DIR/<stem>_gingiva.stl")
    parser.add_argument("--dentition", choices=("auto", "permanent", "mixed"),
                        help="how a side of canine, one premolar-sized tooth, then molars is numbered: permanent "
                             "(premolar 5, first molar 6), mixed (primary molars 4, 5; first molar 6), auto (the "
                             "likelier, the scan flagged with both readings; the default)")
    parser.add_argument("--dentition-file", metavar="CSV",
                        help="per-scan dentition: rows 'scan stem,dentition' (over --dentition for the scans it names)")
    args = parse_args(parser)

    from tqdm import tqdm

    from pointmamba.atomic_file import write_csv
    from pointmamba.cli.output_files import OutputError, check_out_dir, check_run_files, make_out_dir, plan_outputs
    from pointmamba.data.preflight import check_predict_inputs, checked_scan
    from pointmamba.data.scan_files import expand_scan_paths, label_file_beside
    from pointmamba.device import resolve_device
    from pointmamba.segmenter import Segmenter
    from pointmamba.timing import StepTimer, step

    # everything checked before any work or output (see pointmamba/data/preflight.py, pointmamba/cli/output_files.py)
    infer = infer_overrides(args.overrides)
    out = Path(args.out)
    check_out_dir(out)
    report = Path(args.report) if args.report else None
    if report is not None:
        if report.is_dir() or not report.name:
            raise OutputError(f"--report {report} is a folder: name the page, e.g. {report / 'index.html'}")
        check_out_dir(report.parent, "--report")
    paths = expand_scan_paths(args.scans, skip=[out])
    folder_given = any(Path(p).is_dir() for p in args.scans)
    if args.reference == ["auto"]:
        references = [label_file_beside(p) for p in paths]
    elif "auto" in args.reference:
        raise ValueError("--reference auto stands alone (the label file beside each mesh), not among files")
    else:
        references = [Path(r) for r in args.reference]
    from pointmamba.evaluation.dentition import read_dentition_file

    dentitions = read_dentition_file(args.dentition_file) if args.dentition_file else {}
    segmenter = Segmenter(args.checkpoint, resolve_device(args.device, "--device"), infer, dentition=args.dentition)
    print(f"model: {segmenter.checkpoint}; inference: " + ", ".join(f"{k}={v}" for k, v in segmenter.infer.items()))
    inputs = check_predict_inputs(paths, args.jaw, args.units, references, need_jaw=segmenter.num_classes == 17,
                                  warn=lambda m: print(m, file=sys.stderr))
    protected = [r for r in references if r is not None] + [s for s in map(label_file_beside, paths) if s]
    suffixes = SCAN_FILES + (_tooth_suffixes() if args.export_teeth else ())
    plan = plan_outputs(paths, out, suffixes, args.overwrite, protected=protected)
    summary = out / "summary.csv" if folder_given or len(paths) > 1 else None
    check_run_files([p for p in (summary, report) if p is not None], paths, plan, args.overwrite, protected)

    make_out_dir(out)
    page = None
    if report is not None:
        from pointmamba.report import ReviewPage

        page = ReviewPage(f"pointmamba review: {len(inputs)} scan{'s' * (len(inputs) != 1)}",
                          model=f"model {segmenter.checkpoint.name}")
    rows, flagged = [], []
    bar = tqdm(list(zip(inputs, plan)), desc="predict", unit="scan", disable=len(inputs) < 2)
    for item, files in bar:
        t0 = time.perf_counter()
        stem = files[".json"].stem
        with StepTimer() as timer:  # seconds per step, shown with --verbose (pointmamba/timing.py)
            with step("load"):
                scan = checked_scan(item)  # read once, by the check
            scan.meta["name"] = stem
            progress = step_printer(str(item.path), item.num_vertices >= LARGE_SCAN_VERTICES)
            result = segmenter.segment(scan, item.units, progress, dentition=dentitions.get(item.path.stem))
            if progress:
                progress("writing results")
            with step("write"):
                result.save_json(files[".json"])
                result.save_ply(files[".ply"])
            ref = item.reference_labels  # read (and checked) once, by the check
            if progress:
                progress("drawing the picture")
            with step("picture"):
                result.save_png(files[".png"], reference=ref)
            if args.export_teeth:
                with step("write"):
                    written = set(result.save_teeth(out, stem))
                    for path in files.values():  # an earlier run's tooth that this run did not find
                        if path.suffix == ".stl" and path not in written and os.path.lexists(path):
                            path.unlink()
        metrics = result.compare(ref) if ref is not None else None
        seconds = time.perf_counter() - t0
        msg = (f"{item.path}: {scan.num_vertices} vertices, {seconds:.2f} s, teeth {result.teeth} -> "
               f"{files['.json']}")
        if args.verbose:
            msg += f"\n  steps: {timer.line()}"
        if metrics is not None:
            msg += (f"\n  vs reference: accuracy {metrics['accuracy']:.4f}, mIoU {metrics['miou']:.4f}, "
                    f"TSA {metrics['TSA']:.4f}, TLA {metrics['TLA']:.4f}, TIR {metrics['TIR']:.4f}")
        if result.review:
            msg += "\n" + result.review_line()
            flagged.append(stem)
        tqdm.write(msg)
        rows.append(_summary_row(item.path, stem, result, seconds, metrics, any(references)))
        if page is not None:
            page.add(result, None if ref is None else ref.labels, metrics, files[".png"], str(item.path))
    bar.close()
    if summary is not None:
        write_csv(summary, rows)
    if page is not None:
        page.write(report)
    if len(inputs) > 1 or flagged:
        print(f"{len(flagged)} of {len(inputs)} scan{'s' * (len(inputs) != 1)} flagged for review"
              + (f"; summary: {summary}" if summary else "") + (f"; review page: {report}" if report else ""))
    elif report is not None:
        print(f"review page: {report}")


def _tooth_suffixes() -> tuple[str, ...]:
    """Every name --export-teeth may write for a scan (the gingiva and each FDI number), so that all are
    checked up front although the teeth found are known only after the work."""
    from pointmamba.data.fdi import ALL_FDI
    from pointmamba.data.tooth_meshes import piece_name

    return tuple(piece_name("", label) for label in (0, *ALL_FDI))


def _summary_row(path: Path, stem: str, result, seconds: float, metrics: dict | None, with_metrics: bool) -> dict:
    row = {"scan": str(path), "output": stem, "jaw": result.jaw, "vertices": len(result.labels),
           "teeth": " ".join(map(str, result.teeth)), "num_teeth": len(result.teeth),
           "min_confidence": None if result.confidence.min_confidence is None else round(result.confidence.min_confidence, 4),
           "review": "yes" if result.review else "no", "findings": "; ".join(result.confidence.reasons),
           "seconds": round(seconds, 2)}
    if with_metrics:
        m = metrics or {}
        row.update({k: (round(m[k], 4) if k in m else None) for k in ("accuracy", "miou", "TSA", "TLA", "TIR")})
        row["wrong_teeth"] = " ".join(f"{p}->{r}" for p, r in m.get("wrong_teeth", {}).items())
    return row


def cli() -> None:
    """Entry point of ``pointmamba-predict``."""
    run_main(main)


if __name__ == "__main__":
    cli()
