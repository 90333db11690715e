"""Safe outputs (issue 46): one Segmenter shared by threads, CSV cells a spreadsheet never runs, JSON that
never holds NaN or Infinity."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"


# ------------------------------------------------------------------------------------ threads (item 2)
THREADS_SCRIPT = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    import numpy as np
    import torch
    sys.path.insert(0, {tests!r})
    from support.tiny import untrained_checkpoint
    from pointmamba import Segmenter

    torch.set_num_threads(2)
    segmenter = Segmenter(untrained_checkpoint(Path({ckpt!r})), device="cpu", infer={{"graph_cut": False}})
    scans = {scans!r}
    sequential = [segmenter(p) for p in scans]
    start = threading.Barrier(len(scans))
    results = {{}}

    def run(k):
        start.wait()  # both threads enter the model together
        results[k] = segmenter(scans[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(scans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, seq in enumerate(sequential):
        assert np.array_equal(results[k].labels, seq.labels), k
        assert np.array_equal(results[k].probabilities, seq.probabilities), k
    print("same", len(results))
""")


def test_two_threads_on_one_segmenter_give_the_sequential_results(tmp_path: Path) -> None:
    # in a child process: before the lock, numba's pool aborted the whole process (exit 134)
    scans = [str(SAMPLES / "MSN021" / "MSN021_lower.obj"), str(SAMPLES / "MSN022" / "MSN022_upper.obj")]
    script = THREADS_SCRIPT.format(tests=str(ROOT / "tests"), ckpt=str(tmp_path / "tiny.pth"), scans=scans)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("same 2")


# ------------------------------------------------------------------------------- CSV cells (item 4)
HOSTILE_NAMES = ['=HYPERLINK("http:\\\\evil.example","open me").obj', "=2+5", "+2+5", "-2+5", "@SUM(A1:A2)",
                 "\t=1+1", "\r=1+1", "two\nlines_upper.obj", "cr\rlf\r\n_lower.obj", '<!--<script>_upper.obj',
                 "x" * 250 + "_upper.obj", "bell\x07\x1b[31m_lower.obj", 'quote"d,comma_lower.obj']


def test_csv_cells_never_start_a_formula_and_newlines_round_trip(tmp_path: Path) -> None:
    from pointmamba.atomic_file import write_csv

    rows = [{"scan": name, "min_confidence": -0.25, "num_teeth": -3, "note": None} for name in HOSTILE_NAMES]
    path = write_csv(tmp_path / "summary.csv", rows)
    with open(path, newline="", encoding="utf-8") as fh:
        back = list(csv.reader(fh))
    assert back[0] == ["scan", "min_confidence", "num_teeth", "note"]
    assert len(back) == len(HOSTILE_NAMES) + 1  # one row per scan, newlines in names included
    for name, row in zip(HOSTILE_NAMES, back[1:]):
        assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r")), row[0]
        # neutralized by one leading quote, otherwise as written
        assert row[0] == ("'" + name if name[0] in "=+-@\t\r" else name)
        assert row[1:] == ["-0.25", "-3", ""]  # numbers stay numbers, negative ones too


def test_every_csv_the_package_writes_goes_through_write_csv() -> None:
    # one function neutralizes cells; a second writer elsewhere would bypass it
    package = ROOT / "pointmamba"
    writers = [str(p.relative_to(ROOT)) for p in package.rglob("*.py")
               if p.name != "atomic_file.py" and any(w in p.read_text() for w in ("csv.writer", "csv.DictWriter"))]
    assert writers == []
