"""A split's val scans scored three ways, from a numbering replay cache of its held-out pair
(docs/results/reference_doubts/README.md): against the references as labelled; with the three references whose
reading is clear read that way (IOS078_upper's canines 13 / 23; IOS068_lower every tooth one number on;
IOS004_lower's left side as its right: the molar-sized tooth behind the 4 a 5, then the 6); and without the four
val references in doubt.

    python -m pointmamba.research.numbering_replay cache --config configs/shared_data_recipe.yaml \
        --checkpoint work_dirs/numbering/A2_e28_s1/last.pth \
        --average-with work_dirs/numbering/A2_nocoord_e28_s1/last.pth --split val --out work_dirs/replay/A_s72
    python docs/results/reference_doubts/rescore.py work_dirs/replay/A_s72 > docs/results/reference_doubts/rescore_A.txt

The groups are those of tools/test.py (pointmamba.evaluation.scan_summary.reference_groups), each from the
reference it is scored against; a pattern arch is also numbered with the dentition that reference gives.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pointmamba.evaluation.scan_summary import KEPT_MIOU, reference_groups
from pointmamba.inference.dentition import reference_dentition
from pointmamba.research.model_base_check import probe_miou as miou
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file

REREAD = {"IOS078_upper": {14: 13, 24: 23},
          "IOS068_lower": {t: t + 1 for q in (3, 4) for t in range(10 * q + 1, 10 * q + 7)},
          "IOS004_lower": {36: 35, 37: 36}}
"""References whose reading is clear: their numbers as read (README: the evidence for each)."""
DOUBTFUL = set(REREAD) | {"MSN023_upper"}
"""Val references in doubt: the three above and MSN023_upper (one position off, its reading unclear)."""


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    x = np.asarray(values)
    return f"{x.mean():.4f} / {np.percentile(x, 10):.4f} / {(x >= KEPT_MIOU).mean():.0%} ({len(x)})"


def score(path: Path, pred, aligned: np.ndarray, ref: np.ndarray) -> dict:
    groups = reference_groups(ref, aligned, pred.jaw)
    given = reference_dentition(aligned, ref, pred.jaw) if groups["lone_premolar"] else None
    given_miou = miou(replay_file(path, {"dentition": given}).fdi, ref, pred.jaw) if given is not None else None
    return {"name": path.stem, "miou": miou(pred.fdi, ref, pred.jaw), "given": given_miou,
            "dentition": given, **groups}


def main(cache: Path) -> None:
    rows: dict[str, list[dict]] = {"as labelled": [], "re-read": [], "without the doubtful": []}
    for path in sorted(cache.glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        pred = replay_file(path, {})
        with np.load(path) as d:
            aligned = d["aligned"]
        labelled = score(path, pred, aligned, pred.reference)
        rows["as labelled"].append(labelled)
        if path.stem in REREAD:
            ref = pred.reference.copy()
            for old, new in REREAD[path.stem].items():
                ref[pred.reference == old] = new
            rows["re-read"].append(score(path, pred, aligned, ref))
        else:
            rows["re-read"].append(labelled)
        if path.stem not in DOUBTFUL:
            rows["without the doubtful"].append(labelled)
    print("| scan in doubt | reference | teeth | pattern | mIoU | dentition given | mIoU given |")
    print("|---|---|---|---|---|---|---|")
    for which in ("as labelled", "re-read"):
        for r in rows[which]:
            if r["name"] in DOUBTFUL and (which == "as labelled" or r["name"] in REREAD):
                print(f"| {r['name']} | {which} | {'<= 13' if r['few_teeth'] else '>= 14'} | {r['lone_premolar']} | "
                      f"{r['miou']:.4f} | {r['dentition'] or '-'} | "
                      f"{'-' if r['given'] is None else format(r['given'], '.4f')} |")
    print("\n| group (mean / 10th pct / kept (n)) | " + " | ".join(rows) + " |\n|---|---|---|---|")
    picks = (("all", lambda r: True, "miou"),
             ("no lone premolar side", lambda r: not r["lone_premolar"], "miou"),
             ("  MSN, no pattern", lambda r: not r["lone_premolar"] and r["name"].startswith("MSN"), "miou"),
             ("  3D-IOSSeg, no pattern", lambda r: not r["lone_premolar"] and r["name"].startswith("IOS"), "miou"),
             ("<= 13 teeth, no pattern", lambda r: r["few_teeth"] and not r["lone_premolar"], "miou"),
             ("lone premolar side (auto)", lambda r: r["lone_premolar"], "miou"),
             ("lone premolar side, dentition given", lambda r: r["lone_premolar"] and r["given"] is not None,
              "given"))
    for name, pick, key in picks:
        print(f"| {name} | " + " | ".join(summary([r[key] for r in rows[w] if pick(r)]) for w in rows) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
