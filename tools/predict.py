#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN [SCAN ...] --checkpoint CKPT [--jaw upper|lower] [--units auto|mm|cm|m] --out DIR

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances), DIR/<stem>.ply (the mesh coloured by class, with an FDI `label` vertex property) and
DIR/<stem>.png (a preview). The jaw comes from --jaw, else the file name (*_upper / *_lower). Scans in
cm or m are detected from their size and scaled to mm with a warning (--units to say). Every input is
checked before any work; nothing is written over an input or a file this run did not write (--overwrite
replaces earlier results); inputs sharing a file name get their folder's name as a prefix.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _common import run_main


def preview(path: Path, aligned, classes, colors, title: str) -> None:
    """Occlusal and side views of the aligned scan, coloured by class (matplotlib Agg)."""
    import matplotlib

    from pointmamba.engine.output_files import save_figure

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
    save_figure(fig, path, dpi=120)  # atomic: a symlink planted at path is replaced, not written through
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint written by tools/train.py")
    parser.add_argument("--jaw", choices=("upper", "lower"), help="jaw of every scan (default: from file name)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[], help="ground-truth Teeth3DS JSON per scan: prints metrics")
    parser.add_argument("--units", default="auto", choices=("auto", "mm", "cm", "m"),
                        help="units of the scans' coordinates (auto: from their size; the model works in mm)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing files in --out (never an input)")
    args = parser.parse_args()

    import numpy as np

    from pointmamba.data import class_colors, read_labels, save_labels, write_ply
    from pointmamba.engine.inference import load_trained, segment_scan
    from pointmamba.engine.output_files import check_out_dir, make_out_dir, plan_outputs
    from pointmamba.engine.preflight import check_predict_inputs, scan_in_mm
    from pointmamba.engine.trainer import resolve_device

    # everything checked before any work or output (see pointmamba/engine/preflight.py, output_files.py)
    out = Path(args.out)
    check_out_dir(out)
    device = resolve_device(args.device, "--device")
    model, cfg = load_trained(args.checkpoint, device)
    inputs = check_predict_inputs(args.scans, args.jaw, args.units, args.reference,
                                  need_jaw=cfg["data"]["num_classes"] == 17, warn=lambda m: print(m, file=sys.stderr))
    sidecars = [p.with_suffix(".json") for p in map(Path, args.scans) if p.with_suffix(".json").exists()]
    plan = plan_outputs(args.scans, out, (".json", ".ply", ".png"), args.overwrite,
                        protected=list(args.reference) + sidecars)
    colors = class_colors(cfg["data"]["num_classes"])
    make_out_dir(out)
    for i, (item, files) in enumerate(zip(inputs, plan)):
        t0 = time.perf_counter()
        path = item.path
        original, scan = scan_in_mm(item)  # as in the file (written back so), and in mm (what the model reads)
        pred = segment_scan(model, scan, cfg, device)
        stem = files[".json"].stem
        save_labels(files[".json"], pred.fdi, scan.jaw, scan.id_patient)
        write_ply(files[".ply"], original.vertices, scan.faces, colors=colors[pred.classes], labels=pred.fdi)
        preview(files[".png"], pred.aligned, pred.classes, colors, f"{stem} ({scan.jaw}) - predicted")
        teeth = sorted(int(t) for t in np.unique(pred.fdi) if t > 0)
        msg = (f"{path}: {scan.num_vertices} vertices, {time.perf_counter() - t0:.2f} s, teeth {teeth} -> "
               f"{files['.json']}")
        if args.reference:
            from pointmamba.engine.teeth_metrics import teeth_metrics

            ref = read_labels(args.reference[i], scan.num_vertices)
            acc = float((ref.labels == pred.fdi).mean())
            m = teeth_metrics(scan.vertices, ref.labels, pred.fdi, gt_instances=ref.instances)
            msg += f"\n  vs reference: accuracy {acc:.4f}, TSA {m['TSA']:.4f}, TLA {m['TLA']:.4f}, TIR {m['TIR']:.4f}"
        print(msg)


if __name__ == "__main__":
    run_main(main)
