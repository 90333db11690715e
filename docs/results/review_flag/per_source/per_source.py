"""Issue 43's targets per source (MSN, 3D-IOSSeg) from tools/test.py's per_scan.csv of the held-out pairs, and
where the MSN arches lose: tooth outlines against numbers, from the replay caches' graph cuts
(numbering_replay cache: per scan `labels`, the reference, and `cut`, the graph cut's classes).

    python docs/results/review_flag/per_source/per_source.py PER_SCAN_A PER_SCAN_B [CACHE_A CACHE_B]

The flattened removal check per source is read from removal_<split>/removals.csv beside each per-scan file's
folder (the layout of touching_nu/nu10/), where it exists.
"""
import csv
import glob
import os
import sys

import numpy as np


def line(rows):
    m = np.array([float(r["miou"]) for r in rows])
    if not len(m):
        return "-"
    return f"{m.mean():.3f} / {np.percentile(m, 10):.3f} / {(m >= 0.8).mean():.0%} ({len(m)})"


print("| split | source | all: mean / p10 / kept | no pattern | ≤ 13 teeth, no pattern | pattern, dentition given "
      "| flag: below 0.80 / at or above | teeth numbered right (TIR), mean |")
print("|---|---|---|---|---|---|---|---|")
for split, path in zip("AB", sys.argv[1:3]):
    rows = list(csv.DictReader(open(path)))
    for source in ("scans", "iosseg"):
        r = [x for x in rows if x["source"] == source]
        plain = [x for x in r if x["lone_premolar"] == "False"]
        few = [x for x in plain if int(x["teeth"]) <= 13]
        given = [float(x["miou_given"]) for x in r if x["lone_premolar"] == "True" and x["miou_given"]]
        low = [x for x in r if float(x["miou"]) < 0.8]
        high = [x for x in r if float(x["miou"]) >= 0.8]
        flag = (f"{sum(x['review'] == 'True' for x in low)} of {len(low)} / "
                f"{sum(x['review'] == 'True' for x in high)} of {len(high)}")
        name = "MSN" if source == "scans" else "3D-IOSSeg"
        print(f"| {split} | {name} | {line(r)} | {line(plain)} | {line(few)} | "
              f"{np.mean(given):.3f} ({len(given)})" if given else f"| {split} | {name} | {line(r)} | {line(plain)} | "
              f"{line(few)} | -", end="")
        print(f" | {flag} | {np.mean([float(x['TIR']) for x in r]):.3f} |")

removal_files = {split: os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(path))), f"removal_{split}",
                                     "removals.csv") for split, path in zip("AB", sys.argv[1:3])}
if all(os.path.exists(f) for f in removal_files.values()):
    print("\n| split | source | removals changing another tooth | other teeth changed |")
    print("|---|---|---|---|")
    for split, f in removal_files.items():
        rows = list(csv.DictReader(open(f)))
        for prefix, name in (("MSN", "MSN"), ("IOS", "3D-IOSSeg")):
            r = [x for x in rows if x["scan"].startswith(prefix)]
            changing = [x for x in r if x["changed"].strip()]
            teeth, others = sum(len(x["changed"].split()) for x in changing), sum(int(x["others"]) for x in r)
            print(f"| {split} | {name} | {len(changing)} of {len(r)} ({len(changing) / len(r):.1%}) | "
                  f"{teeth} of {others} ({teeth / others:.1%}) |")

if len(sys.argv) > 3:
    print("\n| split | source | reference tooth vertices cut as gingiva | reference gingiva cut as tooth "
          "| (both as a share of the reference tooth vertices; scans without the pattern) |")
    print("|---|---|---|---|---|")
    for split, cache in zip("AB", sys.argv[3:5]):
        pattern = {x["name"] for x in csv.DictReader(open(sys.argv[1 if split == "A" else 2]))
                   if x["lone_premolar"] == "True"}
        per = {}
        for f in sorted(glob.glob(os.path.join(cache, "*.npz"))):
            name = os.path.basename(f)[:-4]
            if "__without" in name or name in pattern:
                continue
            z = np.load(f)
            ref, cut = z["labels"] > 0, z["cut"] > 0
            per.setdefault("MSN" if name.startswith("MSN") else "3D-IOSSeg", []).append(
                ((ref & ~cut).sum() / ref.sum(), (~ref & cut).sum() / ref.sum()))
        for source, v in per.items():
            v = np.array(v)
            print(f"| {split} | {source} | {v[:, 0].mean():.1%} | {v[:, 1].mean():.1%} | {len(v)} scans |")
