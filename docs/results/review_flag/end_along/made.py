"""The `lost_end` check on failures made from the val references (as the review flag README's table of made
failures): each side's last tooth below the third molar set to gingiva in the reference labels, reviewed with
the network's real probabilities (the held-out pairs', from the numbering replay caches), the check looking by
angle and along the last tooth's direction; and the references as they are (no finding expected).

    python docs/results/review_flag/end_along/made.py work_dirs/replay/A work_dirs/replay/B > made.txt
"""
import sys
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.data.teeth3ds import instances_from_labels
from pointmamba.inference.confidence import ReviewRules, scan_confidence
from pointmamba.research.dropped_teeth_check import _cases
from pointmamba.research.numbering_replay import REMOVAL_MARK

tally = {along: [0, 0, 0] for along in (False, True)}  # cases, caught, references flagged lost_end
for cache in sys.argv[1:]:
    for path in sorted(Path(cache).glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        d = np.load(path)
        jaw, ref, probs, aligned = str(d["jaw"]), d["labels"].astype(np.int64), d["probs"], d["aligned"]

        def kinds(labels, rules):
            conf = scan_confidence(probs, fdi_to_class(labels, jaw, 17), instances_from_labels(labels), jaw, aligned,
                                   rules=rules, faces=d["faces"])
            return {k for k, _ in conf.findings}

        for along in (False, True):
            rules = ReviewRules(end_along_tangent=along)
            tally[along][2] += "lost_end" in kinds(ref, rules)
            for tooth, kind in _cases(ref, jaw):
                if kind == "end":
                    tally[along][0] += 1
                    tally[along][1] += "lost_end" in kinds(np.where(ref == tooth, 0, ref), rules)
for along, (n, caught, refs) in tally.items():
    print(f"{'along' if along else 'angle'}: last tooth left as gingiva caught {caught} of {n} ({caught / n:.0%}); "
          f"references as they are flagged lost_end: {refs}")
