"""Checking a data set scan by scan, for ``pointmamba-check-data``: readable mesh, labels vs vertices, FDI
numbers valid for the jaw, units (extent), completeness, the anatomical side check, and an upper canine or first
premolar whose crown is shaped as the other (:mod:`.crown_shape`), a lower side numbered without its canine
(:mod:`.lower_canine`), and a tooth number labelled in two places (:mod:`.label_pieces`).

Each scan gets a :class:`ScanReport` with a status: ``ok``, ``warn`` (usable, but look at it: e.g. the
side check cannot decide) or ``FAIL`` (do not train on it: unreadable, wrong units, mirrored labels).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from .anatomy import side_check
from .crown_shape import CHECKED_JAW, number_shape_findings
from .errors import ScanWarning
from .integrity import check_jaw_size
from .label_pieces import scattered_label_findings
from .lower_canine import missing_canine_findings
from .mesh import apply_transform
from .pose import canonical_pose
from .units import JAW_EXTENT_MM, infer_units


@dataclass
class ScanReport:
    name: str
    path: Path
    status: str = "ok"
    vertices: int | None = None
    extent: float | None = None  # longest principal extent, file units
    units: str = ""
    teeth: int | None = None
    side: str = ""
    problems: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.status = "FAIL"
        self.problems.append(message)

    def warn(self, message: str) -> None:
        if self.status == "ok":
            self.status = "warn"
        self.problems.append(message)


def _short(message: str, path: Path) -> str:
    """The message without the leading file path (the table names the scan)."""
    for prefix in (f"{path}: ", f"{path.with_suffix('.json')}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def check_scan(path: str | PathLike, name: str | None = None) -> ScanReport:
    """Check one mesh and the label file beside it (``<stem>.json``)."""
    from .scan import load_scan

    path = Path(path)
    report = ScanReport(name or path.stem, path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ScanWarning)
            scan = load_scan(path)
    except (ValueError, FileNotFoundError) as exc:
        report.fail(_short(str(exc), path))
        return report
    for w in caught:
        if issubclass(w.category, ScanWarning):
            report.warn(_short(str(w.message), path))
    report.vertices = scan.num_vertices
    in_mm = False
    try:
        check_jaw_size(scan.vertices, path)
    except ValueError as exc:
        report.fail(_short(str(exc), path))
    try:
        decision = infer_units(scan.vertices, "auto", path)
        report.units, report.extent = decision.units, decision.extent
        in_mm = decision.factor == 1.0
        if not in_mm:
            report.fail(f"{decision.extent:.4g} across: looks like {decision.units}, not mm (a jaw is "
                        f"{JAW_EXTENT_MM[0]:g}-{JAW_EXTENT_MM[1]:g} mm across)")
    except ValueError as exc:
        report.units = "?"
        report.fail(_short(str(exc), path))
    if scan.labels is None:
        report.warn("no label file beside the mesh")
        return report
    report.teeth = int(len(np.unique(scan.labels[scan.labels > 0])))
    if in_mm:  # the gap between pieces is measured in mm
        for finding in scattered_label_findings(scan.vertices, scan.faces, scan.labels):
            report.warn(finding)
    if scan.jaw is None:
        report.warn("jaw unknown (neither label file nor file name says)")
        return report
    result = side_check(scan.vertices, scan.labels, scan.jaw)
    report.side = result.verdict if np.isnan(result.score) else f"{result.verdict} ({result.score:+.2f})"
    if result.mirrored:
        report.fail(f"mirrored: {result.reason}")
    elif result.verdict != "ok":
        report.warn(f"side check undecided: {result.reason}")
    for finding in missing_canine_findings(scan.labels, scan.jaw):
        report.warn(finding)
    if scan.jaw == CHECKED_JAW:  # the pose is worked out only where the crowns are checked
        aligned = apply_transform(scan.vertices, canonical_pose(scan.vertices, scan.faces, labels=scan.labels))
        for finding in number_shape_findings(aligned, scan.labels, scan.jaw):
            report.warn(finding)
    return report


def check_directory(root: str | PathLike) -> list[ScanReport]:
    """A report for every ``<ID>_<jaw>`` mesh under ``root`` (any depth), sorted by name."""
    from .dataset import find_scans

    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: data directory not found")
    found = find_scans(root)
    if not found:
        raise FileNotFoundError(f"{root}: no <ID>_<jaw>.obj|ply|stl scans found (Teeth3DS layout)")
    return [check_scan(path, name) for name, path in found.items()]


def format_table(reports: list[ScanReport]) -> str:
    """A Markdown table, one row per scan, and a summary line."""
    rows = ["| scan | vertices | extent | units | teeth | side | status | problems |",
            "|---|---:|---:|---|---:|---|---|---|"]
    for r in reports:
        extent = f"{r.extent:.4g}" if r.extent is not None else ""
        rows.append(f"| {r.name} | {r.vertices if r.vertices is not None else ''} | {extent} | {r.units} | "
                    f"{r.teeth if r.teeth is not None else ''} | {r.side} | {r.status} | {'; '.join(r.problems)} |")
    counts = {s: sum(r.status == s for r in reports) for s in ("ok", "warn", "FAIL")}
    rows.append("")
    rows.append(f"{len(reports)} scans: {counts['ok']} ok, {counts['warn']} with warnings, {counts['FAIL']} failed")
    return "\n".join(rows)
