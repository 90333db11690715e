"""The picture of pre-registration 4: the sample MSN022_upper with the faces of one side of the arch reversed (the
side of smaller area), segmented by the shipped pair without and with ``infer.consistent_winding``; each panel the
reference above, the prediction below, wrong vertices black.

    python docs/results/face_winding/half_reversed_picture.py     # -> docs/results/face_winding/half_reversed.png
"""
import tempfile
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from pointmamba import Segmenter
from pointmamba.data.mesh import read_obj

ROOT = Path(__file__).resolve().parents[3]
mesh = ROOT / "data" / "samples" / "MSN022" / "MSN022_upper.obj"
v, f = read_obj(mesh)[:2]
centre = v[f].mean(1) - v.mean(0)
half = centre @ np.linalg.eigh(np.cov((v - v.mean(0)).T))[1][:, 2] > 0
area = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
smaller = half if area[half].sum() < area[~half].sum() else ~half
mixed = f.copy()
mixed[smaller] = mixed[smaller][:, ::-1]
panels = []
with tempfile.TemporaryDirectory() as tmp:
    for on in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = Segmenter(infer={"consistent_winding": on})((v, mixed), jaw="upper",
                                                                 name=f"half reversed, consistent_winding {on}")
        panels.append(Image.open(result.save_png(Path(tmp) / f"{on}.png", reference=mesh.with_suffix(".json"))))
        panels[-1].load()
width = sum(p.width for p in panels)
picture = Image.new("RGB", (width, max(p.height for p in panels)), "white")
x = 0
for p in panels:
    picture.paste(p, (x, 0))
    x += p.width
picture.save(Path(__file__).with_name("half_reversed.png"), optimize=True)
