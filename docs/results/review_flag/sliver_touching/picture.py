"""One cached scan numbered with the unnumbered mend's two guards off (session 69) and on (session 70), side by side
(occlusal view, reference above; the shipped model's in-sample cache). Usage:
python picture.py CACHE_DIR NAME OUT.png  (MSN016_upper: the area floor; IOS035_upper: the touching rule, drawn after
the overwrite fix of the same session, ../overwrite/)"""
import sys
import tempfile
from pathlib import Path

import numpy as np

from pointmamba.data import class_colors, fdi_to_class
from pointmamba.inference.render import render_segmentation, side_by_side
from pointmamba.research.numbering_replay import replay_file

cache, name, out = sys.argv[1:4]
panels = []
with tempfile.TemporaryDirectory() as tmp:
    for title, overrides in (("guards off", {"mend_unnumbered_area": 0.0, "mend_unnumbered_touching": False}),
                             ("guards on", {})):
        r = replay_file(Path(cache) / f"{name}.npz", overrides, review=True)
        d = np.load(Path(cache) / f"{name}.npz")
        classes = fdi_to_class(r.fdi, r.jaw, 17)
        panels.append(render_segmentation(Path(tmp) / f"{len(panels)}.png", d["aligned"], d["faces"], r.fdi,
                                          class_colors(17), classes, f"{name}, {title}",
                                          reference_fdi=r.reference, reference_classes=fdi_to_class(r.reference, r.jaw, 17),
                                          views=("occlusal",)))
    side_by_side(panels, out)
