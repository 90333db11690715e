"""Val scans (held-out pairs, replay caches, today's defaults) flagged or with any reference tooth numbered wrong
or lost (its vertices' majority predicted number is not its own): one line each.

    python docs/results/review_flag/any_tooth_wrong/scans.py > docs/results/review_flag/any_tooth_wrong/scans.txt
"""
import glob, sys, numpy as np
from pathlib import Path
from pointmamba.research.numbering_replay import replay_file
from pointmamba.evaluation.removal_check import tooth_numbers
from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
for split in "AB":
    for p in sorted(glob.glob(f"work_dirs/replay/{split}/*.npz")):
        if "__" in p: continue
        r = replay_file(Path(p), {}, review=True)
        miou = ConfusionMatrix(17).update(fdi_to_class(r.fdi, r.jaw, 17), fdi_to_class(r.reference, r.jaw, 17)).miou()
        nums = tooth_numbers(r.reference, r.fdi)
        wrong = {t: n for t, n in nums.items() if n != t}
        if r.review or wrong:
            print(split, Path(p).stem, f"{miou:.3f}", "FLAG" if r.review else "----", r.findings, "wrong:", wrong)
