"""Where each lower first molar sits under the upper arch, on the 3D-IOSSeg patients whose two jaws are stored in
one frame (docs/results/reference_doubts/README.md).

3D-IOSSeg stores a patient's lower jaw turned half a turn about the arch's front-back axis from where it bites: the
front-back coordinate is shared, so along it a lower tooth's place under the upper arch can be read directly. Per
side: how far the lower first molar's centre lies in front of the upper first molar's (mm; a molar in Angle's class I
about 2-3 mm, class II less, class III more), and the same for the central incisors (the overjet's direction:
upper in front of lower is positive). Each tooth's centre is that of its label's largest connected piece (IOS002_upper's
"16" also covers its central incisor: pointmamba.data.label_pieces).

    python docs/results/reference_doubts/occlusion.py ../shared/data/iosseg > docs/results/reference_doubts/occlusion.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pointmamba.data import load_scan
from pointmamba.data.label_pieces import tooth_pieces
from pointmamba.data.mesh import mesh_edges


def centres(path: Path) -> dict[int, np.ndarray]:
    scan = load_scan(path)
    largest: dict[int, np.ndarray] = {}
    for piece in tooth_pieces(scan.labels, mesh_edges(scan.faces, scan.num_vertices)):
        fdi = int(scan.labels[piece[0]])
        if len(piece) > len(largest.get(fdi, ())):
            largest[fdi] = piece
    return {fdi: scan.vertices[piece].mean(0) for fdi, piece in largest.items()}


def main(root: Path) -> None:
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        up, lo = folder / f"{folder.name}_upper.obj", folder / f"{folder.name}_lower.obj"
        if not (up.exists() and lo.exists()):
            continue
        cu, cl = centres(up), centres(lo)
        if not all(t in cu for t in (11, 21, 16, 26)):
            continue
        front = (cu[11] + cu[21]) / 2 - (cu[16] + cu[26]) / 2  # the upper arch's front-back axis
        front /= np.linalg.norm(front)
        inc = [cl[t] for t in (31, 41) if t in cl]
        overjet = float(((cu[11] + cu[21]) / 2 - np.mean(inc, axis=0)) @ front) if inc else np.nan
        for side, (u, lw) in (("right", (16, 46)), ("left", (26, 36))):
            if lw in cl:
                rows.append((folder.name, side, float((cl[lw] - cu[u]) @ front), overjet))
    print("| patient | side | lower 6 in front of upper 6 (mm) | upper incisors in front of lower (mm) |")
    print("|---|---|---:|---:|")
    for r in sorted(rows, key=lambda r: r[2]):
        print(f"| {r[0]} | {r[1]} | {r[2]:+.1f} | {r[3]:+.1f} |")
    d = np.array([r[2] for r in rows])
    print(f"\n{len(d)} sides of {len({r[0] for r in rows})} patients: median {np.median(d):+.1f} mm, "
          f"5th-95th percentile {np.percentile(d, 5):+.1f} to {np.percentile(d, 95):+.1f} mm")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
