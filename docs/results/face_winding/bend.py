"""Rules 1 and 3 of docs/results/face_winding: every mesh's signed bend as it is (one line per mesh), the lowest,
and the check's time on the 201k-vertex scan (MLEX001_upper subdivided once, as bench/predict.py makes it).

    python docs/results/face_winding/bend.py > docs/results/face_winding/bend.txt
"""
import time
from pathlib import Path

from pointmamba.data.face_winding import signed_bend
from pointmamba.data.mesh import read_obj, subdivide

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
meshes = sorted(SHARED.glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj"))
bends = {}
for path in meshes:
    v, f = read_obj(path)[:2]
    name = str(path.relative_to(ROOT.parent))
    bends[name] = signed_bend(v, f)
    print(f"{name} {bends[name]:.4f}")
low = min(bends, key=bends.get)
print(f"# {len(bends)} meshes, negative (reversed): {sum(b < 0 for b in bends.values())}, lowest {bends[low]:.4f} ({low})")
v, f = read_obj(SHARED / "scans" / "MLEX001" / "MLEX001_upper.obj")[:2]
v, f = subdivide(v, f)[:2]
times = []
for _ in range(3):
    t0 = time.perf_counter()
    signed_bend(v, f)
    times.append(time.perf_counter() - t0)
print(f"# {len(v)} vertices, {len(f)} faces: best of 3 {min(times):.3f} s")
