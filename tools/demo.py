#!/usr/bin/env python3
"""The demo: train on procedural synthetic jaws for a few minutes on CPU, then segment an unseen jaw.

    python tools/demo.py [--set key=value ...]

Writes work_dirs/demo/ (checkpoints, TensorBoard, metrics) and work_dirs/demo/predict/ (JSON, PLY, PNG).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _common import run_main

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    work = ROOT / "work_dirs" / "demo"
    py = sys.executable
    # --overwrite: a rerun of the demo replaces its own previous run and predictions
    cmd = [py, str(ROOT / "tools" / "train.py"), "--config", str(ROOT / "configs" / "demo.yaml"), "--work-dir", str(work),
           "--overwrite"]
    if args.overrides:
        cmd += ["--set", *args.overrides]
    subprocess.run(cmd, check=True, cwd=ROOT)

    from pointmamba.data import save_labels, synthetic_jaw
    from pointmamba.data.mesh import write_obj

    scan_dir = work / "unseen"
    scan_dir.mkdir(parents=True, exist_ok=True)
    scan = synthetic_jaw(seed=10_000, jaw="upper", n_vertices=20000, missing=(17, 26), pose="random")
    obj = scan_dir / "DEMO0001_upper.obj"
    write_obj(obj, scan.vertices, scan.faces)
    save_labels(scan_dir / "DEMO0001_upper.reference.json", scan.labels, "upper", "DEMO0001")
    out = work / "predict"
    subprocess.run([py, str(ROOT / "tools" / "predict.py"), str(obj), "--checkpoint", str(work / "best.pth"),
                    "--out", str(out), "--reference", str(scan_dir / "DEMO0001_upper.reference.json"), "--overwrite"],
                   check=True, cwd=ROOT)
    print("\nDemo finished.")
    print(f"  checkpoints   : {work / 'best.pth'} , {work / 'last.pth'}")
    print(f"  TensorBoard   : tensorboard --logdir {work / 'tb'}")
    print(f"  predictions   : {out / 'DEMO0001_upper.json'} (Teeth3DS JSON)")
    print(f"                  {out / 'DEMO0001_upper.ply'} (coloured mesh), {out / 'DEMO0001_upper.png'} (preview)")


if __name__ == "__main__":
    run_main(main)
