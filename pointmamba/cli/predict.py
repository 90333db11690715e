#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN_OR_FOLDER [...] [--checkpoint CKPT] [--jaw upper|lower] [--units auto|mm|cm|m] --out DIR
                     [--overwrite] [--reference JSON ... | --reference auto] [--set infer.KEY=VALUE ...]
                     [--report DIR/index.html] [--export-teeth] [--strict]
                     [--dentition auto|permanent|mixed] [--dentition-file CSV]

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

--dentition says how a side of canine, one premolar-sized tooth, then molars is numbered: permanent (an
adult's premolar space closed: premolar 5, first molar 6) or mixed (a child's primary molars 4, 5, first
molar 6); auto (default) picks the likelier, flags the scan naming both readings and writes the other
reading's number as each tooth's "alternative" in the JSON. --dentition-file gives it per scan: CSV rows
"scan stem,dentition". Arches without that side are numbered alike under all three.

The jaw comes from --jaw, else the file name (*_upper / *_lower) or a label file beside it. Scans in cm or
m are detected from their size and scaled to mm with a warning (--units to say). Every input is checked
before any work; nothing is written over an input or a file this run did not write (--overwrite replaces
earlier results, and removes an earlier run's tooth meshes of the same scan), nor outside DIR; inputs
sharing a file name get their folder's name as a prefix. A folder's files that an earlier run wrote (a
predicted PLY, tooth STLs) are not read as scans, and DIR is not entered. One run at a time writes DIR.

One bad scan costs one line ("failed: <file>: <what is wrong>"), never the batch: a scan that fails the
check or fails while it is segmented is listed as failed in summary.csv and on the page, and the others
go on. --strict stops instead, before any work, at the first scan that fails the check.

Exit status: 0 every scan done; 1 some scans failed, the others done; 2 nothing done (a bad argument or
output, every scan bad, with --strict any scan bad) or the disk ran full; 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from ._common import infer_overrides, parse_args, run_main, step_printer

SCAN_FILES = (".json", ".ply", ".png")
LARGE_SCAN_VERTICES = 200_000
"""From this many vertices a scan's steps are shown as they start (minutes each at millions of vertices)."""
SOME_FAILED = 1
"""Exit status when some scans failed and the others were done."""


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--strict", action="store_true",
                        help="stop before any work if any scan fails the check (default: skip it with one line)")
    parser.add_argument("--dentition", choices=("auto", "permanent", "mixed"),
                        help="how a side of canine, one premolar-sized tooth, then molars is numbered: permanent "
                             "(premolar 5, first molar 6), mixed (primary molars 4, 5; first molar 6), auto (the "
                             "likelier, the scan flagged with both readings; the default)")
    parser.add_argument("--dentition-file", metavar="CSV",
                        help="per-scan dentition: rows 'scan stem,dentition' (over --dentition for the scans it names)")
    return parser


def main() -> None:
    args = parse_args(build_parser())

    from pointmamba.cli.output_files import check_out_dir, lock_out_dir

    out = Path(args.out)
    check_out_dir(out)
    # a second run into this --out stops here, at once; a new --out is locked once it is made
    lock = lock_out_dir(out) if out.is_dir() else None
    run: Run | None = None
    try:
        run = Run(args, out, lock)
        run.predict_all()
    finally:
        Run.release(run.lock if run is not None else lock)


