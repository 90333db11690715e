"""Pre-registration 3 of docs/results/hole_fill: a closed mesh's crown side from the third moment of its normals.

    python docs/results/hole_fill/closed_pose.py [--poses-only] > docs/results/hole_fill/closed_pose.txt

Rule 1: every mesh's canonical pose (geometry only) against the one commit ad519d7 gives (its pose module is
loaded from git), and the lowest share of vector area in area. Rule 3: the pose's time on the 201k-vertex scan.
Rule 2: the 29 scans of ../model_base with the longest rim closed by a fan to its centre (``with_fan``),
segmented as tools/predict.py does (the shipped model, the jaw given), against the scans as they are; mIoU on the
scan's own vertices; per scan and the summary.
"""
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np

from pointmamba.data.mesh import face_normals, read_obj
from pointmamba.data.pose import canonical_pose
from pointmamba.research.model_base_check import DEFAULT_PATIENTS, SHARED, best_seconds, dense_scan, probe_miou, with_fan

ROOT = Path(__file__).resolve().parents[3]


def old_pose_module() -> types.ModuleType:
    source = subprocess.run(["git", "show", "ad519d7:pointmamba/data/pose.py"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    module = types.ModuleType("pointmamba.data.pose_ad519d7")
    module.__package__ = "pointmamba.data"
    exec(compile(source, "pose@ad519d7", "exec"), module.__dict__)
    return module


old = old_pose_module()
meshes = sorted(SHARED.glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj"))
changed, shares = [], []
for path in meshes:
    v, f = read_obj(path)[:2]
    v = v.astype(np.float64)
    n = face_normals(v, f)
    share = float(np.linalg.norm(n.sum(0)) / np.linalg.norm(n, axis=1).sum())
    shares.append((share, path.stem))
    if not np.array_equal(canonical_pose(v, f), old.canonical_pose(v, f)):
        changed.append(path.stem)
shares.sort()
print(f"# rule 1: {len(meshes)} meshes, poses changed: {len(changed)} {changed}; lowest vector area share "
      f"{shares[0][0]:.3f} ({shares[0][1]}), then {shares[1][0]:.3f} ({shares[1][1]})")
v, f = dense_scan()
times = {name: best_seconds(lambda: pose(v, f)) for name, pose in (("ad519d7", old.canonical_pose), ("now", canonical_pose))}
print(f"# rule 3: the pose of the 201k-vertex scan, best of 3: ad519d7 {times['ad519d7']:.3f} s, now {times['now']:.3f} s")
if "--poses-only" in sys.argv:
    raise SystemExit
from pointmamba.data.teeth3ds import read_labels  # noqa: E402
from pointmamba.inference.segmenter import Segmenter  # noqa: E402

segmenter = Segmenter()
scans = [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]
rows = []
for path in scans:
    v, f = read_obj(path)[:2]
    reference = read_labels(path.with_suffix(".json"), len(v)).labels
    jaw = "upper" if "upper" in path.stem else "lower"
    row = {}
    for name, (vv, ff) in (("as_is", (v, f)), ("filled", with_fan(v, f))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = segmenter((vv, ff), jaw=jaw, name=path.stem, units="mm")
        row[name] = probe_miou(result.labels[:len(v)], reference, jaw)
    rows.append(row)
    print(f"{path.stem} as is {row['as_is']:.4f} filled {row['filled']:.4f}", flush=True)
mean = {k: float(np.mean([r[k] for r in rows])) for k in ("as_is", "filled")}
print(f"# rule 2: {len(rows)} scans, as is {mean['as_is']:.4f}, filled {mean['filled']:.4f}, more than 0.05 below "
      f"as is: {sum(r['filled'] < r['as_is'] - 0.05 for r in rows)}, the largest fall "
      f"{min(r['filled'] - r['as_is'] for r in rows):+.4f}")
