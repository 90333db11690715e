"""The same scan in another orientation: how much do its labels move? The 29 probe scans of ../model_base, each as
it is and turned by three fixed small rigid motions (1 degree about a random axis and 0.3 mm, 1 degree and 0.3 mm
again, 5 degrees and 2 mm), as a scanner's software might place it. The canonical pose is meant to undo any such
motion; what is left is what the pose's fit, the grid sampling and the network make of a frame that moved slightly.

    python docs/results/export_variants/turned.py > docs/results/export_variants/turned.txt
"""
import warnings

import numpy as np

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba.data.augment import rotation_about  # noqa: E402
from pointmamba.inference.segmenter import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import probe_meshes, probe_miou  # noqa: E402

rng = np.random.default_rng(0)
MOTIONS = []
for degrees, mm in ((1.0, 0.3), (1.0, 0.3), (5.0, 2.0)):
    axis = rng.normal(size=3)
    shift = rng.normal(size=3)
    MOTIONS.append((rotation_about(axis / np.linalg.norm(axis), np.radians(degrees)), shift / np.linalg.norm(shift) * mm,
                    f"{degrees:g} deg, {mm:g} mm"))

segmenter = Segmenter()
rows = []
for path, v, f, labels, jaw in probe_meshes():
    centre = v.mean(0)
    scores, teeth = [], []
    for rotation, shift, _ in [(np.eye(3), np.zeros(3), "as is")] + MOTIONS:
        moved = (v - centre) @ rotation.T + centre + shift
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = segmenter((moved, f), jaw=jaw, name=path.stem, units="mm")
        scores.append(probe_miou(result.labels, labels, jaw))
        teeth.append(result.teeth)
    rows.append((path.stem, scores, sum(t != teeth[0] for t in teeth[1:])))
    print(f"{path.stem}: as is {scores[0]:.4f}, turned " + ", ".join(f"{s:.4f}" for s in scores[1:])
          + f"; teeth numbered differently in {rows[-1][2]} of 3", flush=True)
change = np.array([[s - r[1][0] for s in r[1][1:]] for r in rows])
print(f"# {len(rows)} scans x 3 motions: change from as is {change.min():+.4f} to {change.max():+.4f}, mean |change| "
      f"{np.abs(change).mean():.4f}, more than 0.01 away {int((np.abs(change) > 0.01).sum())} of {change.size}, more "
      f"than 0.05 {int((np.abs(change) > 0.05).sum())}; per motion mean |change| "
      + ", ".join(f"{m[2]} {np.abs(change[:, k]).mean():.4f}" for k, m in enumerate(MOTIONS))
      + f"; scans whose set of teeth changed under some motion: {sum(r[2] > 0 for r in rows)}")
