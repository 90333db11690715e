#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN_OR_FOLDER [...] [--checkpoint CKPT] [--jaw upper|lower] [--jaw-file CSV]
                     [--units auto|mm|cm|m|in] --out DIR
                     [--overwrite] [--reference JSON ... | --reference auto] [--set infer.KEY=VALUE ...]
                     [--report DIR/index.html] [--export-teeth] [--strict] [--skip-existing] [--layout flat|per-scan]
                     [--dentition auto|permanent|mixed] [--dentition-file CSV]

Without --checkpoint the shipped model (pointmamba/checkpoints/, see its MODEL_CARD.md) is used. A folder
stands for every mesh under it (recursive, sorted; the Teeth3DS layout <ID>/<ID>_<jaw>.obj included), with
one progress bar. ``--reference auto`` takes the label file beside each mesh (<stem>.json, the Teeth3DS
layout) as its reference where there is one.

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances; plus "confidence": each tooth's probability of its number and the runner-up, the
scan's lowest, "review" and its findings), DIR/<stem>.ply (the mesh coloured by class, with an FDI
`label` vertex property) and DIR/<stem>.png (the shaded mesh coloured by tooth with FDI numbers; with a
reference, the reference beside it and the wrong vertices marked); with --export-teeth one STL per tooth,
DIR/<stem>_<FDI>.stl, and DIR/<stem>_gingiva.stl, together exactly the scan's faces in its own units.
--layout per-scan puts each scan's files in a folder of its own, DIR/<stem>/<stem>.json ... (flat, all in DIR,
is the default). A scan flagged for review gets one line ("MSN023_lower: review tooth 35 (0.52; 34: 0.41)").
With a folder or several scans, DIR/summary.csv has a row per scan (teeth, review, time, metrics with
references, status: done, failed or skipped) and DIR/run.json records the run (checkpoint and its sha256,
every inference option, versions, counts); --report writes one self-contained HTML page to review them all
in 3D (opens from disk, no network). The model line is short ("model: NAME (sha256 12 hex), inference:
defaults"); --verbose adds the checkpoint's path and every inference option.

--skip-existing resumes a batch into the same DIR: a scan an earlier run finished with the same checkpoint
and options is skipped (its summary row kept), and one it left half written is redone, its files replaced.
"Finished" is a done-record written after all of a scan's files (DIR/.pointmamba-predict/done/<stem>.json,
listing each file and its size; see pointmamba/cli/done_records.py). The review page shows the scans
segmented in this run only.

--dentition says how a side of canine, one premolar-sized tooth, then molars is numbered: permanent (an
adult's premolar space closed: premolar 5, first molar 6) or mixed (a child's primary molars 4, 5, first
molar 6); auto (default) picks the likelier, flags the scan naming both readings and writes the other
reading's number as each tooth's "alternative" in the JSON. --dentition-file gives it per scan: CSV rows
"scan stem,dentition". Arches without that side are numbered alike under all three.

The jaw comes from --jaw-file's row for the scan, else --jaw, else the file name (*_upper / *_lower) or a
label file beside it, else from the teeth: the arch numbered under both jaws' tooth widths, the likelier
kept (the JSON's confidence.jaw holds the margin; a thin one, or a named jaw the teeth contradict, is
flagged for review; docs/results/jaw_from_teeth). Scans in cm or
m are detected from their size and scaled to mm with a warning (--units to say; inches only by --units in). A
model's base (walls on a flat plate) is left out and labelled gingiva, with a warning (infer.model_base); a mesh
wound inside out is segmented with its faces reversed, with a warning, and flagged (infer.orient_faces; a
mirrored mesh is wound so too); one wound part one way, part the other is first wound one way, with a warning
(infer.consistent_winding). Every output and then
every input is checked before the model loads, so before any work; nothing is written over an input or a file this run
did not write (--overwrite replaces earlier results, and removes an earlier run's tooth meshes of the same
scan; --skip-existing those of the scans it redoes), nor outside DIR; inputs
sharing a file name get their folder's name as a prefix. A folder's files that an earlier run wrote (a
predicted PLY, tooth STLs) are not read as scans, and DIR is not entered. One run at a time writes DIR.

One bad scan costs one line ("failed: <file>: <what is wrong>"), never the batch: a scan that fails the
check or fails while it is segmented is listed as failed in summary.csv and on the page, and the others
go on. --strict stops instead, before any work, at the first scan that fails the check.