class Run:
    """One ``predict`` run: its checked inputs, planned outputs, and the scans done and failed."""

    def __init__(self, args: argparse.Namespace, out: Path, lock: int | None) -> None:
        from pointmamba.cli.output_files import OutputError, check_out_dir
        from pointmamba.data.scan_files import expand_scan_paths, label_file_beside
        from pointmamba.device import resolve_device
        from pointmamba.printable import printable
        from pointmamba.segmenter import Segmenter

        # everything checked before any work or output (see pointmamba/data/preflight.py, output_files.py)
        self.args, self.out, self.lock = args, out, lock
        infer = infer_overrides(args.overrides)
        self.report = Path(args.report) if args.report else None
        if self.report is not None:
            if self.report.is_dir() or not self.report.name:
                raise OutputError(f"--report {self.report} is a folder: name the page, e.g. {self.report / 'index.html'}")
            check_out_dir(self.report.parent, "--report")
        skipped: list[Path] = []
        self.paths = expand_scan_paths(args.scans, skip=[out], skipped=skipped)
        if skipped:
            print(f"skipped {len(skipped)} file{'s' * (len(skipped) != 1)} that an earlier run wrote (a predicted "
                  f"PLY or tooth STL), e.g. {printable(skipped[0])}", file=sys.stderr)
        self.batch = len(self.paths) > 1 or any(Path(p).is_dir() for p in args.scans)
        if args.reference == ["auto"]:
            self.references = [label_file_beside(p) for p in self.paths]
        elif "auto" in args.reference:
            raise ValueError("--reference auto stands alone (the label file beside each mesh), not among files")
        else:
            self.references = [Path(r) for r in args.reference]
        from pointmamba.evaluation.dentition import read_dentition_file

        self.dentitions = read_dentition_file(args.dentition_file) if args.dentition_file else {}
        self.segmenter = Segmenter(args.checkpoint, resolve_device(args.device, "--device"), infer,
                                   dentition=args.dentition)
        print(f"model: {printable(self.segmenter.checkpoint)}; inference: "
              + ", ".join(f"{k}={v}" for k, v in self.segmenter.infer.items()))
        self.failed: list[tuple[Path, str]] = []  # (scan, one-line reason), at the check or at run time
        self.inputs = self._check_inputs()
        self.plan = self._plan_outputs()
        self._warn_training_scans()

    # ------------------------------------------------------------------ before any work
    def _check_inputs(self) -> list[Any]:
        """The scans that pass the check; each one that does not is one line (all of them one error with
        --strict, or where none passes)."""
        from pointmamba.data.preflight import InputError, check_predict_inputs
        from pointmamba.data.units import grid_reach_mm
        from pointmamba.printable import printable
        from tqdm import tqdm

        args = self.args
        inputs = check_predict_inputs(self.paths, args.jaw, args.units, self.references,
                                      need_jaw=self.segmenter.num_classes == 17,
                                      warn=lambda m: tqdm.write(printable(m), file=sys.stderr),
                                      failed=None if args.strict else self.failed,
                                      max_extent_mm=grid_reach_mm(self.segmenter.config["data"].get("grid_size")),
                                      progress=len(self.paths) > 1)
        if not inputs:
            more = f" (and {len(self.failed) - 1} more bad inputs)" if len(self.failed) > 1 else ""
            raise InputError(self.failed[0][1] + more)
        for _, reason in self.failed:
            print(f"failed: {printable(reason)}", file=sys.stderr)
        return inputs

    def _warn_training_scans(self) -> None:
        """One line when a scan scored against a reference was among the model's training scans."""
        from pointmamba.training import training_scans

        scored = [item.path.stem for item in self.inputs if item.reference_labels is not None]
        if scored:
            line = training_scans.warning_line(self.segmenter.checkpoint, scored,
                                               *training_scans.of_checkpoints([self.segmenter.checkpoint]))
            if line:
                print(line, file=sys.stderr)

    def _plan_outputs(self) -> list[dict[str, Path]]:
        """Every file the run may write, checked (inside --out, never an input or a file it did not write)."""
        from pointmamba.cli.output_files import check_run_files, plan_outputs
        from pointmamba.data.scan_files import SUMMARY, label_file_beside

        paths = [item.path for item in self.inputs]
        self.protected = ([r for r in self.references if r is not None]
                          + [s for s in map(label_file_beside, self.paths) if s])
        suffixes = SCAN_FILES + (_tooth_suffixes() if self.args.export_teeth else ())
        plan = plan_outputs(paths, self.out, suffixes, self.args.overwrite, protected=self.protected)
        self.summary = self.out / SUMMARY if self.batch else None
        check_run_files([p for p in (self.summary, self.report) if p is not None], self.paths, plan,
                        self.args.overwrite, self.protected, out=self.out)
        return plan

    # ------------------------------------------------------------------ the work
    def predict_all(self) -> None:
        from pointmamba.atomic_file import write_csv
        from pointmamba.cli.output_files import lock_out_dir, make_out_dir
        from pointmamba.printable import printable
        from tqdm import tqdm

        make_out_dir(self.out)
        if self.lock is None:  # a new --out: locked now, and the plan checked again under the lock
            self.lock = lock_out_dir(self.out)
            self.plan = self._plan_outputs()
        self.page = None
        if self.report is not None:
            from pointmamba.report import ReviewPage

            self.page = ReviewPage(f"pointmamba review: {len(self.paths)} scan{'s' * (len(self.paths) != 1)}",
                                   model=f"model {self.segmenter.checkpoint.name}")
        rows: dict[Path, dict] = {path: self._failed_row(path, "", reason) for path, reason in self.failed}
        if self.page is not None:
            for path, reason in self.failed:
                self.page.add_failed(path.stem, reason, str(path))
        flagged = []
        bar = tqdm(list(zip(self.inputs, self.plan)), desc="predict", unit="scan",
                   disable=len(self.inputs) < 2 or self.args.no_progress)
        for item, files in bar:
            rows[item.path] = row = self._predict_one(item, files)
            if row["review"] == "yes":
                flagged.append(row["output"])
        bar.close()
        if self.summary is not None:
            write_csv(self.summary, [rows[p] for p in self.paths if p in rows], fieldnames=list(self._row_keys()))
        if self.page is not None:
            self.page.write(self.report)
        n = len(self.paths)
        done = n - len(self.failed)
        if n > 1 or flagged or self.failed:
            print(f"{len(flagged)} of {n} scan{'s' * (n != 1)} flagged for review"
                  + (f", {len(self.failed)} failed" if self.failed else "")
                  + (f"; summary: {printable(self.summary)}" if self.summary else "")
                  + (f"; review page: {printable(self.report)}" if self.report else ""))
        elif self.report is not None:
            print(f"review page: {printable(self.report)}")
        if self.failed:
            print(f"{len(self.failed)} of {n} scans failed ({done} done): see the 'failed:' lines", file=sys.stderr)
            sys.exit(SOME_FAILED)

    def _predict_one(self, item: Any, files: dict[str, Path]) -> dict:
        """Segment one checked scan and write its files; a failure costs one line, the scan's own files and
        nothing else (the full disk excepted, which stops the run)."""
        from pointmamba.atomic_file import DiskFullError
        from pointmamba.printable import printable
        from tqdm import tqdm

        stem = files[".json"].stem
        written: list[Path] = []
        try:
            return self._segment(item, files, stem, written)
        except Exception as exc:  # noqa: BLE001 - one bad scan never sinks the batch
            for path in written:
                path.unlink(missing_ok=True)
            if isinstance(exc, DiskFullError) or os.environ.get("POINTMAMBA_DEBUG"):
                raise
            reason = _reason(exc, item.path)
            self.failed.append((item.path, reason))
            tqdm.write(f"failed: {printable(reason)}", file=sys.stderr)
            if self.page is not None:
                self.page.add_failed(stem, reason, str(item.path))
            return self._failed_row(item.path, stem, reason)

    def _segment(self, item: Any, files: dict[str, Path], stem: str, written: list[Path]) -> dict:
        from pointmamba.data.preflight import checked_scan
        from pointmamba.printable import printable
        from pointmamba.timing import StepTimer, step
        from tqdm import tqdm

        args = self.args
        t0 = time.perf_counter()
        with StepTimer() as timer:  # seconds per step, shown with --verbose (pointmamba/timing.py)
            with step("load"):
                scan = checked_scan(item)  # read once, by the check
            scan.meta["name"] = stem
            progress = step_printer(str(item.path), item.num_vertices >= LARGE_SCAN_VERTICES)
            result = self.segmenter.segment(scan, item.units, progress, dentition=self.dentitions.get(item.path.stem))
            if progress:
                progress("writing results")
            with step("write"):
                written.append(result.save_json(files[".json"]))
                written.append(result.save_ply(files[".ply"]))
            ref = item.reference_labels  # read (and checked) once, by the check
            if progress:
                progress("drawing the picture")
            with step("picture"):
                written.append(result.save_png(files[".png"], reference=ref))
            if args.export_teeth:
                with step("write"):
                    teeth = result.save_teeth(self.out, stem)
                    written.extend(teeth)
                    for path in files.values():  # an earlier run's tooth that this run did not find
                        if path.suffix == ".stl" and path not in teeth and os.path.lexists(path):
                            path.unlink()
        metrics = result.compare(ref) if ref is not None else None
        seconds = time.perf_counter() - t0
        msg = (f"{printable(item.path)}: {scan.num_vertices} vertices, {seconds:.2f} s, teeth {result.teeth} -> "
               f"{printable(files['.json'])}")
        if args.verbose:
            msg += f"\n  steps: {timer.line()}"
        if metrics is not None:
            msg += (f"\n  vs reference: accuracy {metrics['accuracy']:.4f}, mIoU {metrics['miou']:.4f}, "
                    f"TSA {metrics['TSA']:.4f}, TLA {metrics['TLA']:.4f}, TIR {metrics['TIR']:.4f}")
        if result.review:
            msg += "\n" + printable(result.review_line())
        if self.page is not None:
            self.page.add(result, None if ref is None else ref.labels, metrics, files[".png"], str(item.path))
        tqdm.write(msg)
        return self._summary_row(item.path, stem, result, seconds, metrics)

    # ------------------------------------------------------------------ summary.csv
    def _row_keys(self) -> dict[str, None]:
        keys = ["scan", "output", "jaw", "vertices", "teeth", "num_teeth", "min_confidence", "review", "findings",
                "seconds"]
        if any(self.references):
            keys += ["accuracy", "miou", "TSA", "TLA", "TIR", "wrong_teeth"]
        return dict.fromkeys(keys + ["status", "error"])

    def _summary_row(self, path: Path, stem: str, result: Any, seconds: float, metrics: dict | None) -> dict:
        conf = result.confidence.min_confidence
        row = dict.fromkeys(self._row_keys())
        row.update({"scan": str(path), "output": stem, "jaw": result.jaw, "vertices": len(result.labels),
                    "teeth": " ".join(map(str, result.teeth)), "num_teeth": len(result.teeth),
                    "min_confidence": None if conf is None else round(conf, 4),
                    "review": "yes" if result.review else "no", "findings": "; ".join(result.confidence.reasons),
                    "seconds": round(seconds, 2), "status": "done"})
        if any(self.references):
            m = metrics or {}
            row.update({k: (round(m[k], 4) if k in m else None) for k in ("accuracy", "miou", "TSA", "TLA", "TIR")})
            row["wrong_teeth"] = " ".join(f"{p}->{r}" for p, r in m.get("wrong_teeth", {}).items())
        return row

    def _failed_row(self, path: Path, stem: str, reason: str) -> dict:
        row = dict.fromkeys(self._row_keys())
        row.update({"scan": str(path), "output": stem, "review": "failed", "status": "failed", "error": reason})
        return row

    @staticmethod
    def release(lock: int | None) -> None:
        if lock is not None:
            os.close(lock)  # the lock goes with the descriptor


def _reason(exc: BaseException, path: Path) -> str:
    """One line for a scan that failed while it was segmented: the error, naming the file."""
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, (ValueError, OSError)):  # not a known kind of bad input: say what it was
        text = f"{type(exc).__name__}: {text}"
    return text if str(path) in text else f"{path}: {text}"


def _tooth_suffixes() -> tuple[str, ...]:
    """Every name --export-teeth may write for a scan (the gingiva and each FDI number), so that all are
    checked up front although the teeth found are known only after the work."""
    from pointmamba.data.fdi import ALL_FDI
    from pointmamba.data.tooth_meshes import piece_name

    return tuple(piece_name("", label) for label in (0, *ALL_FDI))


def cli() -> None:
    """Entry point of ``pointmamba-predict``."""
    run_main(main)


if __name__ == "__main__":
    cli()
