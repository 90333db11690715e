"""How often the jaw told from the teeth (:mod:`pointmamba.inference.jaw_from_teeth`) is right.

    python -m pointmamba.research.jaw_accuracy [ROOT ...] [--random-poses-every 4] [--cache DIR]
        [--out docs/results/jaw_from_teeth]

Every labelled scan under the roots (default: ``../shared/data/scans`` and ``../shared/data/iosseg``) goes
the way ``tools/predict.py`` takes a scan whose name does not say the jaw: the shipped model's networks
told "upper", then the graph cut and the numbering under both jaws' priors (``refine_either_jaw``). Every
``--random-poses-every``-th scan also goes in a random rigid pose (a rotation uniform over all rotations
and a shift of up to 100 mm per axis, seeded by the scan's name). The jaw of its label file is the truth.

``--cache DIR`` keeps each run's probabilities and canonical-frame vertices (float16 / float32 ``.npz``)
and reuses them; the normals are then those of the cached vertices. Writes ``jaw_accuracy.csv`` (scan,
pose, truth, call, margin in nats) and prints the accuracy and the smallest margins.
"""
from __future__ import annotations

import argparse
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ROOTS = [ROOT.parent / "shared" / "data" / "scans", ROOT.parent / "shared" / "data" / "iosseg"]


def random_pose(vertices: np.ndarray, seed: int) -> np.ndarray:
    """``vertices`` under a random rotation (uniform over SO(3), the augmentation's) and a shift of up to
    100 mm per axis."""
    from pointmamba.data.augment import random_rotation

    rng = np.random.default_rng(seed)
    return vertices @ random_rotation(rng, "so3").T + rng.uniform(-100, 100, 3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", type=Path, default=DEFAULT_ROOTS)
    parser.add_argument("--random-poses-every", type=int, default=4, metavar="N",
                        help="also run every N-th scan in a random pose (0: none)")
    parser.add_argument("--cache", type=Path, help="folder for each run's probabilities (reused when present)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "jaw_from_teeth")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    import torch
    from tqdm import tqdm

    from pointmamba.utils.atomic_file import write_csv
    from pointmamba.data.mesh import vertex_normals
    from pointmamba.data.scan import Scan, load_scan
    from pointmamba.inference.config import infer_options
    from pointmamba.inference.pipeline import load_trained, refine_either_jaw, scan_probabilities
    from pointmamba.checkpoints.shipped import resolve_checkpoint

    model, cfg = load_trained(resolve_checkpoint(None), torch.device("cpu"))
    options = infer_options(cfg)
    meshes = sorted(p for root in args.roots for p in root.rglob("*_*.obj") if p.with_suffix(".json").is_file())
    runs = [(path, 0) for path in meshes]
    if args.random_poses_every:
        runs += [(path, 1) for path in meshes[::args.random_poses_every]]
    rows = []
    for path, pose in tqdm(runs, desc="jaw", unit="run", disable=args.no_progress):
        scan = load_scan(path)
        cached = args.cache / f"{path.stem}_{pose}.npz" if args.cache else None
        if cached is not None and cached.is_file():
            data = np.load(cached)
            probs, aligned = data["probs"].astype(np.float64), data["aligned"].astype(np.float64)
            normals = vertex_normals(aligned, scan.faces)
        else:
            vertices = scan.vertices if pose == 0 else random_pose(scan.vertices, zlib.crc32(f"{path.stem}{pose}".encode()))
            shown = Scan(vertices, scan.faces, jaw="upper", id_patient=scan.id_patient, path=path)  # as predict does
            _, probs, aligned, normals = scan_probabilities(model, shown, cfg, torch.device("cpu"))
            if cached is not None:
                args.cache.mkdir(parents=True, exist_ok=True)
                np.savez_compressed(cached, probs=probs.astype(np.float16), aligned=aligned.astype(np.float32))
        _, _, call = refine_either_jaw(probs, aligned, scan.faces, normals, None, 17, options)
        rows.append({"scan": path.stem, "pose": "own" if pose == 0 else "random", "truth": scan.jaw,
                     "call": call.used, "margin_nats": round(call.nats, 2)})
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "jaw_accuracy.csv", rows)
    for pose in ("own", "random"):
        part = [r for r in rows if r["pose"] == pose]
        right = [r for r in part if r["call"] == r["truth"]]
        if part:
            margins = sorted(r["margin_nats"] for r in right)
            print(f"{pose} pose: {len(right)}/{len(part)} right ({100 * len(right) / len(part):.1f} %); smallest "
                  f"margins of a right call {margins[:5]} nats")
    for r in rows:
        if r["call"] != r["truth"]:
            print(f"  wrong: {r['scan']} ({r['pose']} pose): {r['truth']} called {r['call']} by {r['margin_nats']} nats")


if __name__ == "__main__":
    main()
