"""The pre-registered rule's rows that `numbering_replay` does not write: tooth AUC, groups, dense meshes.

    python docs/results/gum_between_teeth/measure.py CACHE TEST_PER_SCAN_CSV --out DIR [--dense]
        [--variants graph_cut_tooth_pair_cost=1 graph_cut_tooth_pair_cost=2]

CACHE: a numbering replay cache (the held-out pair's val scans); TEST_PER_SCAN_CSV: tools/test.py's
per_scan.csv of the same pair (its ``source``, ``few_teeth`` and ``lone_premolar`` columns name the groups).
For each variant (infer options, KEY=VALUE[,KEY=VALUE]; by default ``infer.graph_cut_tooth_pair_cost`` 1 and 2;
the stored probabilities cut again with each), each val scan is numbered and reviewed as tools/predict.py does
it, with the default inference otherwise:
- per-scan mIoU (tools/test.py's), the review flag, the per-tooth confidence and whether the tooth is wrong
  (the reference's majority label on its vertices is not its number, as `calibrate_confidence`);
- the tooth AUC (a wrong tooth below a right one, ties half), the mean of the arches without the lone-premolar
  pattern per source, and of those with 13 teeth or fewer;
- with ``--dense``: each scan subdivided twice (16x the vertices; the cut's two passes run), the cached
  probabilities carried to each new vertex as its parents' mean, refined, and scored on the original vertices.
Writes DIR/scans.csv and DIR/summary.md.
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.research.numbering_replay import REMOVAL_MARK

VARIANTS = ("graph_cut_tooth_pair_cost=1", "graph_cut_tooth_pair_cost=2")


def _options(variant: str) -> dict:
    out = {}
    for item in variant.split(","):
        key, value = item.split("=")
        out[key] = json.loads(value)
    return out


def _miou(fdi: np.ndarray, ref: np.ndarray, jaw: str) -> float:
    return ConfusionMatrix(17).update(fdi_to_class(fdi, jaw, 17), fdi_to_class(ref, jaw, 17)).miou()


def reviewed(d: dict, options: dict) -> tuple[float, bool, list[tuple[float, bool]]]:
    """(mIoU, review flag, [(tooth confidence, wrong)]) of one cached scan under ``options``."""
    from pointmamba.inference.config import infer_options
    from pointmamba.inference.confidence import scan_confidence, tooth_truth
    from pointmamba.inference.pipeline import refine_either_jaw, refined_prediction

    jaw, ref = str(d["jaw"]), d["labels"]
    classes, numbering, call = refine_either_jaw(d["probs"], d["aligned"], d["faces"], d["normals"], jaw, 17, options)
    pred = refined_prediction(classes, numbering, call, d["probs"], d["aligned"], jaw, 17)
    conf = scan_confidence(pred.probs, pred.classes, pred.instances, jaw, pred.aligned, pred.instance_probs,
                           faces=d["faces"], numbering=pred.numbering, jaw_call=pred.jaw_call,
                           flagged_scale=float(infer_options({"infer": options})["flagged_confidence_scale"]))
    truth = tooth_truth(pred.instances, ref)
    teeth = [(float(t.confidence), truth[t.instance] != t.fdi) for t in conf.teeth]
    return _miou(pred.fdi, ref, jaw), bool(conf.review), teeth


def dense(d: dict, options: dict) -> float:
    """mIoU on the original vertices of the scan subdivided twice, the probabilities carried to new vertices."""
    from pointmamba.data import class_to_fdi
    from pointmamba.data.mesh import subdivide, vertex_normals
    from pointmamba.inference.pipeline import refine_either_jaw

    jaw, ref = str(d["jaw"]), d["labels"]
    points, faces, probs = d["aligned"], d["faces"], d["probs"]
    for _ in range(2):
        points, faces, parents = subdivide(points, faces)
        probs = np.concatenate([probs, probs[parents].mean(1)])
    classes, _, _ = refine_either_jaw(probs, points, faces, vertex_normals(points, faces), jaw, 17, options)
    n = len(ref)
    return _miou(class_to_fdi(classes[:n], jaw, 17), ref, jaw)


def _auc(teeth: list[tuple[float, bool]]) -> float:
    conf = np.array([c for c, _ in teeth])
    wrong = np.array([w for _, w in teeth])
    w, r = conf[wrong][:, None], conf[~wrong][None, :]
    return float((w < r).mean() + 0.5 * (w == r).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache")
    parser.add_argument("per_scan_csv")
    parser.add_argument("--out", required=True)
    parser.add_argument("--dense", action="store_true")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args = parser.parse_args()
    default = args.variants == list(VARIANTS)  # columns named by the cost alone, as first written
    labels = [v.rsplit("=", 1)[1] for v in args.variants] if default else args.variants
    groups = {r["name"]: r for r in csv.DictReader(open(args.per_scan_csv))}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, teeth = [], {k: [] for k in labels}
    for path in sorted(Path(args.cache).glob("*.npz")):
        if REMOVAL_MARK in path.stem:
            continue
        g = groups[path.stem]
        row = {"name": path.stem, "source": g["source"], "few_teeth": g["few_teeth"], "lone_premolar": g["lone_premolar"]}
        with np.load(path) as f:
            d = {k: f[k] for k in f.files}
        stored = json.loads(str(d["options"]))
        for k, variant in zip(labels, args.variants):
            options = {**stored, **_options(variant)}
            miou, review, t = reviewed(d, options)
            teeth[k] += t
            row.update({f"miou_{k}": miou, f"review_{k}": review, f"wrong_teeth_{k}": sum(w for _, w in t)})
            if args.dense:
                row[f"dense16_{k}"] = dense(d, options)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out / "scans.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"| {'tooth pair cost' if default else 'variant'} | tooth AUC (wrong / all teeth) | no pattern, MSN | no pattern, 3D-IOSSeg | "
             "<= 13 teeth, no pattern | all | dense 16x |", "|---|---|---|---|---|---|---|"]
    for k in labels:
        def mean(sel, key=f"miou_{k}"):
            v = [r[key] for r in rows if sel(r) and key in r]
            return f"{np.mean(v):.4f} ({len(v)})" if v else "-"
        plain = lambda r: r["lone_premolar"] == "False"  # noqa: E731
        lines.append(f"| {k} | {_auc(teeth[k]):.4f} ({sum(w for _, w in teeth[k])} / {len(teeth[k])}) | "
                     f"{mean(lambda r: plain(r) and r['source'] == 'scans')} | "
                     f"{mean(lambda r: plain(r) and r['source'] == 'iosseg')} | "
                     f"{mean(lambda r: plain(r) and r['few_teeth'] == 'True')} | {mean(lambda r: True)} | "
                     f"{mean(lambda r: True, f'dense16_{k}')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
