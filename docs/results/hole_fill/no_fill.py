"""Rules 1 and 3 of docs/results/hole_fill: no fill on the 190 meshes as they are (one line per mesh: its largest face
over its median), and the check's time on the 201k-vertex scan (MLEX001_upper subdivided once).

    python docs/results/hole_fill/no_fill.py > docs/results/hole_fill/no_fill.txt
"""
import time
from pathlib import Path

import numpy as np

from pointmamba.data.hole_fill import find_hole_fill
from pointmamba.data.mesh import face_normals, read_obj, subdivide

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
found, ratios = 0, {}
for path in sorted(SHARED.glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj")):
    v, f = read_obj(path)[:2]
    area = np.linalg.norm(face_normals(v.astype(np.float64), f), axis=1)
    name = str(path.relative_to(ROOT.parent))
    ratios[name] = float(area.max() / np.median(area))
    found += find_hole_fill(v, f) is not None
    print(f"{name} largest/median {ratios[name]:.1f}")
top = max(ratios, key=ratios.get)
print(f"# {len(ratios)} meshes, fills found: {found}, largest face {ratios[top]:.1f} x the median ({top})")
v, f = read_obj(SHARED / "scans" / "MLEX001" / "MLEX001_upper.obj")[:2]
v, f = subdivide(v, f)[:2]
times = []
for _ in range(3):
    t0 = time.perf_counter()
    find_hole_fill(v, f)
    times.append(time.perf_counter() - t0)
print(f"# {len(v)} vertices, {len(f)} faces: best of 3 {min(times):.3f} s")
