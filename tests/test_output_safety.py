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
