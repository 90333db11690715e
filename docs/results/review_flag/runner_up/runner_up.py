"""Where a tooth's number is wrong, is its runner-up the right one? Each cached scan of a replay cache numbered
and reviewed as tools/predict.py does (``numbering_replay.replay_file``, today's defaults), each predicted tooth
scored against its reference: the reference number most of its tooth vertices carry (a tooth whose vertices
are mostly reference gingiva is left out). One line per scan: name, per-scan mIoU, flagged, wrong teeth, of them
those whose runner-up is right, the per-scan mIoU once every wrong tooth whose runner-up is right takes it
(what a reviewer reaches by accepting runner-ups one tooth at a time), the sides with a wrong tooth, and the
per-scan mIoU once, on each of those sides, the most mesial wrong tooth and every tooth distal of it take their
runner-ups where those are teeth (the review page's side action, one per side).

    python docs/results/review_flag/runner_up/runner_up.py A whole > docs/results/review_flag/runner_up/A_whole.txt
    python docs/results/review_flag/runner_up/runner_up.py B whole numbering_class_prior=0.5 > .../B_whole.txt
    python docs/results/review_flag/runner_up/runner_up.py A_close removals > .../A_close.txt
    python docs/results/review_flag/runner_up/runner_up.py B_close removals numbering_class_prior=0.5 > .../B_close.txt
    (caches B and B_close store the old class prior 0: give today's)
"""
import glob
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file

split, which = sys.argv[1], sys.argv[2]
overrides = {k: float(v) for k, v in (kv.split("=") for kv in sys.argv[3:])}
files = sorted(Path(p) for p in glob.glob(f"work_dirs/replay/{split}/*.npz")
               if (REMOVAL_MARK in Path(p).stem) == (which == "removals"))


def miou(fdi: np.ndarray, ref: np.ndarray, jaw: str) -> float:
    return ConfusionMatrix(17).update(fdi_to_class(fdi, jaw, 17), fdi_to_class(ref, jaw, 17)).miou()


for path in files:
    r = replay_file(path, overrides, review=True)
    fixed, side_fixed = r.fdi.copy(), r.fdi.copy()
    count = Counter()
    first_wrong: dict[int, int] = {}  # quadrant -> the most mesial wrong tooth's position
    for tooth in r.teeth:
        mine = r.instances == tooth.instance
        teeth = r.reference[mine][r.reference[mine] > 0]
        if len(teeth) < 0.5 * mine.sum():
            continue
        truth = Counter(teeth.tolist()).most_common(1)[0][0]
        if truth != tooth.fdi:
            count["wrong"] += 1
            quadrant, position = divmod(tooth.fdi, 10)
            first_wrong[quadrant] = min(first_wrong.get(quadrant, 9), position)
            if tooth.runner_up == truth:
                count["runner_up_right"] += 1
                fixed[mine] = truth
    for tooth in r.teeth:
        quadrant, position = divmod(tooth.fdi, 10)
        if position >= first_wrong.get(quadrant, 9) and tooth.runner_up > 0:
            side_fixed[r.instances == tooth.instance] = tooth.runner_up
    print(path.stem, round(miou(r.fdi, r.reference, r.jaw), 4), r.review, count["wrong"], count["runner_up_right"],
          round(miou(fixed, r.reference, r.jaw), 4), len(first_wrong), round(miou(side_fixed, r.reference, r.jaw), 4),
          flush=True)
