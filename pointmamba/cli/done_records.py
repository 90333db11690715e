"""Which scans an earlier ``predict`` run into the same ``--out`` finished (``--skip-existing``).

Per scan, the run writes its files first (JSON, PLY, PNG, the tooth STLs), then, last, a done-record:
``out/.pointmamba-predict/done/<stem>.json`` with the scan file (path, size, modification time), the
settings that made the result (checkpoint sha256, inference options, dentition, reference), every file
written with its size, and the scan's row of ``summary.csv``. A scan counts as complete only when its
record is there, names the same scan file and settings, and every file it lists is there at its size, the
files this run would write among them. Anything else is redone: a run killed mid-scan left no record, a
file deleted or cut short, another checkpoint or ``--set``, ``--export-teeth`` added. A scan redone (or
rewritten with ``--overwrite``) loses its record before its first file is replaced.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from pointmamba.cli.output_files import STATE_DIR

DONE = "done"


def record_path(out: str | Path, stem: str) -> Path:
    """``out/.pointmamba-predict/done/<stem>.json``."""
    return Path(out) / STATE_DIR / DONE / f"{stem}.json"


def _source(path: Path) -> dict[str, Any]:
    st = os.stat(path)
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, paths as text), so that settings compare equal."""
    return json.loads(json.dumps(value, default=str))


def write_record(out: str | Path, stem: str, source: Path, settings: dict[str, Any], files: Iterable[Path],
                 row: dict[str, Any]) -> Path:
    """Record that scan ``source`` is done: ``files`` (in ``out``) written with ``settings``; ``row`` its
    summary row. Written atomically, after the files."""
    from pointmamba.utils.atomic_file import atomic_write
    from pointmamba.utils.finite_json import dumps

    out = Path(out)
    path = record_path(out, stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"scan": _source(source), "settings": _plain(settings),
           "files": {str(f.relative_to(out)): f.stat().st_size for f in files}, "row": _plain(row)}
    return atomic_write(path, dumps(doc, indent=1).encode("utf-8"))


def complete_row(out: str | Path, stem: str, source: Path, settings: dict[str, Any],
                 needed: Iterable[Path]) -> dict[str, Any] | None:
    """The summary row of scan ``source`` where an earlier run finished it (see the module doc) with the
    same ``settings`` and wrote every file of ``needed``; else None (the scan is to be done)."""
    out = Path(out)
    try:
        doc = json.loads(record_path(out, stem).read_text(encoding="utf-8"))
        if doc["scan"] != _source(source) or doc["settings"] != _plain(settings):
            return None
        files: dict[str, int] = doc["files"]
        if any(str(f.relative_to(out)) not in files for f in needed):
            return None
        for name, size in files.items():
            file = out / name
            if not file.is_file() or file.stat().st_size != size:
                return None
        return dict(doc["row"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # no record, or not one this tool wrote
        return None


def forget(out: str | Path, stem: str) -> None:
    """Remove a scan's record (before its files are replaced: a run stopped then leaves it to be redone)."""
    record_path(out, stem).unlink(missing_ok=True)
