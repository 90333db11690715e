"""Floating fragments beside the arch (a raw scan's bits of cheek or tongue): does the shipped model segment the
scan as it is? Each of the 29 probe scans of ../model_base gets a copy of one of its own patches, moved off the arch
(towards the arch's centre, 6 mm down, turned 30 degrees) as a separate part: a patch of gingiva of 3 % and of 8 %
of its vertices, and a whole tooth. Per-scan mIoU on the scan's own vertices against its reference, the share of
the fragment's vertices called tooth, and the review flag.

    python docs/results/export_variants/debris.py > docs/results/export_variants/debris.txt
"""
import warnings

import numpy as np

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()
from pointmamba.data.mesh import apply_transform, mesh_edges, read_obj
from pointmamba.data.teeth3ds import read_labels
from pointmamba.data.pose import canonical_pose
from pointmamba.inference.segmenter import Segmenter
from pointmamba.research.model_base_check import DEFAULT_PATIENTS, SHARED, probe_miou
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

def debris(v, f, labels, share, kind, rng):
    """a copy of a patch of the scan (gingiva or a tooth), moved off the arch: a floating part."""
    T = canonical_pose(v, f, labels); a = apply_transform(v, T)
    pool = np.flatnonzero(labels == 0) if kind == "gum" else np.flatnonzero(labels == rng.choice([t for t in np.unique(labels) if t > 0]))
    seed = rng.choice(pool)
    e = mesh_edges(f, len(v)); adj = csr_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(len(v), len(v))); adj = adj + adj.T
    order = breadth_first_order(adj, seed, directed=False, return_predecessors=False)
    k = int(share * len(v)) if kind == "gum" else len(pool)
    keep = order[:k] if kind == "gum" else pool
    sel = np.zeros(len(v), bool); sel[keep] = True
    ff = f[sel[f].all(1)]
    local = np.full(len(v), -1); local[keep] = np.arange(len(keep))
    pts = a[keep].copy()
    # moved off the arch: lingually towards the arch's centre and down by 6 mm, turned 30 degrees
    c = pts.mean(0); th = np.radians(30); R = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
    pts = (pts - c) @ R.T + c * np.array([0.3, 0.3, 1.0]) + [0, 0, -6.0]
    back = np.linalg.inv(T); pts = pts @ back[:3, :3].T + back[:3, 3]
    return np.vstack([v, pts]), np.vstack([f, local[ff] + len(v)])


def main() -> None:
    seg = Segmenter()
    rng = np.random.default_rng(0)
    scans = [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]
    rows = []
    def miou(res, n, lab, jaw):
        return probe_miou(res.labels[:n], lab, jaw)
    for p in scans:
        v, f = read_obj(p)[:2]; v = v.astype(float)
        lab = read_labels(p.with_suffix(".json"), len(v)).labels
        jaw = "upper" if "upper" in p.stem else "lower"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = seg((v, f), jaw=jaw, name=p.stem, units="mm")
            row = {"as_is": miou(base, len(v), lab, jaw)}
            out = [p.stem, f"as is {row['as_is']:.3f}"]
            for kind, share in (("gum", 0.03), ("gum", 0.08), ("tooth", 0)):
                dv, df = debris(v, f, lab, share, kind, rng)
                r = seg((dv, df), jaw=jaw, name=p.stem, units="mm")
                extra = r.labels[len(v):]
                name = f"{kind} {share:.0%}" if kind == "gum" else "tooth"
                row[name], row[name + " tooth"] = miou(r, len(v), lab, jaw), float(np.mean(extra > 0))
                out.append(f"{name}: {row[name]:.3f} (fragment {len(dv) - len(v)} vertices, called tooth "
                           f"{row[name + ' tooth']:.2f}, review {r.review}, as is {base.review})")
        rows.append(row)
        print(" | ".join(out), flush=True)
    for name in ("gum 3%", "gum 8%", "tooth"):
        d = np.array([r[name] - r["as_is"] for r in rows])
        print(f"# {name}: mean {np.mean([r[name] for r in rows]):.4f} against {np.mean([r['as_is'] for r in rows]):.4f} "
              f"as is; change {d.min():+.4f} to {d.max():+.4f}; fragment vertices called tooth at most "
              f"{max(r[name + ' tooth'] for r in rows):.2f}")


if __name__ == "__main__":
    main()
