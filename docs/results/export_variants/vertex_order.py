"""The same mesh in another vertex order: the 29 probe scans of ../model_base in their file order and in two
shuffled orders (seeds 1 and 2; the faces and the reference follow the vertices), segmented as tools/predict.py does
(the shipped model, the jaw given). Per-scan mIoU per order, the pose's turn between the orders, and whether every
vertex's label is the same.

    python docs/results/export_variants/vertex_order.py > docs/results/export_variants/vertex_order.txt
"""
import warnings

import numpy as np

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba.data.pose import canonical_pose  # noqa: E402
from pointmamba.inference.segmenter import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import probe_meshes, probe_miou  # noqa: E402

segmenter = Segmenter()
rows = []
for path, v, f, labels, jaw in probe_meshes():
    scores, turns, same = [], [], []
    for seed in (0, 1, 2):
        order = np.arange(len(v)) if seed == 0 else np.random.default_rng(seed).permutation(len(v))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(v))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = segmenter((v[order], rank[f]), jaw=jaw, name=path.stem)
        scores.append(probe_miou(result.labels, labels[order], jaw))
        if seed == 0:
            first_labels, first_pose = result.labels, canonical_pose(v, f)
        else:
            same.append(bool(np.array_equal(result.labels[rank], first_labels)))
            turn = first_pose[:3, :3] @ canonical_pose(v[order], rank[f])[:3, :3].T
            turns.append(float(np.degrees(np.arccos(np.clip((np.trace(turn) - 1) / 2, -1, 1)))))
    rows.append((path.stem, scores, turns, same))
    print(f"{path.stem}: file order {scores[0]:.4f}, shuffled {scores[1]:.4f}, {scores[2]:.4f}; pose turned "
          f"{turns[0]:.3f}, {turns[1]:.3f} deg; every label the same: {same}", flush=True)
change = np.array([[s - r[1][0] for s in r[1][1:]] for r in rows])
print(f"# {len(rows)} scans x 2 orders: mIoU change {change.min():+.4f} to {change.max():+.4f}, different at the "
      f"fourth digit: {int((np.abs(change) >= 5e-5).sum())} of {change.size}; every label the same: "
      f"{sum(all(r[3]) for r in rows)} scans; the largest turn of the pose {max(max(r[2]) for r in rows):.3f} deg")
