"""Simulated drops of each side's last tooth (below the third molar) and of premolars between two teeth, as
``pointmamba.research.dropped_teeth_check`` makes them, from the numbering replay caches (the held-out pairs'
probabilities, cut again with today's cut): restored with their number by the mend, with the lost_end check
and the mend looking by angle (``ReviewRules(end_along_tangent=False)``) and along the last tooth's direction.

    python docs/results/review_flag/end_along/drops.py work_dirs/replay/A work_dirs/replay/B > drops.txt
"""
import functools
import json
import sys
from pathlib import Path

import numpy as np

import pointmamba.inference.confidence as confidence
from pointmamba.data import class_to_fdi
from pointmamba.data.mesh import vertex_areas
from pointmamba.inference.config import infer_options
from pointmamba.inference.pipeline import _cut, _number
from pointmamba.research.dropped_teeth_check import _cases
from pointmamba.research.numbering_replay import REMOVAL_MARK

RULES = confidence.ReviewRules
for cache in sys.argv[1:]:
    tally = {(along, kind): [0, 0] for along in (False, True) for kind in ("between", "end")}
    for path in sorted(Path(cache).glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        d = np.load(path)
        jaw, ref = str(d["jaw"]), d["labels"].astype(np.int64)
        options = infer_options({"infer": json.loads(str(d["options"]))})
        options.pop("graph_cut_tooth_pair_cost", None)
        options = infer_options({"infer": options})  # today's cut
        probs, aligned, faces = d["probs"], d["aligned"], d["faces"]
        cut = _cut(probs, aligned, faces, d["normals"], options, lambda name: None)
        areas = vertex_areas(aligned, faces)
        for tooth, kind in _cases(ref, jaw):
            gone = ref == tooth
            for along in (False, True):
                confidence.ReviewRules = functools.partial(RULES, end_along_tangent=along)
                labels, _ = _number(np.where(gone, 0, cut), probs, aligned, faces, jaw, 17,
                                    {**options, "mend_dropped": True}, areas=areas)
                fdi = class_to_fdi(labels, jaw, 17)
                v, c = np.unique(fdi[gone], return_counts=True)
                tally[(along, kind)][0] += 1
                tally[(along, kind)][1] += int(v[c.argmax()] == tooth)
            confidence.ReviewRules = RULES
    for (along, kind), (n, restored) in tally.items():
        print(f"{Path(cache).name} {'along' if along else 'angle'} {kind}: {restored} of {n} restored ({restored / max(n, 1):.0%})")
