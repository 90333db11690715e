"""Small pieces the ablation report shares (``ablate.py``, ``ablation_diagnostics.py``): reading a run's
JSON-lines file, mean ± std over seeds and its formatting, and writing rows of dicts as CSV."""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from ..atomic_file import write_csv as atomic_csv


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file in file order; [] if absent. A cut-short last line (a crash while
    writing) is dropped; any other bad line is an error naming the file and line."""
    if not path.is_file():
        return []
    out = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines):
                continue
            raise ValueError(f"{path}: line {n} is not JSON") from None
    return out


def mean_std(values: list[Any]) -> tuple[float | None, float | None, int]:
    """Mean, sample std and count of the numbers among ``values`` (None, bools and text ignored); std is
    None with one number (no spread), both None with none."""
    xs = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not xs:
        return None, None, 0
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else None), len(xs)


def format_pm(mean: float | None, std: float | None, spec: str = ".4f") -> str:
    """"m ± s"; "m (one run)" without a spread; "–" without a value. A sign in ``spec`` is for the mean only."""
    if mean is None:
        return "–"
    if std is None:
        return f"{format(mean, spec)} (one run)"
    return f"{format(mean, spec)} ± {format(std, spec.lstrip('+'))}"


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows of dicts as CSV, columns from the first row, None as an empty cell (written atomically)."""
    atomic_csv(path, rows)
