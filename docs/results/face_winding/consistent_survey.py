"""Pre-registration 4 of docs/results/face_winding, rules 3 (the meshes as they are) and 4 (the cost): for each of the
190 meshes (187 shared, 3 samples) the edges whose two faces run them the same way and the faces
``inconsistent_faces`` reverses; then its time on the 201k bench scan as it is (one face of MLEX001_upper wound
against its neighbours, subdivided into 4) and with that face mended (no edge disagrees).

    python docs/results/face_winding/consistent_survey.py > docs/results/face_winding/consistent_survey.txt
"""
from pathlib import Path

import numpy as np

from pointmamba.data.face_winding import _disagreeing_edges, inconsistent_faces
from pointmamba.data.mesh import read_obj
from pointmamba.research.model_base_check import SHARED, best_seconds, dense_scan, probe_miou

ROOT = Path(__file__).resolve().parents[3]
meshes = sorted(SHARED.glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj"))
affected = []
for path in meshes:
    v, f = read_obj(path)[:2]
    edges = _disagreeing_edges(f, len(v))
    if edges:
        flip = inconsistent_faces(v, f)
        affected.append(path.stem)
        print(f"{path.stem}: {edges} disagreeing edges, {int(flip.sum())} of {len(f)} faces reversed")
print(f"# rule 3: {len(meshes)} meshes, {len(affected)} with a disagreeing edge: {' '.join(affected) or '-'}")

v, f = dense_scan()
flip = inconsistent_faces(v, f)
mended = f.copy()
mended[flip] = mended[flip][:, ::-1]
print(f"# rule 4: 201k bench scan, {_disagreeing_edges(f, len(v))} disagreeing edges, {int(flip.sum())} faces reversed: "
      f"{best_seconds(lambda: inconsistent_faces(v, f)):.3f} s; mended (none disagrees): "
      f"{best_seconds(lambda: inconsistent_faces(v, mended)):.3f} s (best of 3)")

# the three meshes with a disagreeing edge, segmented with the switch off and on (the shipped pair, in-sample)
import warnings  # noqa: E402

from pointmamba import Segmenter  # noqa: E402
from pointmamba.data.teeth3ds import read_labels  # noqa: E402

segmenters = {on: Segmenter(infer={"consistent_winding": on}) for on in (False, True)}
for path in [p for p in meshes if p.stem in affected]:
    v, f = read_obj(path)[:2]
    labels = read_labels(path.with_suffix(".json"), len(v)).labels
    jaw = "upper" if "upper" in path.stem else "lower"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {on: s((v, f), jaw=jaw, name=path.stem, units="mm") for on, s in segmenters.items()}
    scores = {on: probe_miou(r.labels, labels, jaw) for on, r in results.items()}
    print(f"{path.stem}: off {scores[False]:.4f}, on {scores[True]:.4f}; vertices labelled differently "
          f"{int((results[False].labels != results[True].labels).sum())} of {len(v)}")
