"""The bucco-lingual crown widths of canines and first premolars on the shared references, and what
pointmamba.data.crown_shape flags there (docs/results/crown_shape/README.md).

    python docs/results/crown_shape/measure.py ../shared/data > docs/results/crown_shape/measure.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pointmamba.data import load_scan
from pointmamba.data.crown_shape import crown_extents, number_shape_findings
from pointmamba.data.dataset import find_scans
from pointmamba.data.mesh import apply_transform
from pointmamba.data.pose import canonical_pose


def main(root: Path) -> None:
    widths: dict[tuple[str, int], list[float]] = {}
    flagged = []
    for source in ("scans", "iosseg"):
        for name, path in find_scans(root / source).items():
            scan = load_scan(path)
            aligned = apply_transform(scan.vertices, canonical_pose(scan.vertices, scan.faces, labels=scan.labels))
            for t, w in crown_extents(aligned, scan.labels).items():
                if t % 10 in (3, 4, 5):
                    widths.setdefault((scan.jaw, t % 10), []).append(w.bucco_lingual)
            flagged += [f"{name}: {f}" for f in number_shape_findings(aligned, scan.labels, scan.jaw)]
    print("| jaw | tooth | n | median | robust sd (IQR / 1.349) | min | 10th pct | 90th pct | max |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (jaw, kind), x in sorted(widths.items()):
        q = np.percentile(x, [0, 10, 25, 50, 75, 90, 100])
        print(f"| {jaw} | {kind} | {len(x)} | {q[3]:.2f} | {(q[4] - q[2]) / 1.349:.2f} | {q[0]:.2f} | {q[1]:.2f} | "
              f"{q[5]:.2f} | {q[6]:.2f} |")
    print(f"\nflagged ({len(flagged)} teeth):")
    print("\n".join(flagged))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
