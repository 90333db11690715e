"""Two replayed numberings of one cached scan side by side (occlusal view, reference above):
class prior off (0) and on (0.5). Usage: python picture.py CACHE_DIR NAME OUT.png"""
import json
import sys

import numpy as np

from pointmamba.data import class_colors, fdi_to_class
from pointmamba.data.fdi import class_to_fdi
from pointmamba.inference.pipeline import refine_either_jaw
from pointmamba.inference.render import render_segmentation, side_by_side

cache, name, out = sys.argv[1:4]
d = np.load(f"{cache}/{name}.npz")
jaw, colors = str(d["jaw"]), class_colors(17)
ref = d["labels"]
panels = []
for power in (0.0, 0.5):
    options = {**json.loads(str(d["options"])), "numbering_class_prior": power}
    labels, _, _ = refine_either_jaw(d["probs"], d["aligned"], d["faces"], d["normals"], jaw, 17, options, cut=d["cut"])
    path = render_segmentation(f"/tmp/class_prior_{power}.png", d["aligned"], d["faces"], class_to_fdi(labels, jaw),
                               colors, labels, f"{name.replace('__without_', ' without ')}, numbering_class_prior {power}",
                               reference_fdi=ref, reference_classes=fdi_to_class(ref, jaw, 17), views=("occlusal",))
    panels.append(path)
side_by_side(panels, out)
