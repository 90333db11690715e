"""Pre-registration 3 of docs/results/face_winding, rules 1-5: the enclosed volume of every mesh as it is, of the
densest variants, of the synthetic jaws, of the 29 probe scans reversed and on their base, and the check's time.
(Pre-registration 2's crown side was measured by this script's first version, with the signed bend beside it:
crown_side_candidate1.txt.)

    python docs/results/face_winding/winding_cue.py > docs/results/face_winding/enclosed.txt
"""
from pathlib import Path

import numpy as np

from pointmamba.data.face_winding import enclosed, inside_out
from pointmamba.data.mesh import read_obj, subdivide
from pointmamba.data.synthetic import synthetic_jaw
from pointmamba.data.teeth3ds import read_labels
from pointmamba.research.model_base_check import DEFAULT_PATIENTS, SHARED, best_seconds, dense_scan, with_model_base

ROOT = Path(__file__).resolve().parents[3]
meshes = sorted(SHARED.glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj"))
cues, read = {}, {}
for path in meshes:
    v, f = read_obj(path)[:2]
    name = str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else path.name
    cues[name], read[name] = enclosed(v, f), path
    print(f"{name} {cues[name]:.4f}")
low = sorted(cues, key=cues.get)
print(f"# rule 1: {len(cues)} meshes, reversed: {sum(inside_out(*read_obj(read[n])[:2]) for n in low[:5])} of the 5 "
      f"lowest, below -0.02: {sum(c < -0.02 for c in cues.values())}, lowest {cues[low[0]]:.4f} ({low[0]})")

print("# rule 2: 16x the vertices (subdivided twice)")
lowest_bend = [n for n in cues if any(k in n for k in ("IOS096_upper", "MLEX001_upper", "MSN002_lower"))]
for name in lowest_bend + low[:3]:
    v, f = read_obj(read[name])[:2]
    v4, f4 = subdivide(*subdivide(v, f)[:2])[:2]
    dense = enclosed(v4, f4)
    print(f"{name}: 1x {cues[name]:.4f}, 16x {dense:.4f}, change {dense - cues[name]:+.4f}")

print("# rule 3: synthetic jaws, seeds 0-49, both jaws, 6,000 and 20,000 vertices")
synth = []
for n_vertices in (6000, 20000):
    for jaw in ("upper", "lower"):
        for seed in range(50):
            scan = synthetic_jaw(seed, jaw, n_vertices)
            synth.append((enclosed(scan.vertices, scan.faces), f"{jaw} seed {seed} {n_vertices}"))
synth.sort()
print(f"{len(synth)} jaws, reversed {sum(c < -0.02 for c, _ in synth)}, lowest {synth[0][0]:.4f} ({synth[0][1]}), "
      f"highest {synth[-1][0]:.4f}")

print("# rule 4: the 29 probe scans reversed, on their base, on their base reversed")
probe = [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]
counts = {"reversed": 0, "based, as is: not reversed": 0, "based, reversed": 0}
lowest = {k: 1.0 for k in counts}
for path in probe:
    v, f = read_obj(path)[:2]
    labels = read_labels(path.with_suffix(".json"), len(v)).labels
    bv, bf, _ = with_model_base(v, f, labels)
    rev, based, based_rev = -enclosed(v, f[:, ::-1]), enclosed(bv, bf), -enclosed(bv, bf[:, ::-1])
    counts["reversed"] += inside_out(v, f[:, ::-1])
    counts["based, as is: not reversed"] += not inside_out(bv, bf)
    counts["based, reversed"] += inside_out(bv, bf[:, ::-1])
    for k, c in zip(counts, (rev, based, based_rev)):
        lowest[k] = min(lowest[k], c)
    print(f"{path.stem}: reversed {-rev:.4f}, based {based:.4f}, based reversed {-based_rev:.4f}")
print(f"{len(probe)} scans: " + ", ".join(f"{k} {n} (margin {lowest[k]:.4f})" for k, n in counts.items()))

print("# rule 5: time on the 201k-vertex scan")
v, f = dense_scan()
print(f"{len(v)} vertices, {len(f)} faces: best of 3 {best_seconds(lambda: inside_out(v, f)):.3f} s")
