"""ReviewRules.skipped_gap_mm off (None) and on (1.0) on the val scans of both held-out pairs' replay caches, today's
defaults (split B's cache stores numbering_class_prior 0: set to today's 0.5).

    python docs/results/review_flag/skipped_gap/measure.py > docs/results/review_flag/skipped_gap/measure.txt

(at commit c8958f9, which holds ``ReviewRules.skipped_gap_mm``; the option left after this measurement)

Per scan: mIoU, the review flag and findings under each rule, whether any reference tooth is numbered wrong or
lost; per split: recall below 0.80, flagged at or above 0.80, the scans with a wrong tooth flagged, the tooth AUC
(a wrong tooth's confidence below a right one's, ties half; confidences as tools/predict.py reports them).
"""
from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.evaluation.removal_check import tooth_numbers
from pointmamba.inference.confidence import ReviewRules, scan_confidence, tooth_truth
from pointmamba.inference.config import infer_options
from pointmamba.inference.pipeline import refine_either_jaw, refined_prediction
from pointmamba.research.numbering_replay import REMOVAL_MARK

RULES = {"off": ReviewRules(), "on": ReviewRules(skipped_gap_mm=1.0)}


def _auc(teeth: list[tuple[float, bool]]) -> float:
    conf = np.array([c for c, _ in teeth])
    wrong = np.array([w for _, w in teeth])
    w, r = conf[wrong][:, None], conf[~wrong][None, :]
    return float((w < r).mean() + 0.5 * (w == r).mean())


for split in "AB":
    stats = {k: {"below": 0, "below_flagged": 0, "kept": 0, "kept_flagged": 0, "wrong": 0, "wrong_flagged": 0,
                 "teeth": []} for k in RULES}
    for path in sorted(glob.glob(f"work_dirs/replay/{split}/*.npz")):
        if REMOVAL_MARK in path:
            continue
        with np.load(path) as d:
            jaw, ref = str(d["jaw"]), d["labels"]
            options = infer_options({"infer": {**json.loads(str(d["options"])), "numbering_class_prior": 0.5}})
            classes, numbering, call = refine_either_jaw(d["probs"], d["aligned"], d["faces"], d["normals"], jaw, 17,
                                                         options)
            pred = refined_prediction(classes, numbering, call, d["probs"], d["aligned"], jaw, 17)
            faces = d["faces"]
        miou = ConfusionMatrix(17).update(fdi_to_class(pred.fdi, jaw, 17), fdi_to_class(ref, jaw, 17)).miou()
        wrong_tooth = any(n != t for t, n in tooth_numbers(ref, pred.fdi).items())
        line = [split, Path(path).stem, f"{miou:.3f}", "wrong tooth" if wrong_tooth else "-"]
        for k, rules in RULES.items():
            conf = scan_confidence(pred.probs, pred.classes, pred.instances, jaw, pred.aligned, pred.instance_probs,
                                   rules=rules, faces=faces, numbering=pred.numbering, jaw_call=pred.jaw_call,
                                   flagged_scale=float(options["flagged_confidence_scale"]))
            s = stats[k]
            key = "below" if miou < 0.80 else "kept"
            s[key] += 1
            s[key + "_flagged"] += bool(conf.review)
            s["wrong"] += wrong_tooth
            s["wrong_flagged"] += wrong_tooth and bool(conf.review)
            truth = tooth_truth(pred.instances, ref)
            s["teeth"] += [(float(t.confidence), truth[t.instance] != t.fdi) for t in conf.teeth]
            line.append(f"{k}: {'FLAG' if conf.review else '----'} {' '.join(sorted({f for f, _ in conf.findings}))}")
        print(" | ".join(line), flush=True)
    for k, s in stats.items():
        print(f"split {split}, {k}: below 0.80 flagged {s['below_flagged']} of {s['below']}; at or above flagged "
              f"{s['kept_flagged']} of {s['kept']}; a tooth wrong flagged {s['wrong_flagged']} of {s['wrong']}; "
              f"tooth AUC {_auc(s['teeth']):.4f}", flush=True)
