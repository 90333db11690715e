"""Rule 3 of the vertex-order pre-registration: tools/test.py's per-scan rows, at e18e9a7 (base_*) and with the
change (new_*), each split's held-out pair on its val scans.

    python docs/results/export_variants/vertex_order/compare.py
"""
import csv
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
for split in "AB":
    rows = {name: list(csv.DictReader(open(HERE / f"{name}_{split}" / "per_scan.csv"))) for name in ("base", "new")}
    for name, table in rows.items():
        miou = np.array([float(r["miou"]) for r in table])
        low = [r for r in table if float(r["miou"]) < 0.80]
        plain = [float(r["miou"]) for r in table if r["lone_premolar"] == "False"]
        print(f"split {split} {name}: mean {miou.mean():.4f}, p10 {np.percentile(miou, 10):.4f}, kept "
              f"{int((miou >= 0.80).sum())} of {len(miou)}, flagged below 0.80 {sum(r['review'] == 'True' for r in low)} "
              f"of {len(low)}, no pattern {np.mean(plain):.4f}")
    before = {r["name"]: float(r["miou"]) for r in rows["base"]}
    change = sorted((float(r["miou"]) - before[r["name"]], r["name"]) for r in rows["new"])
    print(f"split {split} per scan: {change[0][0]:+.4f} ({change[0][1]}) to {change[-1][0]:+.4f} ({change[-1][1]}), "
          f"more than 0.01: {sum(abs(c) > 0.01 for c, _ in change)}")
