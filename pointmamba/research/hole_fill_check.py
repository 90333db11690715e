#!/usr/bin/env python3
"""A scan whose open rim was closed by filling the hole: does the shipped model segment it as the scan? (``infer.hole_fill``)

    python -m pointmamba.research.hole_fill_check [SCAN.obj ...] --out DIR [--checkpoint CKPT]

Each labelled scan's longest open rim is closed by a fan of triangles to the rim's centre (:func:`with_fan`), and
it is segmented as tools/predict.py does (the Segmenter, the jaw given): as it is, and closed with
``infer.hole_fill`` off and on. Per-scan mIoU on the scan's own vertices; DIR/per_scan.csv and DIR/summary.md.
Without scans: the 29 shared scans of docs/results/model_base.
"""
from __future__ import annotations

import argparse
import csv
import json
import warnings
from pathlib import Path

import numpy as np


def with_fan(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mesh with its longest open rim closed by a fan of triangles to the rim's centre (one new vertex, last;
    the new faces last, wound as the rim's faces are)."""
    from .model_base_check import boundary_loop

    v = np.asarray(vertices, dtype=np.float64)
    loop = boundary_loop(faces)
    fan = np.stack([np.roll(loop, -1), loop, np.full(len(loop), len(v))], 1)
    return np.vstack([v, v[loop].mean(0)]), np.vstack([np.asarray(faces, dtype=np.int64), fan])


def main(argv: list[str] | None = None) -> None:
    from tqdm import tqdm

    from ..data import fdi_to_class
    from ..data.mesh import read_obj
    from ..evaluation.metrics import ConfusionMatrix
    from ..inference.segmenter import Segmenter
    from .model_base_check import DEFAULT_PATIENTS, SHARED

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scans", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args(argv)
    scans = args.scans or [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]
    segmenters = {on: Segmenter(args.checkpoint, infer={"hole_fill": on}) for on in (False, True)}
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in tqdm(scans, desc="filled scans"):
        v, f = read_obj(path)[:2]
        reference = np.asarray(json.loads(path.with_suffix(".json").read_text())["labels"])
        jaw = "upper" if "upper" in path.stem else "lower"
        closed = with_fan(v, f)
        row: dict = {"scan": path.stem}
        for name, (vv, ff), on in (("as_is", (v, f), True), ("filled_off", closed, False), ("filled_on", closed, True)):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = segmenters[on]((vv, ff), jaw=jaw, name=path.stem, units="mm")
            row[name] = round(ConfusionMatrix(17).update(fdi_to_class(result.labels[:len(v)], jaw, 17),
                                                         fdi_to_class(reference, jaw, 17)).miou(), 4)
            row[f"{name}_found"] = "hole_fill" in result.meta
            row[f"{name}_warned"] = any("filled hole" in str(w.message) for w in seen)
        rows.append(row)
    with open(args.out / "per_scan.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("as_is", "filled_off", "filled_on")}
    lines = [f"# Scans with the rim closed by a fan ({len(rows)})", "",
             "| | as it is | filled, hole_fill off | filled, hole_fill on |", "|---|---|---|---|",
             f"| mean per-scan mIoU | {mean['as_is']:.4f} | {mean['filled_off']:.4f} | {mean['filled_on']:.4f} |",
             f"| scans more than 0.05 below as it is | - | {sum(r['filled_off'] < r['as_is'] - 0.05 for r in rows)} | "
             f"{sum(r['filled_on'] < r['as_is'] - 0.05 for r in rows)} |", "",
             f"Fill found: as it is {sum(r['as_is_found'] for r in rows)} of {len(rows)}, filled with the switch on "
             f"{sum(r['filled_on_found'] for r in rows)} (warned {sum(r['filled_on_warned'] for r in rows)}); the largest "
             f"fall with it on: {min(r['filled_on'] - r['as_is'] for r in rows):+.4f}."]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
