#!/usr/bin/env python3
"""The demo: segment real scans with the shipped model, then fine-tune it briefly on real scans.

    python tools/demo.py              # real scans (data/samples) with the shipped model + a short fine-tune
    python tools/demo.py --synthetic  # the synthetic demo: train on procedural jaws, segment an unseen one

Writes work_dirs/demo/real/ (JSON, coloured PLY and a rendered PNG per scan, with the reference beside the
prediction) and work_dirs/demo/finetune/ (checkpoints, TensorBoard, metrics).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from pointmamba.cli._common import run_main  # noqa: E402

SAMPLES = ROOT / "data" / "samples"


def real_demo(py: str, work: Path) -> None:
    scans = sorted(SAMPLES.glob("*/*.obj"))
    if not scans:
        raise FileNotFoundError(f"{SAMPLES}: no sample scans (they ship with the checkout)")
    out = work / "real"
    print(f"== 1. segmenting {len(scans)} real scans with the shipped model (pointmamba/checkpoints/)")
    subprocess.run([py, str(ROOT / "tools" / "predict.py"), *map(str, scans), "--out", str(out),
                    "--reference", *(str(s.with_suffix(".json")) for s in scans), "--overwrite"], check=True, cwd=ROOT)
    print(f"   pictures: {', '.join(str(out / (s.stem + '.png')) for s in scans)}")
    print("   (the shipped model was trained on these scans too; held-out figures: pointmamba/checkpoints/MODEL_CARD.md)")
    print("\n== 2. fine-tuning the shipped model on two of them for a few steps (configs/demo_finetune.yaml)")
    subprocess.run([py, str(ROOT / "tools" / "train.py"), "--config", str(ROOT / "configs" / "demo_finetune.yaml"),
                    "--work-dir", str(work / "finetune"), "--overwrite"], check=True, cwd=ROOT)
    print("\nDemo finished.")
    print(f"  predictions : {out}/<scan>.json (Teeth3DS), .ply (coloured mesh), .png (rendered)")
    print(f"  fine-tune   : {work / 'finetune'} (best.pth, TensorBoard: tensorboard --logdir {work / 'finetune' / 'tb'})")
    print("  synthetic   : python tools/demo.py --synthetic")


def synthetic_demo(py: str, work: Path, overrides: list[str]) -> None:
    cmd = [py, str(ROOT / "tools" / "train.py"), "--config", str(ROOT / "configs" / "demo.yaml"), "--work-dir",
           str(work), "--overwrite"]
    if overrides:
        cmd += ["--set", *overrides]
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
    print("\nSynthetic demo finished.")
    print(f"  checkpoints   : {work / 'best.pth'} , {work / 'last.pth'}")
    print(f"  TensorBoard   : tensorboard --logdir {work / 'tb'}")
    print(f"  predictions   : {out / 'DEMO0001_upper.json'} (Teeth3DS JSON), .ply, .png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synthetic", action="store_true", help="the synthetic demo (train from scratch)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="config overrides for the synthetic demo's training")
    args = parser.parse_args()
    if args.synthetic:
        synthetic_demo(sys.executable, ROOT / "work_dirs" / "demo_synthetic", args.overrides)
    else:
        real_demo(sys.executable, ROOT / "work_dirs" / "demo")


if __name__ == "__main__":
    run_main(main)
