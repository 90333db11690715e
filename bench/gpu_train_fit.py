#!/usr/bin/env python3
"""How many epochs fit in a device call, from timed probe runs (``bench/gpu_train.sh``).

    python bench/gpu_train_fit.py STATE PROBE_STEPS SECONDS_LEFT NAME ...

Each ``STATE/probe_NAME`` is the work dir of a probe: ``tools/train.py`` for one epoch capped at PROBE_STEPS
steps. Prints ``SECONDS_PER_STEP STEPS_PER_EPOCH EPOCHS``: the slowest probe's seconds per step, the most
steps a full epoch of any run takes (its training scans over its batch size; the probe's own epoch was
capped) and the whole epochs that fit in SECONDS_LEFT with 5 % to spare (at least 1).
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import yaml

MARGIN = 1.05  # validation every few epochs and the workers' restart each epoch


def probe_timing(work_dir: str | Path, probe_steps: int) -> tuple[float, int]:
    """Seconds per step of a probe run and the steps of a full epoch of the same run."""
    work_dir = Path(work_dir)
    metrics = work_dir / "metrics.jsonl"
    lines = [ln for ln in metrics.read_text().splitlines() if ln.strip()] if metrics.is_file() else []
    if not lines:
        raise ValueError(f"{metrics}: no epoch recorded (did the probe fail? see its .out)")
    seconds = float(json.loads(lines[-1])["epoch_s"]) / probe_steps
    # "..., 159 scans, 80 steps/epoch" or "..., 159 scans (171 draws an epoch, data.scan_repeats), ..."
    found = re.findall(r"(\d+) scans(?: \((\d+) draws an epoch)?", (work_dir / "train.log").read_text())
    if not found:
        raise ValueError(f"{work_dir / 'train.log'}: no 'N scans' line (not a tools/train.py log?)")
    scans, draws = found[-1]
    batch = int(yaml.safe_load((work_dir / "config.yaml").read_text())["train"]["batch_size"])
    return seconds, math.ceil(int(draws or scans) / batch)


def epochs_that_fit(seconds_per_step: float, steps_per_epoch: int, seconds_left: float) -> int:
    """Whole epochs in ``seconds_left``, with :data:`MARGIN` to spare; at least 1."""
    return max(1, int(seconds_left / (seconds_per_step * steps_per_epoch * MARGIN)))


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        raise SystemExit(__doc__)
    state, probe_steps, seconds_left, names = Path(argv[0]), int(argv[1]), float(argv[2]), argv[3:]
    timings = [probe_timing(state / f"probe_{n}", probe_steps) for n in names]
    seconds = max(t[0] for t in timings)
    steps = max(t[1] for t in timings)
    print(f"{seconds:.4f} {steps} {epochs_that_fit(seconds, steps, seconds_left)}")


if __name__ == "__main__":
    main(sys.argv[1:])
