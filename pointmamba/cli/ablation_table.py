"""Small pieces the ablation report shares (``ablate.py``, ``ablation_diagnostics.py``): mean ± std over
seeds and its formatting. (A run's JSON-lines files are read by ``training/work_dir.read_jsonl``, tables
written by ``atomic_file.write_csv``.)"""
from __future__ import annotations

import statistics
from typing import Any


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
