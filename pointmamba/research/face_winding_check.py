#!/usr/bin/env python3
"""A mesh wound inside out: does the shipped model segment it as it segments the scan? (``infer.orient_faces``)

    python -m pointmamba.research.face_winding_check [SCAN.obj ...] --out DIR [--checkpoint CKPT]

Each labelled scan is segmented as tools/predict.py does (the Segmenter, the jaw given): as it is, and with every
face's winding reversed, with ``infer.orient_faces`` off and on. Per-scan mIoU (``Segmentation.compare``);
DIR/per_scan.csv and DIR/summary.md. Without scans: the 29 shared scans of docs/results/model_base.
"""
from __future__ import annotations

import warnings

import numpy as np


def main(argv: list[str] | None = None) -> None:
    from tqdm import tqdm

    from ..utils.atomic_file import write_csv

    from .model_base_check import probe_meshes, probe_parser, probe_setup

    args = probe_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    scans, segmenters = probe_setup(args, "orient_faces")
    rows = []
    for path, v, f, reference, jaw in tqdm(probe_meshes(scans), total=len(scans), desc="reversed scans"):
        row: dict = {"scan": path.stem}
        for name, faces, on in (("as_is", f, True), ("reversed_off", f[:, ::-1], False), ("reversed_on", f[:, ::-1], True)):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = segmenters[on]((v, np.ascontiguousarray(faces)), jaw=jaw, name=path.stem, units="mm")
            row[name] = round(result.compare(reference)["miou"], 4)
            row[f"{name}_reversed"] = bool(result.meta.get("faces_reversed"))
            row[f"{name}_warned"] = any("wound inside out" in str(w.message) for w in seen)
        rows.append(row)
    write_csv(args.out / "per_scan.csv", rows)
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("as_is", "reversed_off", "reversed_on")}
    lines = [f"# Scans wound inside out ({len(rows)})", "",
             "| | as it is | reversed, orient_faces off | reversed, orient_faces on |", "|---|---|---|---|",
             f"| mean per-scan mIoU | {mean['as_is']:.4f} | {mean['reversed_off']:.4f} | {mean['reversed_on']:.4f} |",
             f"| scans more than 0.05 below as it is | - | {sum(r['reversed_off'] < r['as_is'] - 0.05 for r in rows)} | "
             f"{sum(r['reversed_on'] < r['as_is'] - 0.05 for r in rows)} |", "",
             f"Reversed for the segmentation: as it is {sum(r['as_is_reversed'] for r in rows)} of {len(rows)}, "
             f"reversed with the switch on {sum(r['reversed_on_reversed'] for r in rows)} (warned "
             f"{sum(r['reversed_on_warned'] for r in rows)}); the largest fall with it on: "
             f"{min(r['reversed_on'] - r['as_is'] for r in rows):+.4f}."]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
