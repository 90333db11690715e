"""Time the graph cut of the 201k-vertex scan (MLEX001_upper subdivided once) with the tooth pair cost 1 and 2,
interleaved, three times each, and its two alpha-expansions; then the numbering on each cut. Run in the repository
root: python docs/results/gum_between_teeth/cut_speed.py"""
import sys, time, torch, numpy as np, tempfile
from pathlib import Path
torch.set_num_threads(2)
from pointmamba.inference.segmenter import Segmenter
from pointmamba.inference.pipeline import scan_probabilities, _cut, refine_either_jaw
from pointmamba.data.scan import load_scan
from pointmamba.data.mesh import read_obj, subdivide, write_obj
import pointmamba.inference.graph_cut as gc
import pointmamba.inference.expansion as ex
v, f = read_obj("../shared/data/scans/MLEX001/MLEX001_upper.obj")[:2]
tmp = Path(tempfile.mkdtemp()) / "x_upper.obj"
write_obj(tmp, *subdivide(v, f)[:2])
seg = Segmenter(device="cpu")
scan = load_scan(tmp, labels=False)
options, probs, aligned, normals = scan_probabilities(seg.model, scan, seg.config, seg.device)
timers = {}
def wrap(mod, name):
    orig = getattr(mod, name)
    def w(*a, **k):
        t = time.perf_counter(); r = orig(*a, **k); timers[name] = timers.get(name, 0) + time.perf_counter() - t; return r
    setattr(mod, name, w)
wrap(gc, "_expansion"); wrap(ex, "restricted_expansion")
for rep in range(3):
    for k in (1, 2):
        timers.clear()
        o = {**options, "graph_cut_tooth_pair_cost": k}
        t = time.perf_counter(); cut = _cut(probs, aligned, scan.faces, normals, o, lambda s: None); tc = time.perf_counter() - t
        t = time.perf_counter(); refine_either_jaw(probs, aligned, scan.faces, normals, "upper", 17, o, cut=cut); tn = time.perf_counter() - t
        print(rep, k, f"cut {tc:.2f} s ({', '.join(f'{a} {b:.2f}' for a, b in timers.items())}), numbering {tn:.2f} s", flush=True)
