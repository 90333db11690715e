#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN [SCAN ...] [--checkpoint CKPT] [--jaw upper|lower] --out DIR [--set infer.KEY=VALUE]

Without --checkpoint the shipped model (pointmamba/pretrained/, see its MODEL_CARD.md) is used.

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances), DIR/<stem>.ply (the mesh coloured by class, with an FDI `label` vertex property) and
DIR/<stem>.png (the shaded mesh coloured by tooth with FDI numbers; with --reference, the reference beside
it and the wrong vertices marked). The jaw comes from --jaw, else the file name (*_upper / *_lower).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl)")
    parser.add_argument("--checkpoint", help="checkpoint written by tools/train.py (default: the shipped model)")
    parser.add_argument("--jaw", choices=("upper", "lower"), help="jaw of every scan (default: from file name)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[], help="ground-truth Teeth3DS JSON per scan: prints metrics")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="inference switches, e.g. --set infer.graph_cut=false infer.mirror_tta=false")
    args = parse_args(parser)

    import numpy as np

    from pointmamba.config import INFER_DEFAULTS, merge, parse_override, validate
    from pointmamba.data import class_colors, fdi_to_class, load_scan, read_labels, save_labels, write_ply
    from pointmamba.engine.inference import infer_options, load_trained, segment_scan
    from pointmamba.engine.render import render_segmentation
    from pointmamba.engine.trainer import resolve_device
    from pointmamba.pretrained import resolve_checkpoint

    if args.reference and len(args.reference) != len(args.scans):
        raise ValueError(f"--reference needs one JSON per scan ({len(args.scans)}), got {len(args.reference)}")
    device = resolve_device(args.device)
    user: dict = {}
    for item in args.overrides:
        user = merge(user, parse_override(item))
    if set(user) - {"infer"}:
        raise ValueError(f"--set takes infer.* keys only here (the model comes from the checkpoint), got {sorted(user)}")
    validate(user, {"infer": INFER_DEFAULTS})
    checkpoint = resolve_checkpoint(args.checkpoint)
    model, cfg = load_trained(checkpoint, device)
    cfg["infer"] = {**infer_options(cfg), **user.get("infer", {})}
    print(f"model: {checkpoint}; inference: " + ", ".join(f"{k}={v}" for k, v in cfg["infer"].items()))
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
        ref = read_labels(args.reference[i], scan.num_vertices) if args.reference else None
        render_segmentation(out / f"{stem}.png", pred.aligned, scan.faces, pred.fdi, colors, pred.classes,
                            f"{stem} ({scan.jaw})", None if ref is None else ref.labels,
                            None if ref is None else fdi_to_class(ref.labels, scan.jaw, cfg["data"]["num_classes"]))
        teeth = sorted(int(t) for t in np.unique(pred.fdi) if t > 0)
        msg = (f"{path}: {scan.num_vertices} vertices, {time.perf_counter() - t0:.2f} s, teeth {teeth} -> "
               f"{out / (stem + '.json')}")
        if ref is not None:
            from pointmamba.engine.teeth_metrics import teeth_metrics

            from pointmamba.engine.metrics import ConfusionMatrix

            acc = float((ref.labels == pred.fdi).mean())
            num_classes = cfg["data"]["num_classes"]
            miou = ConfusionMatrix(num_classes).update(
                pred.classes, fdi_to_class(ref.labels, scan.jaw, num_classes)).miou()
            m = teeth_metrics(scan.vertices, ref.labels, pred.fdi, gt_instances=ref.instances)
            msg += f"\n  vs reference: accuracy {acc:.4f}, mIoU {miou:.4f}, TSA {m['TSA']:.4f}, TLA {m['TLA']:.4f}, TIR {m['TIR']:.4f}"
        print(msg)


if __name__ == "__main__":
    run_main(main)
