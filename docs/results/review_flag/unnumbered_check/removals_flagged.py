"""Which flattened removals are flagged, with the unnumbered check off and on (session 64).

    python docs/results/review_flag/unnumbered_check/removals_flagged.py A|B

Reads the replay's removals.csv beside it and the replay cache work_dirs/replay/SPLIT (today's defaults);
prints each removal that changes another tooth with its review (off, on), and the counts.
"""
import csv, sys, json, numpy as np
from pathlib import Path
from pointmamba.inference.pipeline import refine_either_jaw, refined_prediction
from pointmamba.inference.confidence import scan_confidence, ReviewRules
split = sys.argv[1]
rows = list(csv.DictReader(open(f"docs/results/review_flag/unnumbered_check/{split}/removals.csv")))
def run(path):
    d = np.load(path); jaw = str(d["jaw"])
    opts = json.loads(str(d["options"]))
    classes, numbering, call = refine_either_jaw(d["probs"], d["aligned"], d["faces"], d["normals"], jaw, 17, opts)
    pred = refined_prediction(classes, numbering, call, d["probs"], d["aligned"], jaw, 17)
    out = []
    for rules in (ReviewRules(unnumbered_width=None), ReviewRules()):
        c = scan_confidence(pred.probs, pred.classes, pred.instances, jaw, pred.aligned, pred.instance_probs, faces=d["faces"], numbering=pred.numbering, jaw_call=pred.jaw_call, rules=rules)
        out.append((c.review, sorted({k for k, _ in c.findings})))
    return out
tot = [0, 0]; ch = 0; allflag = [0, 0]
for r in rows:
    res = run(f"work_dirs/replay/{split}/{r['scan']}__without_{r['removed']}.npz")
    for k in range(2): allflag[k] += bool(res[k][0])
    if r["changed"]:
        ch += 1
        for k in range(2): tot[k] += bool(res[k][0])
        print(r["scan"], r["removed"], r["changed"], res)
    elif "unnumbered" in res[1][1]:
        print("unchanged but unnumbered:", r["scan"], r["removed"], res[1])
print(split, "changing removals", ch, "flagged off/on", tot, "all removals flagged off/on", allflag, "of", len(rows))
