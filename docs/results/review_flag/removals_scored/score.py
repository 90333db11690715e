"""Each flattened removal of a replay cache scored against its own reference (the removed tooth gingiva):
one line per removal (name, teeth left, per-scan mIoU, flagged, findings), today's defaults.

    python docs/results/review_flag/removals_scored/score.py A > docs/results/review_flag/removals_scored/A.txt
    python docs/results/review_flag/removals_scored/score.py B numbering_class_prior=0.5 > .../B.txt
    (cache B stores the old class prior 0: give today's)
"""
import glob
import sys
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.research.numbering_replay import replay_file

split = sys.argv[1]
options = {k: float(v) for k, v in (kv.split("=") for kv in sys.argv[2:])}
for p in sorted(glob.glob(f"work_dirs/replay/{split}/*__*.npz")):
    r = replay_file(Path(p), options, review=True)
    teeth = len(set(np.unique(r.reference).tolist()) - {0})
    miou = ConfusionMatrix(17).update(fdi_to_class(r.fdi, r.jaw, 17), fdi_to_class(r.reference, r.jaw, 17)).miou()
    print(Path(p).stem, teeth, round(miou, 4), r.review, (r.findings or "-").replace(" ", ","), flush=True)
