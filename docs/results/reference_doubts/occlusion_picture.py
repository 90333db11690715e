"""IOS068's two jaws from the side, in the frame 3D-IOSSeg stores them in (the lower turned back to where it bites):
each tooth's vertices coloured by its number, the upper above, the lower below; the lower numbered as its reference
numbers it, and one number on, as the held-out pair reads it (docs/results/reference_doubts/README.md).

    python docs/results/reference_doubts/occlusion_picture.py ../shared/data/iosseg/IOS068 docs/results/reference_doubts/IOS068_occlusion.png
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pointmamba.data import load_scan  # noqa: E402


def main(folder: Path, out: Path) -> None:
    up = load_scan(folder / f"{folder.name}_upper.obj")
    lo = load_scan(folder / f"{folder.name}_lower.obj")
    lower_v = lo.vertices * np.array([1.0, -1.0, -1.0])  # half a turn about the front-back axis: where it bites
    side = 1.0  # the patient's right side: quadrants 1 and 4
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), sharey=True)
    for ax, (title, shift) in zip(axes, (("lower as its reference numbers it", 0),
                                         ("lower one number on (the held-out pair's reading)", 1))):
        for scan, v, quadrant, below in ((up, up.vertices, 1, False), (lo, lower_v, 4, True)):
            teeth = [t for t in np.unique(scan.labels) if t // 10 == quadrant]
            keep = np.isin(scan.labels, teeth)
            ax.scatter(v[~keep & (scan.labels == 0), 0], v[~keep & (scan.labels == 0), 1], s=0.2, c="0.85")
            for t in teeth:
                m = scan.labels == t
                shown = t + shift if below else t
                colour = plt.cm.tab10((shown % 10) % 10)
                ax.scatter(v[m, 0], v[m, 1], s=0.6, color=colour)
                c = v[m].mean(0)
                ax.annotate(str(shown), (c[0], c[1] + (-9 if below else 9)), ha="center", fontsize=10,
                            color=colour, weight="bold")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("front-back (mm): front to the right")
        ax.set_aspect("equal")
    axes[0].set_ylabel("occlusal direction (mm)")
    fig.suptitle(f"{folder.name}, the patient's right side (upper quadrant 1 above, lower quadrant 4 below): "
                 "same colour = same tooth position", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
