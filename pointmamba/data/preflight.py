"""Check every input before any work: a bad file stops a tool in its first second, not after an epoch
of training or after half of the outputs were written.

``check_predict_inputs`` reads every scan (and ``--reference``) that ``tools/predict.py`` was given, and
keeps what it read for the prediction (up to :data:`KEEP_VERTICES` over all inputs), so that each file is
read, and each of its warnings shown, once; a bad one stops the tool, or (given a ``failed`` list) is set
aside with its one-line reason while the others go on;
``check_dataset`` loads (and caches) every scan of a training or validation set; ``mirrored_scans``
runs the anatomical side check (:mod:`pointmamba.data.anatomy`) on labelled training scans.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .errors import ScanFormatError, ScanWarning
from .integrity import check_jaw_size
from .units import UnitsDecision, check_fits, check_millimetres, infer_units


KEEP_VERTICES = 10_000_000
"""Vertices (over all inputs) that the check keeps in memory for the prediction (about 750 MB with their
faces: a 3.2M-vertex scan, or some 70 scans of 150k); inputs beyond are read again when their turn comes."""


class InputError(ValueError):
    """One or more inputs that cannot be used; the message names the first and counts the others."""


def _raise_collected(problems: list[str], what: str) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more bad {what})" if len(problems) > 1 else ""
        raise InputError(problems[0] + more)


def _named(exc: BaseException, path: Any, *others: Any) -> str:
    """The error text, prefixed by ``path`` where it names none of the files involved."""
    text = str(exc)
    return text if any(str(p) in text for p in (path, *others) if p is not None) else f"{path}: {text}"


# ------------------------------------------------------------------------------ predict
@dataclass
class PredictInput:
    """A checked scan for prediction: its jaw, its units decision and its vertex count; the scan and the
    reference labels as read by the check (``scan`` None: read again by :func:`checked_scan`)."""

    path: Path
    jaw: str | None
    units: UnitsDecision
    num_vertices: int
    reference: Path | None = None
    scan: Any = None
    reference_labels: Any = None  # LabelFile


def _sidecar_jaw(path: Path) -> str | None:
    """The jaw a label file beside the mesh names, read leniently (prediction does not need its labels,
    so a stale or broken one must not stop it)."""
    from .teeth3ds import load_json

    try:
        doc = load_json(path.with_suffix(".json"))
    except (OSError, ValueError):
        return None
    jaw = doc.get("jaw") if isinstance(doc, dict) else None
    return jaw.strip().lower() if isinstance(jaw, str) and jaw.strip().lower() in ("upper", "lower") else None


def load_predict_scan(path: str | Path, jaw: str | None = None) -> Any:  # -> Scan
    """The mesh at ``path`` without its labels; the jaw from ``jaw``, the file name or a label file beside it."""
    from .scan import jaw_from_name, load_scan

    path = Path(path)
    if jaw is None and jaw_from_name(path.name) is None:
        jaw = _sidecar_jaw(path)
    return load_scan(path, labels=False, jaw=jaw)


def check_predict_inputs(scans: Sequence[str | Path], jaw: str | None = None, units: str = "auto",
                         references: Sequence[str | Path | None] = (), jaw_by_stem: Mapping[str, str] | None = None,
                         warn: Callable[[str], None] = print, failed: list[tuple[Path, str]] | None = None,
                         max_extent_mm: float = float("inf"), progress: bool = False) -> list[PredictInput]:
    """Read and check every scan (and reference: one per scan, None for a scan without) now; raise
    :class:`InputError` for the first bad one (counting the others), or, where ``failed`` is a list, append
    ``(path, one-line reason)`` to it for each bad one and return the good ones. A scan wider than
    ``max_extent_mm`` in its units (what the model's grid holds) is a bad one. Unit warnings are passed to
    ``warn`` once, here; ``progress`` shows a progress bar (a large folder takes minutes). A scan's jaw is
    ``jaw_by_stem``'s for its stem, else ``jaw``, else its name's or its label file's, else None (told from
    its teeth at prediction)."""
    from tqdm import tqdm

    from .teeth3ds import read_labels

    if references and len(references) != len(scans):
        raise InputError(f"--reference needs one JSON per scan ({len(scans)}), got {len(references)}")
    checked: list[PredictInput] = []
    problems: list[str] = []
    kept = 0
    for i, path in enumerate(tqdm(scans, desc="checking scans", unit="scan", disable=not progress, leave=False)):
        path = Path(path)
        try:
            scan = load_predict_scan(path, (jaw_by_stem or {}).get(path.stem, jaw))  # None: told from the teeth
            check_jaw_size(scan.vertices, path)
            decision = infer_units(scan.vertices, units, path)
            check_fits(decision, max_extent_mm, path)
            ref = labels = None
            if references and references[i] is not None:
                ref = Path(references[i])
                labels = read_labels(ref, scan.num_vertices)
                if scan.jaw is not None and labels.jaw != scan.jaw:
                    raise ScanFormatError(ref, "jaw", f"reference is a {labels.jaw} jaw but {path} is {scan.jaw}")
        except (ValueError, OSError) as exc:  # OSError: unreadable, vanished, a read error of the disk
            problems.append(_named(exc, path, references[i] if references else None))
            if failed is not None:
                failed.append((path, problems.pop()))
            continue
        if decision.warning:
            warn(f"warning: {decision.warning}")
        keep = kept + scan.num_vertices <= KEEP_VERTICES
        kept += scan.num_vertices if keep else 0
        checked.append(PredictInput(path, scan.jaw, decision, scan.num_vertices, ref, scan if keep else None, labels))
    _raise_collected(problems, "inputs")
    return checked


def checked_scan(item: PredictInput) -> Any:  # -> Scan
    """The scan of a checked input as in its file: the one its check read (handed over once, then
    released), else read again without repeating the check's warnings."""
    scan, item.scan = item.scan, None
    if scan is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScanWarning)  # shown when the check read it
            scan = load_predict_scan(item.path, item.jaw)
    return scan


# ------------------------------------------------------------------------------ data sets
def check_dataset(dataset: Any, what: str, progress: bool = False) -> None:
    """Load (and cache) every scan of a :class:`~pointmamba.data.Teeth3DSDataset` now, and check it is a jaw
    in mm; raise :class:`InputError` naming the first bad file (and counting the others)."""
    from tqdm import tqdm

    problems: list[str] = []
    for i in tqdm(range(len(dataset)), desc=f"checking {what} scans", disable=not progress, leave=False):
        path = dataset.paths[i]
        try:
            data = dataset.preprocessed(i)
            check_jaw_size(data["vertices"], path)
            check_millimetres(data["vertices"], path)
        except (ValueError, FileNotFoundError) as exc:
            problems.append(_named(exc, path))
    if problems:
        root = getattr(dataset, "root", "DIR")
        _raise_collected([f"{what} set: {p}" for p in problems[:1]] + problems[1:],
                         f"{what} scans; pointmamba-check-data {root} lists them all")


def mirrored_scans(dataset: Any) -> list[tuple[Path, str]]:
    """(path, reason) for every labelled scan of ``dataset`` whose labels the side check finds mirrored."""
    from .anatomy import side_check

    found = []
    for i in range(len(dataset)):
        data = dataset.preprocessed(i)
        if "labels" not in data:
            continue
        result = side_check(data["vertices"], data["labels"], str(data["jaw"]))
        if result.mirrored:
            found.append((dataset.paths[i], result.reason))
    return found
