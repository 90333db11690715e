#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN [SCAN ...] --checkpoint CKPT [--jaw upper|lower] --out DIR

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances), DIR/<stem>.ply (the mesh coloured by class, with an FDI `label` vertex property) and
DIR/<stem>.png (a preview). The jaw comes from --jaw, else the file name (*_upper / *_lower).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import parse_args, run_main


def preview(path: Path, aligned, classes, colors, title: str) -> None:
    """Occlusal and side views of the aligned scan, coloured by class (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [1, 1]})
    rgb = colors[classes] / 255.0
    order = aligned[:, 2].argsort()  # draw crowns (high z) last in the occlusal view
    axes[0].scatter(aligned[order, 0], aligned[order, 1], c=rgb[order], s=0.5, linewidths=0)
    axes[0].set_title("occlusal view")
    order = aligned[:, 1].argsort()[::-1]
    axes[1].scatter(aligned[order, 0], aligned[order, 2], c=rgb[order], s=0.5, linewidths=0)
    axes[1].set_title("front view")
    for ax in axes:
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint written by tools/train.py")
    parser.add_argument("--jaw", choices=("upper", "lower"), help="jaw of every scan (default: from file name)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[], help="ground-truth Teeth3DS JSON per scan: prints metrics")
    args = parse_args(parser)

    import numpy as np

    from pointmamba.data import class_colors, load_scan, read_labels, save_labels, write_ply
    from pointmamba.engine.inference import load_trained, segment_scan
    from pointmamba.engine.trainer import resolve_device

    if args.reference and len(args.reference) != len(args.scans):
        raise ValueError(f"--reference needs one JSON per scan ({len(args.scans)}), got {len(args.reference)}")
    device = resolve_device(args.device)
    model, cfg = load_trained(args.checkpoint, device)
    colors = class_colors(cfg["data"]["num_classes"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(args.scans):
        t0 = time.perf_counter()
        scan = load_scan(path, jaw=args.jaw)
        pred = segment_scan(model, scan, cfg, device)
        stem = Path(path).stem
        save_labels(out / f"{stem}.json", pred.fdi, scan.jaw, scan.id_patient)
        write_ply(out / f"{stem}.ply", scan.vertices, scan.faces, colors=colors[pred.classes], labels=pred.fdi)
        preview(out / f"{stem}.png", pred.aligned, pred.classes, colors, f"{stem} ({scan.jaw}) - predicted")
        teeth = sorted(int(t) for t in np.unique(pred.fdi) if t > 0)
        msg = (f"{path}: {scan.num_vertices} vertices, {time.perf_counter() - t0:.2f} s, teeth {teeth} -> "
               f"{out / (stem + '.json')}")
        if args.reference:
            from pointmamba.engine.teeth_metrics import teeth_metrics

            ref = read_labels(args.reference[i], scan.num_vertices)
            acc = float((ref.labels == pred.fdi).mean())
            m = teeth_metrics(scan.vertices, ref.labels, pred.fdi, gt_instances=ref.instances)
            msg += f"\n  vs reference: accuracy {acc:.4f}, TSA {m['TSA']:.4f}, TLA {m['TLA']:.4f}, TIR {m['TIR']:.4f}"
        print(msg)


if __name__ == "__main__":
    run_main(main)
