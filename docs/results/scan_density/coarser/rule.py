"""The pre-registered rule of ``infer.graph_cut_density_coarser`` (docs/results/scan_density/log.md, 2026-11-27):
two numbering replays of one split's held-out pair (switch off, switch on), joined with that split's
tools/test.py per-scan file for each scan's source.

    python docs/results/scan_density/coarser/rule.py TEST_PER_SCAN REPLAY_OFF REPLAY_ON

TEST_PER_SCAN: tools/test.py's per_scan.csv (columns name, source); REPLAY_*: numbering_replay replay output
folders (per_scan.csv, replay.json). Prints the rule's figures and whether each holds.
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np


def per_scan(folder):
    return {r["name"]: float(r["miou"]) for r in csv.DictReader(open(Path(folder) / "per_scan.csv"))}


source = {r["name"]: r["source"] for r in csv.DictReader(open(sys.argv[1]))}
off, on = per_scan(sys.argv[2]), per_scan(sys.argv[3])
assert set(off) == set(on) == set(source), "the three files name different scans"
removal = {k: json.load(open(Path(f) / "replay.json"))["removal_check"]["share_of_removals_changing_any"]
           for k, f in (("off", sys.argv[2]), ("on", sys.argv[3]))}


def figures(m):
    v = np.array(list(m.values()))
    return v.mean(), np.percentile(v, 10), int((v >= 0.8).sum())


msn = [n for n in source if source[n] == "scans"]
ios = [n for n in source if source[n] == "iosseg"]
d_msn = np.mean([on[n] for n in msn]) - np.mean([off[n] for n in msn])
d_ios = np.mean([on[n] for n in ios]) - np.mean([off[n] for n in ios])
(m0, p0, k0), (m1, p1, k1) = figures(off), figures(on)
checks = [
    (f"MSN mean {np.mean([off[n] for n in msn]):.4f} -> {np.mean([on[n] for n in msn]):.4f} ({d_msn:+.4f}, >= +0.005)", d_msn >= 0.005),
    (f"3D-IOSSeg mean {np.mean([off[n] for n in ios]):.4f} -> {np.mean([on[n] for n in ios]):.4f} ({d_ios:+.4f}, >= -0.002)", d_ios >= -0.002),
    (f"all mean {m0:.4f} -> {m1:.4f} (not lower)", m1 >= m0),
    (f"kept {k0} -> {k1} of {len(off)} (not lower)", k1 >= k0),
    (f"10th percentile {p0:.4f} -> {p1:.4f} (falls <= 0.01)", p1 >= p0 - 0.01),
    (f"removal check {removal['off']:.1%} -> {removal['on']:.1%} (rises <= 0.5 points)",
     removal["on"] <= removal["off"] + 0.005),
]
for text, ok in checks:
    print(f"- {'holds' if ok else 'FAILS'}: {text}")
moved = sorted(((on[n] - off[n], n) for n in off if abs(on[n] - off[n]) > 0.005), reverse=True)
print("scans moved by more than 0.005:", ", ".join(f"{n} {d:+.3f}" for d, n in moved) or "none")
print("this split:", "the rule holds" if all(ok for _, ok in checks) else "the rule fails")
