"""The same scan saved as binary STL and read back, as a user converting formats does: the 29 probe scans of
../model_base. STL stores each triangle's corners as float32 and no shared vertices; reading welds equal corners
in the order they first appear, so the vertices come back rounded to float32 and in another order. Each vertex is
matched back to its original (nearest point) to score against the reference; per-scan mIoU, as it is and after
the round trip.

    python docs/results/export_variants/stl_round_trip.py > docs/results/export_variants/stl_round_trip.txt
"""
import tempfile
import warnings
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba.data.mesh import read_stl, write_stl  # noqa: E402
from pointmamba.inference.segmenter import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import probe_meshes, probe_miou  # noqa: E402

segmenter = Segmenter()
rows = []
with tempfile.TemporaryDirectory() as folder:
    for path, v, f, labels, jaw in probe_meshes():
        stl = write_stl(Path(folder) / f"{path.stem}.stl", v, f)
        sv, sf = read_stl(stl)
        distance, original = cKDTree(v).query(sv)
        scores = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for mesh, ref in (((v, f), labels), ((sv, sf), labels[original])):
                result = segmenter(mesh, jaw=jaw, name=path.stem, units="mm")
                scores.append(probe_miou(result.labels, ref, jaw))
        rows.append((path.stem, *scores, len(sv) == len(v), float(distance.max())))
        print(f"{path.stem}: as it is {scores[0]:.4f}, through STL {scores[1]:.4f} ({scores[1] - scores[0]:+.4f}); "
              f"vertices {len(sv)} of {len(v)}, farthest from its original {distance.max():.1e} mm", flush=True)
d = np.array([r[2] - r[1] for r in rows])
print(f"# {len(rows)} scans: mean {np.mean([r[1] for r in rows]):.4f} as it is, {np.mean([r[2] for r in rows]):.4f} "
      f"through STL; change {d.min():+.4f} to {d.max():+.4f}, mean |change| {np.abs(d).mean():.4f}, more than 0.01: "
      f"{int((np.abs(d) > 0.01).sum())}, more than 0.05: {int((np.abs(d) > 0.05).sum())}")
