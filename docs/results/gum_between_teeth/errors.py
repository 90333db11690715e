"""Vertices wrong by kind (tooth over gum, gum over tooth, one tooth for another), in % of all vertices, per
split and source, with infer.graph_cut_tooth_pair_cost 1 and 2: python docs/results/gum_between_teeth/errors.py > errors.txt
(run in the repository root; the numbering replay caches of both held-out pairs in work_dirs/replay/A and B)."""
import glob, numpy as np, collections
from pathlib import Path
from pointmamba.research.numbering_replay import replay_file
g = collections.defaultdict(list)
for split in "AB":
    for p in sorted(glob.glob(f"work_dirs/replay/{split}/*.npz")):
        if "__" in p: continue
        row = []
        for k in (1, 2):
            r = replay_file(Path(p), {"graph_cut_tooth_pair_cost": k})
            f, ref = r.fdi, r.reference
            row += [((f > 0) & (ref == 0)).mean(), ((f == 0) & (ref > 0)).mean(), ((f > 0) & (ref > 0) & (f != ref)).mean()]
        g[(split, Path(p).stem[:3])].append(row)
for k, v in sorted(g.items()):
    v = np.array(v).mean(0) * 100
    print(k, "k=1: tooth-over-gum %.2f gum-over-tooth %.2f tooth-tooth %.2f | k=2: %.2f %.2f %.2f (%% of vertices)" % tuple(v))