Exit status: 0 every scan done (or skipped, finished earlier); 1 some scans failed, the others done; 2 nothing done (a bad argument or
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
GINGIVA = "_gingiva.stl"
"""The tooth file every --export-teeth run writes (a scan has gingiva; its teeth are known only after)."""
LARGE_SCAN_VERTICES = 200_000
"""From this many vertices a scan's steps are shown as they start (minutes each at millions of vertices)."""
SOME_FAILED = 1
"""Exit status when some scans failed and the others were done."""


def build_parser() -> argparse.ArgumentParser:
    from ..data.units import UNIT_CHOICES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl) or folders of them (recursive)")
    parser.add_argument("--checkpoint", help="checkpoint written by tools/train.py (default: the shipped model)")
    parser.add_argument("--jaw", choices=("upper", "lower"),
                        help="jaw of every scan (default: the file name or a label file beside it, else told from "
                             "the teeth)")
    parser.add_argument("--jaw-file", metavar="CSV", help="per-scan jaw: rows 'scan stem,upper|lower' (over --jaw "
                                                          "for the scans it names)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[],
                        help="ground-truth Teeth3DS JSON per scan, or 'auto' (the label file beside each mesh): "
                             "prints metrics")
    parser.add_argument("--units", default="auto", choices=UNIT_CHOICES,
                        help="units of the scans' coordinates (auto: from their size, never inches; the model works "
                             "in mm)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing files in --out (never an input)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="inference switches, e.g. --set infer.graph_cut=false infer.mirror_tta=false")
    parser.add_argument("--report", metavar="HTML", help="write a review page of all scans (e.g. DIR/index.html)")
    parser.add_argument("--export-teeth", action="store_true",
                        help="also write each tooth as DIR/<stem>_<FDI>.stl and the gingiva as DIR/<stem>_gingiva.stl")
    parser.add_argument("--strict", action="store_true",
                        help="stop before any work if any scan fails the check (default: skip it with one line)")
    parser.add_argument("--skip-existing", action="store_true",
                        help="resume a batch into the same --out: skip the scans an earlier run finished, redo "
                             "the half-written ones")
    parser.add_argument("--layout", choices=("flat", "per-scan"), default="flat",
                        help="flat: every file in --out (default); per-scan: a folder per scan, DIR/<stem>/")
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
    """One ``predict`` run: its checked inputs, planned outputs, and the scans done, skipped and failed.

    Everything is checked in the constructor, in this order: the arguments, the outputs (which need nothing
    of the model), the checkpoint's stored config (classes and grid: the input check needs them), the scans
    an earlier run finished (``--skip-existing``), the inputs; the network is built last, and only where a
    scan is left to segment.
    """

    def __init__(self, args: argparse.Namespace, out: Path, lock: int | None) -> None:
        from pointmamba.cli.output_files import OutputError, check_out_dir
        from pointmamba.data.scan_files import expand_scan_paths, label_file_beside
        from pointmamba.utils.printable import printable
        from pointmamba.checkpoints.shipped import resolve_checkpoint

        # everything checked before any work or output (see pointmamba/data/preflight.py, output_files.py)
        self.args, self.out, self.lock = args, out, lock
        self.started = time.time()
        if args.skip_existing and args.overwrite:
            raise ValueError("--skip-existing keeps the scans an earlier run finished, --overwrite redoes them: "
                             "pass one of them")
        self.infer = infer_overrides(args.overrides)
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
        self.index = {p: i for i, p in enumerate(self.paths)}
        self.batch = len(self.paths) > 1 or any(Path(p).is_dir() for p in args.scans)
        if args.reference == ["auto"]:
            self.references = [label_file_beside(p) for p in self.paths]
        elif "auto" in args.reference:
            raise ValueError("--reference auto stands alone (the label file beside each mesh), not among files")
        else:
            self.references = [Path(r) for r in args.reference]
        from pointmamba.inference.dentition import read_dentition_file

        self.dentitions = read_dentition_file(args.dentition_file) if args.dentition_file else {}
        from pointmamba.data.scan_table import read_scan_table

        self.jaws = read_scan_table(args.jaw_file, "jaw", ("upper", "lower")) if args.jaw_file else {}
        self.failed: list[tuple[Path, str]] = []  # (scan, one-line reason), at the check or at run time
        self.plan = dict(zip(self.paths, self._plan_outputs()))  # the outputs first: before the model loads
        self.checkpoint = resolve_checkpoint(args.checkpoint)
        num_classes, grid_size = _checkpoint_facts(self.checkpoint)
        self.sha256 = _sha256(self.checkpoint)
        self.rows: dict[Path, dict] = {}  # summary row per scan, in the order of self.paths when written
        todo = self._skip_complete() if args.skip_existing else list(self.paths)
        self.inputs = self._check_inputs(todo, num_classes, grid_size) if todo else []
        self._warn_training_scans()
        self.segmenter = self._load_model() if self.inputs else None

    # ------------------------------------------------------------------ before any work
    def _plan_outputs(self) -> list[dict[str, Path]]:
        """Every file the run may write, per scan and its own, checked (inside --out, never an input or a
        file it did not write); :attr:`summary` and :attr:`run_file` set."""
        from pointmamba.cli.output_files import (RUN_FILE, check_report_pages, check_run_files, check_state_dir,
                                                 plan_outputs)
        from pointmamba.data.scan_files import SUMMARY, label_file_beside

        args = self.args
        replace = args.overwrite or args.skip_existing
        self.protected = ([r for r in self.references if r is not None]
                          + [s for s in map(label_file_beside, self.paths) if s])
        suffixes = SCAN_FILES + (_tooth_suffixes() if args.export_teeth else ())
        plan = plan_outputs(self.paths, self.out, suffixes, replace, protected=self.protected,
                            per_scan=args.layout == "per-scan")
        self.summary = self.out / SUMMARY if self.batch else None
        self.run_file = self.out / RUN_FILE if self.batch else None
        own = [p for p in (self.summary, self.run_file, self.report) if p is not None]
        check_run_files(own, self.paths, plan, replace, self.protected, out=self.out)
        check_state_dir(self.out)
        if self.report is not None:  # the page's chunk pages beside it: named only at the end
            planned = [path for files in plan for path in files.values()] + own[:-1]
            check_report_pages(self.report, planned, [*self.paths, *self.protected], replace)
        return plan

    def _settings(self, path: Path) -> dict[str, Any]:
        """What made a scan's result: a done-record with other settings is not this run's (redone)."""
        from pointmamba.config import resolve_infer

        i = self.index[path]  # every inference option, defaults included: a changed default redoes the scan
        return {"checkpoint_sha256": self.sha256, "infer": resolve_infer(self.infer), "units": self.args.units,
                "jaw": self.jaws.get(path.stem, self.args.jaw), "dentition": self.dentitions.get(path.stem, self.args.dentition),
                "reference": None if not self.references or self.references[i] is None else str(self.references[i])}

    def _skip_complete(self) -> list[Path]:
        """The scans to do: those an earlier run finished (see done_records.py) get their recorded summary
        row, status "skipped", and one line."""
        from pointmamba.cli.done_records import complete_row

        todo = []
        for path in self.paths:
            files = self.plan[path]
            needed = [files[s] for s in SCAN_FILES] + ([files[GINGIVA]] if self.args.export_teeth else [])
            row = complete_row(self.out, files[".json"].stem, path, self._settings(path), needed)
            if row is None:
                todo.append(path)
            else:
                self.rows[path] = {**{k: row.get(k) for k in self._row_keys()}, "status": "skipped"}
        if self.rows:
            print(f"skipped {len(self.rows)} of {len(self.paths)} scans that an earlier run finished "
                  f"(--skip-existing){'; nothing left to do' if not todo else ''}", file=sys.stderr)
            if self.report is not None and todo:
                print("warning: the review page shows the scans segmented in this run; the skipped ones are in "
                      "summary.csv", file=sys.stderr)
        return todo

    def _check_inputs(self, paths: list[Path], num_classes: int, grid_size: Any) -> list[Any]:
        """The scans that pass the check; each one that does not is one line (all of them one error with
        --strict, or where none passes)."""
        from pointmamba.data.preflight import InputError, check_predict_inputs
        from pointmamba.data.units import grid_reach_mm
        from pointmamba.utils.printable import printable
        from tqdm import tqdm

        args = self.args
        references = [self.references[self.index[p]] for p in paths] if self.references else []
        inputs = check_predict_inputs(paths, args.jaw, args.units, references, jaw_by_stem=self.jaws,
                                      warn=lambda m: tqdm.write(printable(m), file=sys.stderr),
                                      failed=None if args.strict else self.failed,
                                      max_extent_mm=grid_reach_mm(grid_size), progress=len(paths) > 1)
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
            line = training_scans.warning_line(self.checkpoint, scored, *training_scans.of_checkpoints([self.checkpoint]))
            if line:
                print(line, file=sys.stderr)

    def _load_model(self) -> Any:
        """The network, once every check has passed; one short line says which (details with --verbose)."""
        from pointmamba.config import resolve_infer
        from pointmamba.utils.device import resolve_device
        from pointmamba.utils.printable import printable
        from pointmamba.inference.segmenter import Segmenter

        segmenter = Segmenter(self.checkpoint, resolve_device(self.args.device, "--device"), self.infer,
                              dentition=self.args.dentition)
        defaults = resolve_infer(None)
        changed = {k: v for k, v in segmenter.infer.items() if defaults.get(k) != v}
        line = (f"model: {printable(self.checkpoint.name)} (sha256 {self.sha256[:12]}), inference: "
                + (", ".join(f"{k}={v}" for k, v in changed.items()) + " (others default)" if changed else "defaults"))
        if self.run_file is not None:
            line += f"; details in {self.run_file.name}"  # beside summary.csv, whose path the last line prints
        if self.args.verbose:
            line += (f"\n  checkpoint: {printable(self.checkpoint.resolve())}; device: {segmenter.device}\n  inference: "
                     + ", ".join(f"{k}={v}" for k, v in segmenter.infer.items()))
        print(line)
        return segmenter

    # ------------------------------------------------------------------ the work
    def predict_all(self) -> None:
        from pointmamba.utils.atomic_file import write_csv
        from pointmamba.cli.output_files import STATE_DIR, lock_out_dir, make_out_dir
        from pointmamba.utils.printable import printable
        from tqdm import tqdm

        make_out_dir(self.out)
        if self.lock is None:  # a new --out: locked now, and the plan checked again under the lock
            self.lock = lock_out_dir(self.out)
            self.plan = dict(zip(self.paths, self._plan_outputs()))
        self.page = None
        if self.report is not None and (self.inputs or self.failed):  # all skipped: the earlier page stays
            from pointmamba.report import ReviewPage

            spool = make_out_dir(self.out / STATE_DIR)  # scans spooled inside --out, not in the system's temp
            self.page = ReviewPage(f"pointmamba review: {len(self.paths)} scan{'s' * (len(self.paths) != 1)}",
                                   model=f"model {self.checkpoint.name}", spool=spool)
        for path, reason in self.failed:
            self.rows[path] = self._failed_row(path, "", reason)
            if self.page is not None:
                self.page.add_failed(path.stem, reason, str(path))
        bar = tqdm(self.inputs, desc="predict", unit="scan", disable=len(self.inputs) < 2 or self.args.no_progress)
        for item in bar:
            self.rows[item.path] = self._predict_one(item, self.plan[item.path])
        bar.close()
        rows = [self.rows[p] for p in self.paths if p in self.rows]
        if self.summary is not None:
            write_csv(self.summary, rows, fieldnames=list(self._row_keys()))
            self._write_run_file(rows)
        if self.page is not None:
            self.page.write(self.report)
        n = len(self.paths)
        done = n - len(self.failed)
        skipped = sum(r["status"] == "skipped" for r in rows)
        flagged = sum(r["review"] == "yes" for r in rows)
        if n > 1 or flagged or self.failed:
            print(f"{flagged} of {n} scan{'s' * (n != 1)} flagged for review"
                  + (f", {len(self.failed)} failed" if self.failed else "")
                  + (f", {skipped} skipped (finished earlier)" if skipped else "")
                  + (f"; summary: {printable(self.summary)}" if self.summary else "")
                  + (f"; review page: {printable(self.report)}" if self.page else ""))
        elif self.page is not None:
            print(f"review page: {printable(self.report)}")
        if self.failed:
            print(f"{len(self.failed)} of {n} scans failed ({done} done): see the 'failed:' lines", file=sys.stderr)
            sys.exit(SOME_FAILED)

    def _write_run_file(self, rows: list[dict]) -> None:
        """DIR/run.json: what made this batch (checkpoint and its sha256, every inference option, versions)."""
        import platform

        import numpy
        import torch

        from pointmamba import __version__
        from pointmamba.utils.atomic_file import atomic_write
        from pointmamba.utils.finite_json import dumps

        args = self.args
        status = [r["status"] for r in rows]
        doc = {"tool": "predict", "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
               "seconds": round(time.time() - self.started, 1),
               "checkpoint": str(self.checkpoint.resolve()), "checkpoint_sha256": self.sha256,
               "inference": self.segmenter.infer if self.segmenter else {**self.infer, "dentition": args.dentition},
               "device": str(self.segmenter.device) if self.segmenter else None,
               "options": {"jaw": args.jaw, "jaw_file": args.jaw_file, "units": args.units, "dentition": args.dentition,
                           "dentition_file": args.dentition_file, "export_teeth": args.export_teeth,
                           "layout": args.layout, "skip_existing": args.skip_existing, "overwrite": args.overwrite,
                           "report": None if self.report is None else str(self.report)},
               "versions": {"pointmamba": __version__, "python": platform.python_version(), "torch": torch.__version__,
                            "numpy": numpy.__version__, "platform": platform.platform()},
               "scans": len(rows), "done": status.count("done"), "skipped": status.count("skipped"),
               "failed": status.count("failed")}
        atomic_write(self.run_file, dumps(doc, indent=1).encode("utf-8"))

    def _predict_one(self, item: Any, files: dict[str, Path]) -> dict:
        """Segment one checked scan and write its files; a failure costs one line, the scan's own files and
        nothing else (the full disk excepted, which stops the run)."""
        from pointmamba.utils.atomic_file import DiskFullError
        from pointmamba.cli.done_records import forget
        from pointmamba.utils.printable import printable
        from tqdm import tqdm

        stem = files[".json"].stem
        written: list[Path] = []
        forget(self.out, stem)  # before a file is replaced: a run stopped mid-scan leaves it to be redone
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
        from pointmamba.cli.done_records import write_record
        from pointmamba.data.preflight import checked_scan
        from pointmamba.utils.printable import printable
        from pointmamba.utils.timing import StepTimer, step
        from tqdm import tqdm

        args = self.args
        folder = files[".json"].parent
        t0 = time.perf_counter()
        with StepTimer() as timer:  # seconds per step, shown with --verbose (pointmamba/utils/timing.py)
            with step("load"):
                scan = checked_scan(item)  # read once, by the check
            scan.meta["name"] = stem
            progress = step_printer(str(item.path), item.num_vertices >= LARGE_SCAN_VERTICES)
            result = self.segmenter.segment(scan, item.units, progress, dentition=self.dentitions.get(item.path.stem))
            if progress:
                progress("writing results")
            folder.mkdir(exist_ok=True)  # --layout per-scan: the scan's folder, checked with the plan
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
                    teeth = result.save_teeth(folder, stem)
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
            # no picture: the page draws its own thumbnail (the occlusal view, numbers readable at card size)
            self.page.add(result, None if ref is None else ref.labels, metrics, source=str(item.path))
        row = self._summary_row(item.path, stem, result, seconds, metrics)
        write_record(self.out, stem, item.path, self._settings(item.path), written, row)  # last: the scan is done
        tqdm.write(msg)
        return row

    # ------------------------------------------------------------------ summary.csv
    def _row_keys(self) -> dict[str, None]:
        keys = ["scan", "output", "jaw", "vertices", "teeth", "num_teeth", "min_confidence", "review", "findings",
                "seconds", "dentition", "jaw_from"]
        if any(self.references):
            keys += ["accuracy", "miou", "TSA", "TLA", "TIR", "wrong_teeth"]
        return dict.fromkeys(keys + ["status", "error"])

    def _summary_row(self, path: Path, stem: str, result: Any, seconds: float, metrics: dict | None) -> dict:
        conf = result.confidence.min_confidence
        row = dict.fromkeys(self._row_keys())
        call = result.confidence.jaw or {}  # given (a name, --jaw) or told from the teeth, with its margin
        jaw_from = f"{call['source']} ({call['margin_nats']} nats)" if call.get("source") == "teeth" else "given"
        row.update({"scan": str(path), "output": stem, "jaw": result.jaw, "jaw_from": jaw_from,
                    "vertices": len(result.labels),
                    "teeth": " ".join(map(str, result.teeth)), "num_teeth": len(result.teeth),
                    "min_confidence": None if conf is None else round(conf, 4),
                    "review": "yes" if result.review else "no", "findings": "; ".join(result.confidence.reasons),
                    "seconds": round(seconds, 2), "status": "done", "dentition": _dentition_cell(result)})
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


def _checkpoint_facts(checkpoint: Path) -> tuple[int, Any]:
    """(number of classes, grid size) from the checkpoint's stored config, without building the network:
    the input check needs them (the grid bounds a scan's size)."""
    from pointmamba.checkpoints.checkpoint import stored_config

    config = stored_config(checkpoint)
    return int(config["data"]["num_classes"]), config["data"].get("grid_size")


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _dentition_cell(result: Any) -> str:
    """summary.csv's ``dentition``: the reading used for a side of canine, one premolar, molars and how it
    was chosen ("permanent (given)", "mixed (auto)"); empty for an arch without such a side."""
    reading = result.confidence.dentition or {}
    if not reading.get("used"):
        return ""
    return f"{reading['used']} ({'auto' if reading['requested'] == 'auto' else 'given'})"


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
