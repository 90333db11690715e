"""A mesh wound inconsistently: part of its faces one way, the rest the other (a mesh merged from parts, or edited).
The 29 probe scans of ../model_base as they are and with the faces of one region reversed: the half of the scan on
one side of the plane through its centroid across its longest axis (one side of the arch), a ball of 15 % of
the faces about a vertex drawn at random, and each face at random (p = 0.5, a triangle soup's winding). Per-scan
mIoU, the shipped pair, default inference, or with ``infer.consistent_winding`` on (``on``).

    python docs/results/export_variants/mixed_winding.py > docs/results/export_variants/mixed_winding_before.txt
    python docs/results/export_variants/mixed_winding.py on > docs/results/face_winding/consistent_winding.txt
"""
import sys
import warnings

import numpy as np

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba.inference.segmenter import Segmenter  # noqa: E402
from pointmamba.research.model_base_check import probe_meshes, probe_miou  # noqa: E402


def half(v: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The faces whose centroid lies on the positive side of the plane across the longest axis."""
    c = v - v.mean(0)
    axis = np.linalg.eigh(c.T @ c)[1][:, 2]
    return (c[f].mean(1) @ axis) > 0


def ball(v: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The 15 % of the faces nearest a vertex drawn at random."""
    centre = v[rng.integers(len(v))]
    d = ((v[f].mean(1) - centre) ** 2).sum(1)
    return d <= np.quantile(d, 0.15)


def soup(v: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each face with probability 1/2."""
    return rng.random(len(f)) < 0.5


REGIONS = {"half": half, "ball": ball, "soup": soup}


def main(on: bool) -> None:
    segmenter = Segmenter(infer={"consistent_winding": True}) if on else Segmenter()
    rng = np.random.default_rng(0)
    totals = {k: [] for k in ["as is", *REGIONS]}
    for path, v, f, labels, jaw in probe_meshes():
        row = []
        for name in totals:
            faces = f.copy()
            if name != "as is":
                flip = REGIONS[name](v, f, rng)
                faces[flip] = faces[flip][:, ::-1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = segmenter((v, faces), jaw=jaw, name=path.stem, units="mm")
            score = probe_miou(result.labels, labels, jaw)
            totals[name].append(score)
            rewound = result.meta.get("faces_rewound", 0)
            row.append(f"{name} {score:.4f}{' flagged' if result.confidence.review else ''}"
                       + (f" ({rewound} rewound)" if rewound else ""))
        print(path.stem, " | ".join(row), flush=True)
    print("mean: " + ", ".join(f"{k} {np.mean(s):.4f} (min {np.min(s):.4f})" for k, s in totals.items()))


if __name__ == "__main__":
    main(sys.argv[1:] == ["on"])
