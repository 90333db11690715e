"""A fill that is not flat: the 29 probe scans with the longest rim closed by a cone instead of a flat fan, its apex
raised off the rim's plane by 5 mm, out of the jaw (a bulging patch) and into it (a sunken one), as a watertight
export's smooth fill might be. Segmented as tools/predict.py does (the shipped pair, the jaw given), per-scan mIoU
on the scan's own vertices, against the scan as it is and the flat fan (``with_fan``, ../hole_fill).

    python docs/results/hole_fill/domed_fill.py > docs/results/hole_fill/domed_fill.txt
"""
import warnings

import numpy as np

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import boundary_loop, probe_meshes, probe_miou, with_fan  # noqa: E402

HEIGHT_MM = 5.0


def with_cone(vertices: np.ndarray, faces: np.ndarray, height: float) -> tuple[np.ndarray, np.ndarray]:
    """``with_fan``'s fill with its apex moved ``height`` mm along the rim plane's normal, away from the rest of the
    mesh (negative: towards it)."""
    v, f = with_fan(vertices, faces)
    loop = boundary_loop(faces)
    rim = v[loop] - v[loop].mean(0)
    normal = np.linalg.eigh(rim.T @ rim)[1][:, 0]
    if normal @ (v[loop].mean(0) - np.asarray(vertices).mean(0)) < 0:
        normal = -normal
    v[-1] = v[-1] + height * normal
    return v, f


segmenter = Segmenter()
scores = {k: [] for k in ("as is", "flat", "bulging", "sunken")}
for path, v, f, labels, jaw in probe_meshes():
    variants = {"as is": (v, f), "flat": with_fan(v, f), "bulging": with_cone(v, f, HEIGHT_MM),
                "sunken": with_cone(v, f, -HEIGHT_MM)}
    row = []
    for name, (vv, ff) in variants.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = segmenter((vv, ff), jaw=jaw, name=path.stem, units="mm")
        score = probe_miou(result.labels[:len(v)], labels, jaw)
        scores[name].append(score)
        row.append(f"{name} {score:.4f}{' flagged' if result.review else ''}")
    print(path.stem, " | ".join(row), flush=True)
base = np.array(scores["as is"])
for name, s in scores.items():
    fall = np.array(s) - base
    print(f"# {name}: mean {np.mean(s):.4f}, more than 0.05 below as is: {int((fall < -0.05).sum())}, "
          f"largest fall {fall.min():+.4f}")
