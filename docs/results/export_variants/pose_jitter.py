"""The held-out pairs on their val splits with the canonical frame nudged after its fit: how far do labels move
when the pose is off by what a different export or a few stray vertices turn it (a fraction of a degree, a
tenth of a millimetre)? The pose itself is equivariant (turned.py); what is probed here is what the grid
sampling, the networks and the numbering make of a frame that is slightly different.

Each run patches ``pointmamba.data.dataset.canonical_pose`` to compose its fit with one fixed nudge, then runs
``tools/test.py`` with its own preprocessing cache (the cache stores the pose).

    python docs/results/export_variants/pose_jitter.py A yaw 0.5 OUT_DIR      # split, nudge, size, where
    nudges: none, yaw (about z, degrees), tilt (about x, degrees), roll (about y, degrees), shift (mm, along x+y+z)
    python docs/results/export_variants/pose_jitter.py table DIR > pose_jitter.txt   # DIR/{A,B}_{none,...}/per_scan.csv
"""
import os
import sys
import tempfile

import numpy as np

SPLITS = {
    "A": ("configs/shared_data_recipe.yaml", "work_dirs/numbering/A2_e28_s1/last.pth",
          "work_dirs/numbering/A2_nocoord_e28_s1/last.pth"),
    "B": ("configs/shared_data_recipe_split2.yaml", "work_dirs/numbering/B_e28_s1/last.pth",
          "work_dirs/numbering/B_nocoord_e28_s1/last.pth"),
}


def nudge(kind: str, size: float) -> np.ndarray:
    """The 4x4 motion in the canonical frame."""
    m = np.eye(4)
    a = np.radians(size)
    c, s = np.cos(a), np.sin(a)
    if kind == "yaw":
        m[:2, :2] = [[c, -s], [s, c]]
    elif kind == "tilt":
        m[1:3, 1:3] = [[c, -s], [s, c]]
    elif kind == "roll":
        m[0, 0], m[0, 2], m[2, 0], m[2, 2] = c, s, -s, c
    elif kind == "shift":
        m[:3, 3] = size / np.sqrt(3)
    elif kind != "none":
        raise SystemExit(f"unknown nudge {kind!r}")
    return m


def table(root: str) -> None:
    """Per split and nudge: the means, how many scans moved by more than 0.02 / 0.05, and each of those with its
    review flag before and after."""
    import csv
    from pathlib import Path

    def read(name: str) -> dict[str, dict[str, str]]:
        with open(Path(root) / name / "per_scan.csv", newline="") as f:
            return {r["name"]: r for r in csv.DictReader(f)}

    print("| split | nudge | mean | no pattern | median abs change | moved > 0.02 | > 0.05 | largest | those moved: flagged before / after |")
    print("|---|---|---|---|---|---|---|---|---|")
    moved_rows = []
    for split in "AB":
        base = read(f"{split}_none")
        names = list(base)
        plain = [n for n in names if base[n]["lone_premolar"] == "False"]
        for kind in ("yaw", "tilt", "roll", "shift"):
            if not (Path(root) / f"{split}_{kind}").is_dir():
                continue
            run = read(f"{split}_{kind}")
            change = {n: float(run[n]["miou"]) - float(base[n]["miou"]) for n in names}
            moved = sorted((n for n in names if abs(change[n]) > 0.02), key=lambda n: -abs(change[n]))
            flagged = [f"{base[n]['review'] == 'True'}/{run[n]['review'] == 'True'}" for n in moved]
            def mean(rows, which):  # noqa: ANN001, ANN202
                return np.mean([float(rows[n]["miou"]) for n in which])
            print(f"| {split} | {kind} | {mean(base, names):.4f} -> {mean(run, names):.4f} | "
                  f"{mean(base, plain):.4f} -> {mean(run, plain):.4f} | {np.median(np.abs(list(change.values()))):.4f} | "
                  f"{len(moved)} of {len(names)} | {sum(abs(change[n]) > 0.05 for n in names)} | "
                  f"{max(change.values(), key=abs):+.3f} | {', '.join(flagged) or '-'} |")
            moved_rows += [f"- {split} {kind}: {n} {float(base[n]['miou']):.3f} -> {float(run[n]['miou']):.3f} "
                           f"(findings: {base[n]['findings'] or '-'} -> {run[n]['findings'] or '-'})" for n in moved]
    print()
    print("\n".join(moved_rows))


def main() -> None:
    if sys.argv[1] == "table":
        table(sys.argv[2])
        return
    split, kind, size, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    os.environ["POINTMAMBA_CACHE"] = tempfile.mkdtemp(prefix="pose_jitter_")
    from pointmamba.data import dataset

    fitted = dataset.canonical_pose
    motion = nudge(kind, size)
    dataset.canonical_pose = lambda *a, **k: motion @ fitted(*a, **k)
    config, first, second = SPLITS[split]
    sys.argv = ["test", config, "--checkpoint", first, "--average-with", second, "--split", "val", "--out", out,
                "--no-progress"]
    from pointmamba.cli.test import cli

    cli()


if __name__ == "__main__":
    main()
