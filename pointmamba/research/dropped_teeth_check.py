#!/usr/bin/env python3
"""Simulated dropped teeth: does ``infer.mend_dropped`` number them back? (issue 43, item 3)

    python -m pointmamba.research.dropped_teeth_check --config FILE [--checkpoint CKPT] [--average-with CKPT ...]
        [--split val] --out DIR [--set key=value ...]

Per labelled scan of the split, the network runs once (the ``infer`` options, mirror TTA included) and the
graph cut makes its labels; then, one at a time, each premolar between two present teeth and each side's
last tooth below the third molar (by the reference) is set to gingiva in the cut's labels, and the arch is
numbered with the mend on. A case is **restored** when most of the tooth's reference vertices get its
reference number back; **fired** when the mend added anything. Other teeth whose number (majority over
their reference vertices) differs from the numbering of the same cut without the mend are counted too.
Optimistic by construction: the network saw the tooth the simulation drops. Writes DIR/drops.csv (one row
per case), DIR/dropped_teeth_check.json and DIR/summary.md.
"""
from __future__ import annotations

from ..cli._common import open_study, run_main, write_study


def _cases(labels, jaw: str) -> list[tuple[int, str]]:
    """(FDI, kind) of each simulated drop of a reference arch: ``between`` (a premolar whose two neighbours
    along its side are present; the central incisor's neighbour across the midline counts) or ``end``
    (a side's last tooth, below 8)."""
    present = {int(t) for t in set(labels.tolist()) if t > 0}
    out = []
    for quadrant in ((1, 2) if jaw == "upper" else (4, 3)):
        for p in (4, 5):
            t = 10 * quadrant + p
            if t in present and t - 1 in present and t + 1 in present:
                out.append((t, "between"))
        side = sorted(t for t in present if t // 10 == quadrant)
        if side and side[-1] % 10 < 8:
            out.append((side[-1], "end"))
    return out


def main() -> None:
    run = open_study(__doc__)

    import numpy as np

    from pointmamba.utils.atomic_file import write_csv
    from pointmamba.cli.output_files import make_out_dir
    from pointmamba.data import class_to_fdi
    from pointmamba.data.mesh import vertex_areas
    from pointmamba.inference.pipeline import _cut, _number, jaw_probabilities, scan_probabilities

    model, cfg, device, out = run.model, run.cfg, run.device, run.out
    num_classes = cfg["data"]["num_classes"]
    rows = []
    for scan in run.labelled_scans("dropped teeth"):
        ref = scan.labels.astype(np.int64)
        options, probs, aligned, normals = scan_probabilities(model, scan, cfg, device)
        probs = jaw_probabilities(probs, num_classes, scan.jaw)
        cut = _cut(probs, aligned, scan.faces, normals, options, lambda name: None)
        areas = vertex_areas(aligned, scan.faces)
        for tooth, kind in _cases(ref, scan.jaw):
            gone = ref == tooth
            dropped = np.where(gone, 0, cut)
            numbered = {}
            for mend in (False, True):
                labels, numbering = _number(dropped, probs, aligned, scan.faces, scan.jaw, num_classes,
                                            {**options, "mend_dropped": mend}, areas=areas)
                numbered[mend] = (class_to_fdi(labels, scan.jaw, num_classes), numbering)
            (plain, _), (mended, numbering) = numbered[False], numbered[True]
            values, counts = np.unique(mended[gone], return_counts=True)
            others = [t for t in np.unique(ref) if t > 0 and t != tooth]

            def majority(fdi, t):
                v, c = np.unique(fdi[ref == t], return_counts=True)
                return int(v[c.argmax()])

            rows.append({"scan": scan.name, "tooth": tooth, "kind": kind, "fired": bool(numbering.mended),
                         "restored": int(values[counts.argmax()]) == tooth,
                         "share": float((mended[gone] == tooth).mean()),
                         "others_changed": sum(majority(plain, t) != majority(mended, t) for t in others)})
    make_out_dir(out)
    write_csv(out / "drops.csv", rows)
    lines = ["| drops | cases | mend fired | restored with its number | other teeth changed |", "|---|---|---|---|---|"]
    summary = {}
    for kind in ("between", "end", "all"):
        sel = [r for r in rows if kind in ("all", r["kind"])]
        n = max(len(sel), 1)
        s = {"cases": len(sel), "fired": sum(r["fired"] for r in sel), "restored": sum(r["restored"] for r in sel),
             "others_changed": sum(r["others_changed"] for r in sel)}
        summary[kind] = s
        lines.append(f"| {kind} | {s['cases']} | {s['fired']} ({s['fired'] / n:.0%}) | {s['restored']} "
                     f"({s['restored'] / n:.0%}) | {s['others_changed']} |")
    write_study(out, "dropped_teeth_check.json", {**run.provenance(), "summary": summary}, "\n".join(lines) + "\n",
                "drops.csv")


def cli() -> None:
    """Entry point of ``python -m pointmamba.research.dropped_teeth_check``."""
    run_main(main)


if __name__ == "__main__":
    cli()
