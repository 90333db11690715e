"""Shape-evidence weights on one network's val probabilities: the network runs once per scan (mirror TTA,
cached in --cache), then the graph cut and instance numbering run with each ``infer.shape_weight``.
Same figures as ``tools/test.py --set infer.shape_weight=W infer.shape_model=FILE`` per weight.

The ``infer.shape_*`` keys were retired with their code (``pointmamba.config.RETIRED``): this script runs
only on a checkout of tag ``pre-renovation`` (``git worktree add /tmp/shape pre-renovation``), where it
was written; it is kept as the record of how the figures here were made.

    python docs/results/tooth_shape/sweep.py --config CFG --checkpoint CKPT --shape FILE --weights 0 1 2 \
        --cache DIR --out DIR
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from pointmamba.cli._common import add_average_with_arg, add_config_args, parse_args  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    add_config_args(parser)
    add_average_with_arg(parser)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--shape", required=True)
    parser.add_argument("--weights", type=float, nargs="+", required=True)
    parser.add_argument("--floor", type=float, default=0.0, help="infer.shape_floor")
    parser.add_argument("--cache", required=True)
    parser.add_argument("--out", required=True)
    args = parse_args(parser)

    import numpy as np
    from tqdm import tqdm

    from pointmamba.utils.atomic_file import atomic_write, write_csv
    from pointmamba.config import load_config
    from pointmamba.data import fdi_to_class, load_scan
    from pointmamba.data.dataset import preprocess_scan
    from pointmamba.data.mesh import apply_transform
    from pointmamba.utils.device import resolve_device
    from pointmamba.inference.pipeline import infer_options, load_trained, refine, vertex_probabilities
    from pointmamba.evaluation.metrics import ConfusionMatrix
    from pointmamba.evaluation.scan_summary import reference_groups, summarize, summary_table
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    device = resolve_device("cpu", "device")
    model, cfg = load_trained(args.checkpoint, device, config=cfg, average_with=args.average_with)
    dataset = build_dataset(cfg, "val", train=False)
    cache, out = Path(args.cache), Path(args.out)
    cache.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    nc = cfg["data"]["num_classes"]
    rows = {w: [] for w in args.weights}
    cms = {w: [] for w in args.weights}
    seconds = {w: 0.0 for w in args.weights}
    for i in tqdm(range(len(dataset)), desc="sweep"):
        scan = load_scan(dataset.paths[i])
        f = cache / f"{dataset.names[i]}.npz"
        if f.is_file():
            z = np.load(f)
            probs, transform = z["probs"], z["transform"]
        else:
            arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
            probs, transform = vertex_probabilities(model, arrays, scan.name, cfg, device, True, (0.0,))
            np.savez(f, probs=probs, transform=transform)
        aligned = apply_transform(scan.vertices.astype(np.float64), transform)
        normals = apply_transform(preprocess_scan(scan)["normals"].astype(np.float64), transform, direction=True)
        target = fdi_to_class(scan.labels, scan.jaw, nc)
        for w in args.weights:
            options = {**infer_options(cfg), "shape_weight": w, "shape_model": args.shape, "shape_floor": args.floor}
            t0 = time.perf_counter()
            classes = refine(probs, aligned, scan.faces, normals, scan.jaw, nc, options)
            seconds[w] += time.perf_counter() - t0
            cm = ConfusionMatrix(nc).update(classes, target)
            cms[w].append(cm)
            rows[w].append({"name": dataset.names[i], "source": dataset.sources[i], "jaw": scan.jaw,
                            **reference_groups(scan.labels), "miou": cm.miou()})
    table = []
    md = []
    for w in args.weights:
        s = summarize(rows[w], cms[w])
        md.append(f"## shape_weight {w}\n\n" + summary_table(s))
        for r in rows[w]:
            table.append({"weight": w, **r})
    atomic_write(out / "summary.md", "\n".join(md).encode())
    write_csv(out / "per_scan.csv", table)
    base = np.array([r["miou"] for r in rows[args.weights[0]]])
    for w in args.weights:
        m = np.array([r["miou"] for r in rows[w]])
        d = m - base
        print(f"w={w}: mean {m.mean():.4f} p10 {np.percentile(m, 10):.4f} kept {(m >= 0.8).mean():.0%} "
              f"vs w={args.weights[0]}: {d.mean():+.4f} better {(d > 0.005).sum()} worse {(d < -0.005).sum()}; "
              f"graph cut + numbering {seconds[w] / len(m):.2f} s a scan")


if __name__ == "__main__":
    main()
