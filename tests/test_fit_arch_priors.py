"""``python -m pointmamba.research.fit_arch_priors``: the priors table of a config's training arches, with the
training points of each class, and no progress bar under ``--no-progress``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class, load_scan

ROOT = Path(__file__).resolve().parents[1]


def test_fit_arch_priors_prints_the_table_with_the_class_points(tmp_path: Path) -> None:
    samples = ROOT / "data" / "samples"
    # a process of its own, as a user runs it: --no-progress works through TQDM_DISABLE, which tqdm reads
    # when it is imported (in this test process it was imported long before)
    run = subprocess.run([sys.executable, "-m", "pointmamba.research.fit_arch_priors", "--config",
                          str(ROOT / "configs" / "shared_data_recipe_all.yaml"), "--no-progress", "--set",
                          f"data.root={samples}", "data.position_label_roots=[]", "--out", str(tmp_path / "priors.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "arches:" not in run.stderr  # the progress bar obeys --no-progress
    table = json.loads((tmp_path / "priors.json").read_text())
    assert table["upper"]["arches"] == 1 and table["lower"]["arches"] == 2
    # class_points: every training point of the three samples, by its 17-class label (the grid-sampled points the
    # network trains on: at most one per vertex)
    points = np.array(table["class_points"])
    assert points.shape == (17,) and points[0] > points[1:].max() > 0
    vertices, present = 0, set()
    for p in sorted(samples.glob("*/*.obj")):
        scan = load_scan(p)
        vertices += len(scan.labels)
        present |= {int(c) for c in np.unique(fdi_to_class(scan.labels, scan.jaw, 17))}
    assert points.sum() <= vertices
    assert set(np.flatnonzero(points).tolist()) == present
