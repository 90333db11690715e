"""The rule's table (log.md, pre-registration): baseline pair against the candidate pair, per split.

    python docs/results/partial_arches/compare.py [--candidate candidate2] A B   # splits whose <candidate>_<S>/ is complete
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FLAG = HERE.parent / "review_flag"
BASE = {"test": FLAG / "touching_nu/nu10/pair_{s}/per_scan.csv", "removal": FLAG / "touching_nu/nu10/removal_{s}/removal_check.json",
        "confidence": FLAG / "flagged_scale/scale_0.89/confidence_{s}/calibration.json", "partial": HERE / "baseline_{s}/partial_scans.json"}
args = sys.argv[1:]
name = "candidate"
if args[:1] == ["--candidate"]:
    name, args = args[1], args[2:]
CAND = {"test": HERE / (name + "_{s}/test/per_scan.csv"), "removal": HERE / (name + "_{s}/removal/removal_check.json"),
        "confidence": HERE / (name + "_{s}/confidence/calibration.json"), "partial": HERE / (name + "_{s}/partial/partial_scans.json")}


def figures(files, s):
    rows = list(csv.DictReader(open(str(files["test"]).format(s=s))))
    m = np.array([float(r["miou"]) for r in rows])
    low = [r for r in rows if float(r["miou"]) < 0.8]
    high = [r for r in rows if float(r["miou"]) >= 0.8]
    plain = [float(r["miou"]) for r in rows if r["lone_premolar"] == "False"]
    few = [float(r["miou"]) for r in rows if r["lone_premolar"] == "False" and int(r["teeth"]) <= 13]
    given = [float(r["miou_given"]) for r in rows if r["lone_premolar"] == "True" and r["miou_given"]]
    removal = json.load(open(str(files["removal"]).format(s=s)))["summary"]
    conf = json.load(open(str(files["confidence"]).format(s=s)))
    partial = json.load(open(str(files["partial"]).format(s=s)))["summary"]
    return {"mean": m.mean(), "p10": np.percentile(m, 10), "kept": int((m >= 0.8).sum()), "n": len(m),
            "recall": f"{sum(r['review'] == 'True' for r in low)} of {len(low)}",
            "recall_ok": sum(r["review"] == "True" for r in low) >= 0.9 * len(low),
            "alarms": f"{sum(r['review'] == 'True' for r in high)} of {len(high)}",
            "alarms_ok": sum(r["review"] == "True" for r in high) <= 0.2 * len(high),
            "removal": removal["share_of_removals_changing_any"], "teeth_changed": removal["share_of_teeth_changed"],
            "plain": np.mean(plain), "few": np.mean(few) if few else float("nan"),
            "given": np.mean(given) if given else float("nan"), "auc": conf.get("ranking_auc"),
            "partial": partial["all"]["mean"], "partial_side": np.mean([partial[v]["mean"] for v in ("side_right", "side_left")]),
            "partial_front": partial["front"]["mean"], "per_scan": {r["name"]: float(r["miou"]) for r in rows}}


print("| split | pair | mean | p10 | kept | flag recall | false alarms | removal check | no pattern | ≤ 13, no pattern "
      "| pattern, given | tooth AUC | partial: all / one side / front |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
verdict = {}
for s in args:
    b, c = figures(BASE, s), figures(CAND, s)
    for name, f in (("baseline", b), ("candidate", c)):
        print(f"| {s} | {name} | {f['mean']:.4f} | {f['p10']:.3f} | {f['kept']} of {f['n']} | {f['recall']} | {f['alarms']} | "
              f"{f['removal']:.1%} / {f['teeth_changed']:.1%} | {f['plain']:.3f} | {f['few']:.3f} | {f['given']:.3f} | "
              f"{f['auc']:.3f} | {f['partial']:.3f} / {f['partial_side']:.3f} / {f['partial_front']:.3f} |")
    verdict[s] = {"1 mean higher": c["mean"] > b["mean"], "2 p10 within 0.02": c["p10"] >= b["p10"] - 0.02,
                  "2 kept not lower": c["kept"] >= b["kept"], "3 recall >= 90 %": c["recall_ok"],
                  "3 false alarms <= 20 %": c["alarms_ok"], "4 removal within 1 point": c["removal"] <= b["removal"] + 0.01}
    moved = sorted(((c["per_scan"][k] - b["per_scan"][k], k) for k in b["per_scan"]))
    print(f"\nsplit {s}, scans that moved most: " + ", ".join(f"{k} {b['per_scan'][k]:.3f} -> {c['per_scan'][k]:.3f}"
                                                        for d, k in moved[:4] + moved[-4:] if abs(d) > 0.01) + "\n")
for s, v in verdict.items():
    print(s, "PASS" if all(v.values()) else "FAIL", {k: bool(x) for k, x in v.items()})
