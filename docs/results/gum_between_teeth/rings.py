"""Where do the two sources' references put the tooth-gingiva boundary, and what does it cost each source?

    python docs/results/gum_between_teeth/rings.py work_dirs/replay/A work_dirs/replay/B --out DIR [--tooth-pair-cost 1]

Reads the numbering replay caches (``pointmamba.research.numbering_replay cache``: the held-out pair's
probabilities, the graph cut and the reference of every val scan), cuts and numbers each scan with
``infer.graph_cut_tooth_pair_cost`` as given (1, the Potts cut, by default: the figures read before the switch)
and the default inference otherwise, and writes
DIR/rings.csv (one row per scan), DIR/summary.md (per split and source) and DIR/boundary.png (an error map of
one scan of each source). Per scan:
- ``ring_tooth``: share of the reference's first gingiva ring (gingiva vertices touching a reference tooth
  vertex) predicted tooth; ``edge_gum``: share of the reference's tooth vertices touching gingiva predicted
  gingiva;
- ``crease_gum`` / ``crease_tooth``: mean concavity (the normal component of the neighbours' mean offset,
  in mean edge lengths; > 0 concave) of the reference's first gingiva ring and of its tooth edge: where the
  reference puts the crease at the gum line;
- ``miou``: as tools/test.py scores it; ``miou_ring_gum``: the same prediction with the reference's first
  gingiva ring set to gingiva (how much that one ring costs);
- ``miou_eroded_<t>``: the prediction with its tooth edge vertices more concave than ``t`` set to gingiva
  (a geometric rule that would move the boundary off the crease).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pointmamba.data import fdi_to_class
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file

ERODE = (0.3, 0.15, 0.05)
PICTURE = ("MSN022_lower", "IOS024_lower")  # split A val scans, one of each source, no lone premolar


def adjacency(faces: np.ndarray, n: int) -> sp.csr_matrix:
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    a = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    return ((a + a.T) > 0).astype(np.float64).tocsr()


def concavity(aligned: np.ndarray, normals: np.ndarray, a: sp.csr_matrix, faces: np.ndarray) -> np.ndarray:
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]]])
    mean_edge = np.linalg.norm(aligned[e[:, 0]] - aligned[e[:, 1]], axis=1).mean()
    offset = (a @ aligned) / np.asarray(a.sum(1)) - aligned
    return np.einsum("ij,ij->i", offset, normals) / mean_edge


def scan_row(path: Path, pair_cost: int) -> tuple[dict, dict]:
    r = replay_file(path, {"graph_cut_tooth_pair_cost": pair_cost})
    with np.load(path) as d:
        aligned, normals, faces = d["aligned"], d["normals"], d["faces"]
    ref, fdi, jaw = r.reference, r.fdi, r.jaw
    a = adjacency(faces, len(ref))
    near = lambda mask: (a @ mask.astype(np.float64)) > 0  # noqa: E731
    ring = (ref == 0) & near(ref > 0)
    edge = (ref > 0) & near(ref == 0)
    conc = concavity(aligned, normals, a, faces)

    def miou(pred: np.ndarray) -> float:
        return ConfusionMatrix(17).update(fdi_to_class(pred, jaw, 17), fdi_to_class(ref, jaw, 17)).miou()

    ring_gum = fdi.copy()
    ring_gum[ring] = 0
    row = {"name": path.stem, "source": "MSN" if path.stem.startswith("MSN") else "3D-IOSSeg", "vertices": len(ref),
           "pred_over_ref_teeth": (fdi > 0).sum() / (ref > 0).sum(), "ring_tooth": (fdi[ring] > 0).mean(),
           "edge_gum": (fdi[edge] == 0).mean(), "crease_gum": conc[ring].mean(), "crease_tooth": conc[edge].mean(),
           "miou": miou(fdi), "miou_ring_gum": miou(ring_gum)}
    pred_edge = (fdi > 0) & near(fdi == 0)
    for t in ERODE:
        eroded = fdi.copy()
        eroded[pred_edge & (conc > t)] = 0
        row[f"miou_eroded_{t}"] = miou(eroded)
    error = np.where(fdi > 0, 1, 0)  # 0 gingiva, 1 tooth, both right; 2 tooth over gingiva; 3 gingiva over tooth
    error[(fdi > 0) & (ref == 0)] = 2
    error[(fdi == 0) & (ref > 0)] = 3
    return row, {"aligned": aligned, "faces": faces, "error": error, "jaw": jaw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("caches", nargs="+", help="numbering replay caches, one per split")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tooth-pair-cost", type=int, default=1, choices=(1, 2))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, meshes = [], {}
    for cache in args.caches:
        for path in sorted(Path(cache).glob("*.npz")):
            if REMOVAL_MARK in path.stem:
                continue
            row, mesh = scan_row(path, args.tooth_pair_cost)
            rows.append({"split": Path(cache).name, **row})
            if path.stem in PICTURE and path.stem not in meshes:
                meshes[path.stem] = mesh
    keys = [k for k in rows[0] if k not in ("split", "name", "source")]
    with open(out / "rings.csv", "w") as f:
        f.write(",".join(rows[0]) + "\n")
        for r in rows:
            f.write(",".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r.values()) + "\n")
    groups = defaultdict(list)
    for r in rows:
        groups[(r["split"], r["source"])].append([r[k] for k in keys])
    lines = ["| split | source | scans | " + " | ".join(keys) + " |", "|---|---|---|" + "---|" * len(keys)]
    for (split, source), v in sorted(groups.items()):
        m = np.mean(np.array(v, dtype=np.float64), 0)
        lines.append(f"| {split} | {source} | {len(v)} | " + " | ".join(f"{x:.3f}" if abs(x) < 100 else f"{x:.0f}"
                                                                         for x in m) + " |")
    (out / "summary.md").write_text(f"infer.graph_cut_tooth_pair_cost {args.tooth_pair_cost}. Means per split and "
                                    "source (rings.py's docstring defines each column).\n\n"
                                    + "\n".join(lines) + "\n")
    print("\n".join(lines))
    if meshes:
        picture(meshes, out / "boundary.png")


def picture(meshes: dict, path: Path) -> None:
    from pointmamba.inference.render import render_segmentation, side_by_side

    colors = np.array([[200, 190, 180], [245, 245, 245], [220, 30, 30], [30, 80, 220]], dtype=np.uint8)
    panels = []
    for name, m in meshes.items():
        share = (m["error"] >= 2).mean()
        panels.append(render_segmentation(path.with_name(f"{name}.png"), m["aligned"], m["faces"],
                                          np.zeros(len(m["error"]), int), colors, m["error"],
                                          f"{name}: red tooth over gum, blue gum over tooth ({share:.1%})",
                                          views=("occlusal",)))
    side_by_side(panels, path)
    for p in panels:
        p.unlink()


if __name__ == "__main__":
    main()
