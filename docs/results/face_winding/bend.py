"""Rules 1 and 3 of docs/results/face_winding's first pre-registration: every mesh's signed bend as it is (one line
per mesh), the lowest, and the check's time on the 201k-vertex scan (MLEX001_upper subdivided once, as
bench/predict.py makes it). The signed bend was the first cue of ``infer.orient_faces``; it is defined here since
the enclosed volume replaced it (session 67): over the edges of at most 20,000 faces taken evenly through the file,
``(n_b - n_a) . (x_b - x_a)`` with vertex normals ``n``, summed and divided by the sum of its magnitudes.

    python docs/results/face_winding/bend.py > docs/results/face_winding/bend.txt
"""
from pathlib import Path

import numpy as np

from pointmamba.data.mesh import read_obj, vertex_normals
from pointmamba.research.model_base_check import best_seconds, dense_scan


def signed_bend(vertices: np.ndarray, faces: np.ndarray, sampled_faces: int = 20_000) -> float:
    """The mesh's signed bend in [-1, 1] (module doc); 0 for a flat mesh or one without faces."""
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return 0.0
    points = np.asarray(vertices, dtype=np.float64)
    normals = vertex_normals(points, faces)
    some = faces[::max(1, len(faces) // sampled_faces)]
    a, b = some.T.reshape(-1), some[:, [1, 2, 0]].T.reshape(-1)
    bend = ((normals[b] - normals[a]) * (points[b] - points[a])).sum(1)
    total = float(np.abs(bend).sum())
    return float(bend.sum()) / total if total > 0 else 0.0


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
v, f = dense_scan()
print(f"# {len(v)} vertices, {len(f)} faces: best of 3 {best_seconds(lambda: signed_bend(v, f)):.3f} s")
