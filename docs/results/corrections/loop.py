#!/usr/bin/env python3
"""The corrections demo's two steps around the fine-tune (docs/results/corrections/README.md).

    loop.py pick BEFORE/metrics.json REVIEWED_DIR [SEED]  # draw 4 scans with a number wrong (seed 47), write them as a reviewer would
    loop.py compare BEFORE/metrics.json AFTER/metrics.json REVIEWED_DIR > results.md

``pick`` writes REVIEWED_DIR/<name>.obj (the scan's mesh) and <name>.json in the review page's download format
(id_patient, jaw, labels per original vertex, instances), with the reference labels: a perfect reviewer.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from pointmamba.data.teeth3ds import instances_from_labels, read_labels

ROOTS = [Path("../shared/data/scans"), Path("../shared/data/iosseg")]
KEPT = 0.80


def per_scan(path: str) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads(Path(path).read_text())["per_scan"]}


def source_files(name: str) -> tuple[Path, Path]:
    patient = name.rsplit("_", 1)[0]
    for root in ROOTS:
        mesh = root / patient / f"{name}.obj"
        if mesh.is_file():
            return mesh, mesh.with_suffix(".json")
    raise FileNotFoundError(name)


def pick(before: str, out: str, seed: str = "47") -> None:
    scans = per_scan(before)
    wrong = sorted(n for n, s in scans.items() if s["TIR"] < 1)
    chosen = sorted(np.random.default_rng(int(seed)).choice(wrong, size=4, replace=False).tolist())
    folder = Path(out)
    folder.mkdir(parents=True)
    for name in chosen:
        mesh, ref = source_files(name)
        labels = read_labels(ref).labels
        shutil.copyfile(mesh, folder / f"{name}.obj")
        doc = {"id_patient": name.rsplit("_", 1)[0], "jaw": name.rsplit("_", 1)[1],
               "labels": labels.tolist(), "instances": instances_from_labels(labels).tolist()}
        (folder / f"{name}.json").write_text(json.dumps(doc))
    rest = sorted(set(scans) - set(chosen))
    print(f"with a number wrong (TIR < 1): {len(wrong)} of {len(scans)}: {' '.join(wrong)}")
    print(f"corrected: {' '.join(chosen)}")
    print(f"measured ({len(rest)}): [{', '.join(rest)}]")


def figures(before: list[float], after: list[float]) -> str:
    """``mean | 10th pct | kept`` columns, each ``before -> after``."""
    b, a = np.array(before), np.array(after)
    return (f"{b.mean():.3f} -> {a.mean():.3f} | {np.percentile(b, 10):.3f} -> {np.percentile(a, 10):.3f} | "
            f"{int((b >= KEPT).sum())} -> {int((a >= KEPT).sum())} of {len(b)}")


def compare(before: str, after: str, reviewed: str) -> None:
    b, a = per_scan(before), per_scan(after)
    corrected = sorted(p.stem for p in Path(reviewed).glob("*.json"))
    measured = sorted(set(a) - set(corrected))
    patients = {n.rsplit("_", 1)[0] for n in corrected}
    other = [n for n in measured if n.rsplit("_", 1)[0] not in patients]
    print("| jaws | n | mean scan mIoU, before -> after | 10th pct | kept (>= 0.80) |\n|---|---|---|---|---|")
    for label, names in (("measured (not corrected)", measured), ("measured, corrected patients' other jaws left out", other),
                         ("corrected (fit, not held out)", corrected)):
        print(f"| {label} | {len(names)} | {figures([b[n]['miou'] for n in names], [a[n]['miou'] for n in names])} |")
    print("\n| jaw | corrected | mIoU before | after | change | TIR before | after |\n|---|---|---|---|---|---|---|")
    for n in sorted(a, key=lambda n: a[n]["miou"] - b[n]["miou"]):
        print(f"| {n} | {'yes' if n in corrected else ''} | {b[n]['miou']:.3f} | {a[n]['miou']:.3f} | "
              f"{a[n]['miou'] - b[n]['miou']:+.3f} | {b[n]['TIR']:.3f} | {a[n]['TIR']:.3f} |")
    mb, ma = (np.array([s[n]["miou"] for n in measured]) for s in (b, a))
    broke = [n for n in measured if a[n]["miou"] - b[n]["miou"] < -0.05]
    ok = ma.mean() - mb.mean() >= -0.005 and (ma >= KEPT).sum() >= (mb >= KEPT).sum() and not broke
    print(f"\nRule (pre-registered): mean change {ma.mean() - mb.mean():+.4f} (>= -0.005), kept "
          f"{int((mb >= KEPT).sum())} -> {int((ma >= KEPT).sum())} (not fewer), jaws losing > 0.05: "
          f"{', '.join(broke) or 'none'} -> **{'passed' if ok else 'FAILED'}**")


if __name__ == "__main__":
    {"pick": pick, "compare": compare}[sys.argv[1]](*sys.argv[2:])
