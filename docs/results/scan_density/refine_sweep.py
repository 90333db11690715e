#!/usr/bin/env python3
"""The refinement alone (graph cut and instance numbering) on the val scans at 4x and 16x their vertices:
the network's cached 1x probabilities (``--checkpoint`` fills the cache; earlier caches came from the
retired ``docs/results/tooth_shape/sweep.py --cache``, same format) carried to each new
vertex as the mean of its two parents, scored on the original vertices, for each
``infer.graph_cut_density_power`` (``--angles``, the retired ``infer.graph_cut_density_angles``, left with
its code: commit 2036c9e and before).

    python docs/results/scan_density/refine_sweep.py --config configs/shared_data_recipe.yaml \
        --cache work_dirs/cache/A2_s1 --powers 0 1 1.5 2 [--smooth-proxy] > OUT.jsonl

``--fine-cycles N ...`` adds, for each power, the fine pass of two stopped after N cycles
(``infer.graph_cut_fine_cycles``, issue 45). ``--checkpoint FILE`` computes a scan's probabilities where the
cache lacks them (mirror TTA, as ``tools/test.py``; the cache then holds them for the next run).

``--two-pass`` cuts a dense mesh on cells first (the default inference; with ``--old-candidates`` as
before the seventh rule: the tables of rules two to four); ``--smooth-proxy`` moves each new vertex 3 times halfway towards the mean of its neighbours after each
subdivision (the original vertices stay), so normals vary smoothly as on a real scan. Prints one JSON row
per scan, then mean / p10 / kept per column.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def smooth_new_vertices(points: np.ndarray, faces: np.ndarray, fixed: int, iterations: int = 3) -> np.ndarray:
    """``points`` with every vertex from ``fixed`` on moved ``iterations`` times halfway to its neighbours'
    mean."""
    from scipy.sparse import csr_matrix

    from pointmamba.data.mesh import mesh_edges

    e = mesh_edges(faces, len(points))
    n = len(points)
    adjacency = csr_matrix((np.ones(2 * len(e)), (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])), shape=(n, n))
    degree = np.asarray(adjacency.sum(1)).ravel()
    out = points.copy()
    for _ in range(iterations):
        mean = (adjacency @ out) / degree[:, None]
        out[fixed:] = 0.5 * out[fixed:] + 0.5 * mean[fixed:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--cache", required=True, help="folder of <scan>.npz (probs, transform) at 1x")
    parser.add_argument("--powers", nargs="+", type=float, default=[0.0, 2.0])
    parser.add_argument("--smooth-proxy", action="store_true")
    parser.add_argument("--two-pass", action="store_true",
                        help="graph_cut_coarse_first true (the default; without it: one cut of every vertex)")
    parser.add_argument("--old-candidates", action="store_true",
                        help="the fine pass's label candidates of before the seventh rule (2 cells, 1 nat)")
    parser.add_argument("--names", nargs="*", help="only these val scans (default: all)")
    parser.add_argument("--fine-cycles", nargs="*", type=int, default=[],
                        help="also each power with infer.graph_cut_fine_cycles = N")
    parser.add_argument("--checkpoint", help="fill the cache with this model's probabilities where missing")
    args = parser.parse_args()

    from pointmamba.config import load_config
    from pointmamba.data import fdi_to_class, load_scan
    from pointmamba.data.mesh import apply_transform, subdivide, vertex_normals
    from pointmamba.inference.pipeline import infer_options, refine
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, [])
    dataset = build_dataset(cfg, "val", train=False)
    options = {**infer_options(cfg), "graph_cut_coarse_first": bool(args.two_pass)}
    if args.old_candidates:
        from pointmamba.inference import graph_cut

        graph_cut.CANDIDATE_CELLS, graph_cut.CANDIDATE_NATS = 2, 1.0
    nc = cfg["data"]["num_classes"]
    variants = [(f"k{k:g}", {"graph_cut_density_power": k}) for k in args.powers]
    variants += [(f"k{k:g}_c{n}", {"graph_cut_density_power": k, "graph_cut_fine_cycles": n})
                 for k in args.powers for n in args.fine_cycles]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    model = None
    rows = []
    for i in range(len(dataset)):
        if args.names and dataset.names[i] not in args.names:
            continue
        scan = load_scan(dataset.paths[i])
        f = cache / f"{dataset.names[i]}.npz"
        if not f.is_file():
            if not args.checkpoint:
                raise SystemExit(f"{f}: not cached (--checkpoint FILE computes it)")
            import torch

            from pointmamba.data.dataset import preprocess_scan
            from pointmamba.inference.pipeline import load_trained, vertex_probabilities

            if model is None:
                model, model_cfg = load_trained(args.checkpoint, torch.device("cpu"), config=cfg)
            arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
            probs, transform = vertex_probabilities(model, arrays, scan.name, model_cfg, torch.device("cpu"), True, (0.0,))
            np.savez(f, probs=probs, transform=transform)
        z = np.load(f)
        probs, points = z["probs"], apply_transform(scan.vertices.astype(np.float64), z["transform"])
        target = fdi_to_class(scan.labels, scan.jaw, nc)
        row = {"name": dataset.names[i]}
        faces = scan.faces
        if args.fine_cycles:  # the scan as it is: the cycles must change nothing (too coarse for two passes)
            normals = vertex_normals(points, faces)
            base = refine(probs, points, faces, normals, scan.jaw, nc, options)
            row["x1_cycles_change"] = sum(int((refine(probs, points, faces, normals, scan.jaw, nc, {
                **options, "graph_cut_fine_cycles": n}) != base).sum()) for n in args.fine_cycles)
        for level in (1, 2):
            fixed = len(points)
            points, faces, parents = subdivide(points, faces)
            probs = np.concatenate([probs, probs[parents].mean(1)])
            if args.smooth_proxy:
                points = smooth_new_vertices(points, faces, fixed)
            normals = vertex_normals(points, faces)
            for name, switch in variants:
                labels = refine(probs, points, faces, normals, scan.jaw, nc, {**options, **switch})
                row[f"x{4 ** level}_{name}"] = ConfusionMatrix(nc).update(labels[:scan.num_vertices], target).miou()
        rows.append(row)
        print(json.dumps(row), flush=True)
    for key in rows[0]:
        if key == "x1_cycles_change":
            print(f"{key}: {sum(r[key] for r in rows)} labels over {len(rows)} scans")
        elif key != "name":
            x = np.array([r[key] for r in rows])
            print(f"{key} mean {x.mean():.4f} p10 {np.percentile(x, 10):.4f} kept {100 * np.mean(x >= 0.8):.0f}%")


if __name__ == "__main__":
    main()
