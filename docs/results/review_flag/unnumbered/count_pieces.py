#!/usr/bin/env python3
"""Count the graph cut's tooth pieces that are no reference tooth's main piece (the prior behind
``infer.numbering_unnumbered_cost``).

    python docs/results/review_flag/unnumbered/count_pieces.py CACHE [CACHE ...]

CACHE: folders of ``python -m pointmamba.research.numbering_replay cache`` (any .npz holding probs, aligned,
faces, cut, labels). Each cut piece (the instances the numbering numbers) is a tooth's main piece when it
holds the most vertices of its majority reference tooth; the others (a second piece of a tooth, or a piece
on reference gingiva) are what the numbering should leave unnumbered. Prints the counts, their share, the
share's -log, and each unnumbered piece's width and mean gingiva probability.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from pointmamba.data.mesh import vertex_areas
from pointmamba.inference.tooth_numbering import cut_pieces, measured_pieces


def pieces_of(path: Path) -> list[tuple[bool, float, float]]:
    """(main piece?, width mm, mean gingiva probability) of each cut piece of one cached scan."""
    with np.load(path) as d:
        probs, aligned, faces, cut, ref = d["probs"], d["aligned"], d["faces"], d["cut"], d["labels"]
    instances, mean_probs = measured_pieces(cut_pieces(cut, aligned, faces), aligned, probs, vertex_areas(aligned, faces))
    best: dict[int, tuple[int, int]] = {}  # reference tooth -> (its vertices in the piece, piece)
    for k, inst in enumerate(instances):
        counts = np.bincount(ref[inst.vertices].astype(np.int64))
        tooth = int(counts.argmax())
        if tooth and counts[tooth] > best.get(tooth, (0, -1))[0]:
            best[tooth] = (int(counts[tooth]), k)
    main = {k for _, k in best.values()}
    return [(k in main, inst.width, float(mean_probs[k, 0])) for k, inst in enumerate(instances)]


def main() -> None:
    rows = []
    for folder in sys.argv[1:]:
        for path in sorted(Path(folder).glob("*.npz")):
            rows += [(path.stem, *r) for r in pieces_of(path)]
    other = [r for r in rows if not r[1]]
    share = len(other) / max(len(rows), 1)
    print(f"pieces {len(rows)}, not a tooth's main piece {len(other)} ({100 * share:.2f} %), "
          f"-log share {-math.log(max(share, 1e-12)):.2f} nats")
    for name, _, width, gum in sorted(other, key=lambda r: -r[2]):
        print(f"  {name}: {width:.1f} mm, gingiva {gum:.2f}")


if __name__ == "__main__":
    main()
