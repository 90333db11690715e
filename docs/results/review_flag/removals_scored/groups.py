"""The scored removals (score.py's A.txt, B.txt) grouped: whether the arch shows the lone-premolar pattern
before or after the removal, and the teeth left; the flag's recall and its share of the others flagged.

    python docs/results/review_flag/removals_scored/groups.py A B > docs/results/review_flag/removals_scored/groups.txt
    python docs/results/review_flag/removals_scored/groups.py A_close B_close > .../groups_close.txt
(each NAME: score.py's NAME.txt beside this file, from the replay cache work_dirs/replay/NAME)
"""
import sys, numpy as np, statistics
from pathlib import Path
from pointmamba.data.lone_premolar import lone_premolar_sides
def stats(v):
    v = sorted(v); n = len(v)
    return f"{n:4d}  mean {statistics.mean(v):.3f}  p10 {v[int(0.1 * (n - 1))]:.3f}  kept {100 * sum(x >= 0.8 for x in v) / n:.0f} %"
HERE = Path(__file__).parent
for split in sys.argv[1:]:
    txt = HERE / f"{split}.txt"
    rows = []
    for line in open(txt):
        name, teeth, miou, flag, findings = line.split()
        with np.load(f"work_dirs/replay/{split}/{name}.npz") as d:
            pattern = bool(lone_premolar_sides(d["aligned"], d["labels"], str(d["jaw"])))
            whole = f"work_dirs/replay/{split}/{name.split('__')[0]}.npz"
        with np.load(whole) as d:
            pattern_whole = bool(lone_premolar_sides(d["aligned"], d["labels"], str(d["jaw"])))
        rows.append((name, int(teeth), float(miou), flag == "True", pattern, pattern_whole, findings))
    print(f"split {split}")
    for label, sel in [("all removals", lambda r: True),
                       ("no pattern before or after", lambda r: not r[4] and not r[5]),
                       ("  <= 13 teeth left", lambda r: not r[4] and not r[5] and r[1] <= 13),
                       ("  14+ teeth left", lambda r: not r[4] and not r[5] and r[1] >= 14),
                       ("pattern made by the removal", lambda r: r[4] and not r[5])]:
        sub = [r for r in rows if sel(r)]
        if sub:
            wrong = [r for r in sub if r[2] < 0.8]
            print(f"  {label:30s} {stats([r[2] for r in sub])}  below 0.80 flagged {sum(r[3] for r in wrong)}/{len(wrong)}, others flagged {sum(r[3] for r in sub if r[2] >= 0.8)}/{len(sub) - len(wrong)}")
    low = sorted([r for r in rows if not r[4] and not r[5] and r[1] <= 13], key=lambda r: r[2])[:8]
    print("  lowest <= 13:", ", ".join(f"{r[0]} {r[2]:.3f}{' F' if r[3] else ''}" for r in low))
    kinds = {}
    for r in rows:
        if r[2] >= 0.8 and r[3]:
            for k in r[6].split(","):
                kinds[k] = kinds.get(k, 0) + 1
    print("  findings on removals at or above 0.80 that are flagged:", ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])))
