#!/usr/bin/env python3
"""Segment your own scans (OBJ/PLY/STL) at full resolution with a trained checkpoint.

    tools/predict.py SCAN [SCAN ...] [--checkpoint CKPT] [--jaw upper|lower] [--units auto|mm|cm|m] --out DIR
                     [--overwrite] [--reference JSON ...] [--set infer.KEY=VALUE ...]

Without --checkpoint the shipped model (pointmamba/pretrained/, see its MODEL_CARD.md) is used.

Writes, per scan, DIR/<stem>.json (Teeth3DS schema: id_patient, jaw, labels per original vertex in file
order, instances), DIR/<stem>.ply (the mesh coloured by class, with an FDI `label` vertex property) and
DIR/<stem>.png (the shaded mesh coloured by tooth with FDI numbers; with --reference, the reference beside
it and the wrong vertices marked). The jaw comes from --jaw, else the file name (*_upper / *_lower). Scans
in cm or m are detected from their size and scaled to mm with a warning (--units to say). Every input is
checked before any work; nothing is written over an input or a file this run did not write (--overwrite
replaces earlier results); inputs sharing a file name get their folder's name as a prefix.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._common import parse_args, run_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scans", nargs="+", help="mesh files (.obj, .ply, .stl)")
    parser.add_argument("--checkpoint", help="checkpoint written by tools/train.py (default: the shipped model)")
    parser.add_argument("--jaw", choices=("upper", "lower"), help="jaw of every scan (default: from file name)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--reference", nargs="+", default=[], help="ground-truth Teeth3DS JSON per scan: prints metrics")
    parser.add_argument("--units", default="auto", choices=("auto", "mm", "cm", "m"),
                        help="units of the scans' coordinates (auto: from their size; the model works in mm)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing files in --out (never an input)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="inference switches, e.g. --set infer.graph_cut=false infer.mirror_tta=false")
    args = parse_args(parser)

    import numpy as np

    from pointmamba.config import INFER_DEFAULTS, merge, parse_override, validate
    from pointmamba.data import class_colors, fdi_to_class, read_labels, save_labels, write_ply
    from pointmamba.evaluation.inference import load_trained, segment_scan
    from pointmamba.cli.output_files import check_out_dir, make_out_dir, plan_outputs
    from pointmamba.data.preflight import check_predict_inputs, scan_in_mm
    from pointmamba.evaluation.render import render_segmentation
    from pointmamba.device import resolve_device
    from pointmamba.pretrained import resolve_checkpoint

    # everything checked before any work or output (see pointmamba/data/preflight.py, pointmamba/cli/output_files.py)
    user: dict = {}
    for item in args.overrides:
        user = merge(user, parse_override(item))
    if set(user) - {"infer"}:
        raise ValueError(f"--set takes infer.* keys only here (the model comes from the checkpoint), got {sorted(user)}")
    validate(user, {"infer": INFER_DEFAULTS})
    out = Path(args.out)
    check_out_dir(out)
    device = resolve_device(args.device, "--device")
    checkpoint = resolve_checkpoint(args.checkpoint)
    model, cfg = load_trained(checkpoint, device)
    # inference switches are a prediction-time choice: the current defaults and --set, not whatever the
    # training config held when the checkpoint was written
    cfg["infer"] = {**INFER_DEFAULTS, **user.get("infer", {})}
    print(f"model: {checkpoint}; inference: " + ", ".join(f"{k}={v}" for k, v in cfg["infer"].items()))
    num_classes = cfg["data"]["num_classes"]
    inputs = check_predict_inputs(args.scans, args.jaw, args.units, args.reference,
                                  need_jaw=num_classes == 17, warn=lambda m: print(m, file=sys.stderr))
    sidecars = [p.with_suffix(".json") for p in map(Path, args.scans) if p.with_suffix(".json").exists()]
    plan = plan_outputs(args.scans, out, (".json", ".ply", ".png"), args.overwrite,
                        protected=list(args.reference) + sidecars)
    colors = class_colors(num_classes)
    make_out_dir(out)
    for i, (item, files) in enumerate(zip(inputs, plan)):
        t0 = time.perf_counter()
        path = item.path
        original, scan = scan_in_mm(item)  # as in the file (written back so), and in mm (what the model reads)
        pred = segment_scan(model, scan, cfg, device)
        stem = files[".json"].stem
        save_labels(files[".json"], pred.fdi, scan.jaw, scan.id_patient)
        write_ply(files[".ply"], original.vertices, scan.faces, colors=colors[pred.classes], labels=pred.fdi)
        ref = read_labels(args.reference[i], scan.num_vertices) if args.reference else None
        render_segmentation(files[".png"], pred.aligned, scan.faces, pred.fdi, colors, pred.classes,
                            f"{stem} ({scan.jaw})", None if ref is None else ref.labels,
                            None if ref is None else fdi_to_class(ref.labels, scan.jaw, num_classes))
        teeth = sorted(int(t) for t in np.unique(pred.fdi) if t > 0)
        msg = (f"{path}: {scan.num_vertices} vertices, {time.perf_counter() - t0:.2f} s, teeth {teeth} -> "
               f"{files['.json']}")
        if ref is not None:
            from pointmamba.evaluation.metrics import ConfusionMatrix
            from pointmamba.evaluation.teeth_metrics import teeth_metrics

            acc = float((ref.labels == pred.fdi).mean())
            miou = ConfusionMatrix(num_classes).update(pred.classes, fdi_to_class(ref.labels, scan.jaw, num_classes)).miou()
            m = teeth_metrics(scan.vertices, ref.labels, pred.fdi, gt_instances=ref.instances)
            msg += (f"\n  vs reference: accuracy {acc:.4f}, mIoU {miou:.4f}, TSA {m['TSA']:.4f}, TLA {m['TLA']:.4f}, "
                    f"TIR {m['TIR']:.4f}")
        print(msg)


def cli() -> None:
    """Entry point of ``pointmamba-predict``."""
    run_main(main)


if __name__ == "__main__":
    cli()
