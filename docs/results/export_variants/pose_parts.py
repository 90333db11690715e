"""The rule of this page's pre-registration (`infer.pose_parts`): the pose from the mesh's large parts.

    python docs/results/export_variants/pose_parts.py > docs/results/export_variants/pose_parts.txt

1. the 187 shared scans: the pose with the switch against without (bit for bit where the mesh is one part), and
   for the scans of more than one part the per-scan mIoU both ways (the shipped model, the jaw given);
2. the 87 fragment variants of debris.py (the same variants: the same generator, seed and order), with the switch,
   against their scans as they are; the review flags;
3. the part search's time on the 201k-vertex scan.
"""
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from debris import debris  # noqa: E402

from pointmamba.data.dataset import preprocess_scan  # noqa: E402
from pointmamba.data.integrity import part_sizes  # noqa: E402
from pointmamba.data.mesh import read_obj  # noqa: E402
from pointmamba.data.pose import large_parts  # noqa: E402
from pointmamba.data.scan import load_scan  # noqa: E402
from pointmamba.data.teeth3ds import read_labels  # noqa: E402
from pointmamba.inference.segmenter import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import SHARED, best_seconds, dense_scan, probe_meshes, probe_miou  # noqa: E402

segmenters = {on: Segmenter(infer={"pose_parts": on}) for on in (False, True)}


def miou(result, n: int, labels: np.ndarray, jaw: str) -> float:
    return probe_miou(result.labels[:n], labels, jaw)


def segment(on: bool, v: np.ndarray, f: np.ndarray, jaw: str, name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return segmenters[on]((v, f), jaw=jaw, name=name, units="mm")


print("# rule 1: the 187 shared scans")
same, moved, changes = 0, [], []
for path in sorted(SHARED.glob("*/*/*.obj")):
    scan = load_scan(path)
    off, on = preprocess_scan(scan)["transform"], preprocess_scan(scan, pose_parts=True)["transform"]
    if len(part_sizes(scan.num_vertices, scan.faces)) == 1:
        same += bool(np.array_equal(off, on))
        continue
    v, f = read_obj(path)[:2]
    labels = read_labels(path.with_suffix(".json"), len(v)).labels
    jaw = "upper" if "upper" in path.stem else "lower"
    a, b = (miou(segment(s, v, f, jaw, path.stem), len(v), labels, jaw) for s in (False, True))
    changes.append(b - a)
    print(f"{path.stem}: parts {len(part_sizes(len(v), f))}, off {a:.4f}, on {b:.4f}, change {b - a:+.4f}", flush=True)
print(f"# one part: {same} poses bit for bit the same; more than one part: {len(changes)} scans, change "
      f"{min(changes):+.4f} to {max(changes):+.4f}, more than 0.005 away: {sum(abs(c) > 0.005 for c in changes)}")

print("# rule 2: the 87 fragment variants, with the switch")
rng = np.random.default_rng(0)
rows = []
for path, v, f, labels, jaw in probe_meshes():
    plain = segment(True, v, f, jaw, path.stem)
    base = miou(plain, len(v), labels, jaw)
    for kind, share in (("gum", 0.03), ("gum", 0.08), ("tooth", 0)):
        dv, df = debris(v, f, labels, share, kind, rng)
        result = segment(True, dv, df, jaw, path.stem)
        rows.append((path.stem, kind, share, base, miou(result, len(v), labels, jaw), plain.review, result.review,
                     float(np.mean(result.labels[len(v):] > 0))))
        print(f"{path.stem} {kind} {share:.0%}: as is {base:.4f}, with the fragment {rows[-1][4]:.4f}, review "
              f"{plain.review} -> {result.review}", flush=True)
d = np.array([r[4] - r[3] for r in rows])
print(f"# {len(rows)} variants: change {d.min():+.4f} to {d.max():+.4f}, more than 0.01 away: {int((abs(d) > 0.01).sum())}, "
      f"flag as the scan's: {sum(r[5] == r[6] for r in rows)}, fragment called tooth at most {max(r[7] for r in rows):.2f}")

print("# rule 3: the part search on the 201k-vertex scan")
v, f = dense_scan()
print(f"{len(v)} vertices: best of 3 {best_seconds(lambda: large_parts(v, f)):.3f} s")
