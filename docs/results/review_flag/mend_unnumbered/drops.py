"""Simulated drops (``end_along/drops.py``'s cases: each premolar between two teeth and each side's last tooth below
the third molar set to gingiva in the cut; the held-out pairs' probabilities from the replay caches, today's cut),
numbered with the dropped-tooth mend, with ``infer.mend_unnumbered`` off and with candidate 3 (1000 nats, width floor
0.6667). Two ways to drop: the reference tooth's vertices (``ref``, as the study does), and those plus the cut's
own label of that tooth within 1.5 mm of it (``cut``: the cut's whole tooth, no rim left).

    python docs/results/review_flag/mend_unnumbered/drops.py work_dirs/replay/A > drops_A.txt

``--variant NAME:KEY=VALUE,...`` (repeatable) replaces the two variants; the first is the one the others are
compared with (session 70's candidates: ``../sliver_touching/``).

(3b's figures in ``drops_3b_*.txt`` came from its code, not kept: log.md, session 69.)
"""
import json, sys
from pathlib import Path
import numpy as np
from scipy.spatial import cKDTree
from pointmamba.data import class_to_fdi
from pointmamba.data.mesh import vertex_areas
from pointmamba.inference.config import infer_options
from pointmamba.inference.pipeline import _cut, _number
from pointmamba.research.dropped_teeth_check import _cases
from pointmamba.research.numbering_replay import REMOVAL_MARK
VARIANTS = {"off": {"mend_unnumbered": 0.0}, "c3": {"mend_unnumbered": 1000.0, "mend_unnumbered_width": 0.6667}}
caches = [a for a in sys.argv[1:] if not a.startswith("--variant")]
given = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--variant=")]
if given:
    VARIANTS = {v.split(":", 1)[0]: {k: json.loads(x) for k, x in (kv.split("=") for kv in v.split(":", 1)[1].split(",") if kv)}
                for v in given}
for cache in caches:
    extra = {"numbering_class_prior": 0.5} if cache.rstrip("/").endswith("B") else {}
    tally = {}
    for path in sorted(Path(cache).glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        d = np.load(path)
        jaw, ref = str(d["jaw"]), d["labels"].astype(np.int64)
        options = infer_options({"infer": json.loads(str(d["options"]))})
        options.pop("graph_cut_tooth_pair_cost", None)
        options = infer_options({"infer": {**options, **extra}})
        probs, aligned, faces = d["probs"], d["aligned"], d["faces"]
        cut = _cut(probs, aligned, faces, d["normals"], options, lambda name: None)
        areas = vertex_areas(aligned, faces)
        for tooth, kind in _cases(ref, jaw):
            gone = ref == tooth
            k = np.bincount(cut[gone]).argmax()
            near = cKDTree(aligned[gone]).query(aligned, distance_upper_bound=1.5)[0] < np.inf
            styles = {"ref": gone, "cut": gone | ((cut == k) & near)}
            for style, drop in styles.items():
                for name, v in VARIANTS.items():
                    labels, _ = _number(np.where(drop, 0, cut), probs, aligned, faces, jaw, 17,
                                        {**options, **v, "mend_dropped": True}, areas=areas)
                    fdi = class_to_fdi(labels, jaw, 17)
                    vals, c = np.unique(fdi[gone], return_counts=True)
                    t = tally.setdefault((style, kind, name), [0, 0, []])
                    t[0] += 1
                    ok = int(vals[c.argmax()] == tooth)
                    t[1] += ok
                    if not ok:
                        t[2].append(f"{path.stem}-{tooth}")
    for (style, kind, name), (n, r, bad) in sorted(tally.items()):
        print(f"{Path(cache).name} drop by {style} {kind} {name}: {r} of {n} restored ({r / max(n, 1):.0%})")
    first, *others = VARIANTS
    for style in ("ref", "cut"):
        for kind in ("between", "end"):
            for name in others:
                a, b = set(tally[(style, kind, first)][2]), set(tally[(style, kind, name)][2])
                print(f"   {style} {kind}: lost with {name} only: {sorted(b - a)}; restored with {name} only: {sorted(a - b)}")
