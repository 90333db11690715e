#!/usr/bin/env python3
"""The val scans of a config at 1x, 4x and 16x their vertices (``mesh.subdivide``: the same surface, denser),
predicted with each ``infer.max_input_points`` value, scored on the original vertices only.

    python docs/results/scan_density/measure.py --config CFG --checkpoint CKPT [--average-with CKPT]
        --levels 0 2 --limits 0 6000 8000 10000 --out DIR

Writes DIR/per_scan.csv (one column per level and limit; 0 = no limit) and DIR/summary.md (per-scan mIoU
mean, 10th percentile, kept >= 0.80; seconds per scan).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--average-with", nargs="*", default=[])
    parser.add_argument("--levels", nargs="+", type=int, default=[0, 2], help="subdivisions (0: as it is)")
    parser.add_argument("--limits", nargs="+", type=int, default=[0, 8000], help="max_input_points (0: none)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--names", nargs="*", help="only these val scans (default: all)")
    args = parser.parse_args()

    import torch
    from tqdm import tqdm

    from pointmamba.utils.atomic_file import atomic_write, write_csv
    from pointmamba.config import load_config
    from pointmamba.data import Scan, fdi_to_class, load_scan
    from pointmamba.data.mesh import subdivide
    from pointmamba.inference.pipeline import load_trained, segment_scan
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.training.data_builders import build_dataset

    torch.manual_seed(0)
    cfg = load_config(args.config, [])
    device = torch.device("cpu")
    model, cfg = load_trained(args.checkpoint, device, config=cfg, average_with=args.average_with)
    dataset = build_dataset(cfg, "val", train=False)
    num_classes = cfg["data"]["num_classes"]
    rows, seconds = [], {}
    for i in tqdm(range(len(dataset)), desc="scans"):
        if args.names and dataset.names[i] not in args.names:
            continue
        scan = load_scan(dataset.paths[i])
        target = fdi_to_class(scan.labels, scan.jaw, num_classes)
        vertices, faces = scan.vertices.astype(np.float64), scan.faces
        row = {"name": dataset.names[i]}
        for level in range(max(args.levels) + 1):
            if level in args.levels:
                dense = Scan(vertices, faces, None, scan.jaw, scan.id_patient)
                row[f"vertices_x{4 ** level}"] = len(vertices)
                for limit in args.limits:
                    cfg.setdefault("infer", {})["max_input_points"] = limit or None
                    start = time.perf_counter()
                    pred = segment_scan(model, dense, cfg, device)
                    key = f"x{4 ** level}_limit{limit}"
                    seconds.setdefault(key, []).append(time.perf_counter() - start)
                    row[key] = ConfusionMatrix(num_classes).update(pred.classes[:scan.num_vertices], target).miou()
            if level < max(args.levels):
                vertices, faces, _ = subdivide(vertices, faces)
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "per_scan.csv", rows)
    lines = ["| vertices | max_input_points | mean | p10 | kept | s / scan |", "|---|---|---|---|---|---|"]
    for key in seconds:
        m = np.array([r[key] for r in rows])
        level = key.split("_")[0]
        lines.append(f"| {level} | {key.split('limit')[1] if not key.endswith('limit0') else 'none'} | "
                     f"{m.mean():.3f} | {np.percentile(m, 10):.3f} | {100 * np.mean(m >= 0.8):.0f} % | "
                     f"{np.mean(seconds[key]):.1f} |")
    atomic_write(out / "summary.md", ("\n".join(lines) + "\n").encode())
    print("\n".join(lines))


if __name__ == "__main__":
    main()
