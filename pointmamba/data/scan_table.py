"""Per-scan settings of a folder run from a CSV: rows ``scan stem,value`` (``--dentition-file``,
``--jaw-file``), as a clinic's patient list exports them."""
from __future__ import annotations

import csv
from os import PathLike
from pathlib import Path
from typing import Iterable


def read_scan_table(path: str | PathLike, column: str, allowed: Iterable[str]) -> dict[str, str]:
    """{scan stem: value} from a CSV of rows ``scan stem,value`` (a header row ``scan,<column>``, blank lines
    and ``#`` comments allowed; values case-insensitive); ValueError naming the file and line for a bad
    row, a value not in ``allowed`` or a stem given two different values."""
    path, allowed = Path(path), tuple(allowed)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the {column} file: {exc}") from None
    out: dict[str, str] = {}
    for line_no, row in enumerate(csv.reader(text.splitlines()), 1):
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if len(cells) != 2 or not cells[0]:
            raise ValueError(f"{path} line {line_no}: expected 'scan stem,{column}', got {','.join(row)!r}")
        stem, value = cells[0], cells[1].lower()
        if line_no == 1 and value == column:  # the header
            continue
        if value not in allowed:
            raise ValueError(f"{path} line {line_no} ({stem}): unknown {column} {value!r}: expected one of "
                             f"{', '.join(allowed)}")
        if out.get(stem, value) != value:
            raise ValueError(f"{path} line {line_no}: {stem} given two {column}s ({out[stem]}, {value})")
        out[stem] = value
    return out
