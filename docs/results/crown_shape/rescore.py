"""Split B's val scans scored as labelled and with IOS078_upper's canines numbered by the project's convention
(14 -> 13, 24 -> 23), from a numbering replay cache of the held-out pair (docs/results/crown_shape/README.md).

    python -m pointmamba.research.numbering_replay cache --config configs/shared_data_recipe_split2.yaml \
        --checkpoint work_dirs/numbering/B_pair_e28_s1.pth --split val --out work_dirs/replay/B_s71
    python docs/results/crown_shape/rescore.py work_dirs/replay/B_s71 > docs/results/crown_shape/rescore.txt

Per scan: the default prediction's mIoU, and for a pattern arch (a side of canine, one premolar-sized tooth,
molars) the mIoU with the dentition its reference gives, both against either reference; the groups of tools/test.py
(no pattern, <= 13 teeth without it, the pattern under auto and with the dentition given) from each reference.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.evaluation.scan_summary import reference_groups
from pointmamba.inference.dentition import reference_dentition
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file

CORRECTED = {"IOS078_upper": {14: 13, 24: 23}}


def miou(fdi: np.ndarray, ref: np.ndarray, jaw: str) -> float:
    return ConfusionMatrix(17).update(fdi_to_class(fdi, jaw, 17), fdi_to_class(ref, jaw, 17)).miou()


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    x = np.asarray(values)
    return f"{x.mean():.4f} / {np.percentile(x, 10):.4f} / {(x >= 0.8).mean():.0%} ({len(x)})"


def main(cache: Path) -> None:
    rows = {"as labelled": [], "corrected": []}
    print("| scan | reference | teeth | pattern | mIoU (auto) | dentition given | mIoU (given) |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(cache.glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        pred = replay_file(path, {})
        with np.load(path) as d:
            aligned = d["aligned"]
        for which in rows:
            ref = pred.reference.copy()
            if which == "corrected":
                if path.stem not in CORRECTED:
                    rows[which].append(rows["as labelled"][-1])
                    continue
                for old, new in CORRECTED[path.stem].items():
                    ref[pred.reference == old] = new
            groups = reference_groups(ref, aligned, pred.jaw)
            given = reference_dentition(aligned, ref, pred.jaw) if groups["lone_premolar"] else None
            given_miou = (miou(replay_file(path, {"dentition": given}).fdi, ref, pred.jaw)
                          if given is not None else None)
            row = {"name": path.stem, "miou": miou(pred.fdi, ref, pred.jaw), "given": given_miou, **groups}
            rows[which].append(row)
            if which == "as labelled" or path.stem in CORRECTED:
                print(f"| {path.stem} | {which} | {len(np.unique(ref[ref > 0]))} | {groups['lone_premolar']} | "
                      f"{row['miou']:.4f} | {given or '-'} | "
                      f"{'-' if given_miou is None else f'{given_miou:.4f}'} |")
    print("\n| group (mean / 10th pct / kept (n)) | as labelled | corrected |\n|---|---|---|")
    for name, pick, key in (("all", lambda r: True, "miou"),
                            ("no lone premolar side", lambda r: not r["lone_premolar"], "miou"),
                            ("<= 13 teeth, no pattern", lambda r: r["few_teeth"] and not r["lone_premolar"], "miou"),
                            ("lone premolar side (auto)", lambda r: r["lone_premolar"], "miou"),
                            ("lone premolar side, dentition given", lambda r: r["lone_premolar"] and r["given"] is not None,
                             "given")):
        print(f"| {name} | " + " | ".join(summary([r[key] for r in rows[w] if pick(r)]) for w in rows) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
