"""Procedural jaw scans: the built-in data set that needs no download.

A jaw is one open triangle mesh over a (u, t) grid: u runs along a U-shaped dental arch (arc length),
t across it (buccal > 0, lingual < 0). The gingiva is a ridge whose sides fall into the vestibule and,
lingually, the floor of the mouth (lower) or the palate (upper); each tooth is a crown raised on the
ridge with a type-specific footprint and occlusal shape (incisor: blade with an incisal edge, canine:
one cusp, premolar: two cusps, molar: four cusps and a fossa). Every vertex inside a crown's footprint
carries that tooth's FDI number, the rest 0 (gingiva).

The generator works in the canonical frame of :mod:`pointmamba.data.pose` (crowns +z, arch opening -y,
quadrants 1 and 3 at -x, 2 and 4 at +x, as in a real mouth once the upper jaw is turned crowns-up), then
applies the requested pose (stored as ``scan.meta["pose"]``, canonical -> output). Vertex order is
shuffled (real scans have no meaningful order). Seeded and deterministic; 20k vertices take ~0.02-0.05 s, 250k about 0.5-1 s.

CLI: ``python -m pointmamba.data.synthetic OUT_DIR --count N [--vertices V] [--seed S]`` writes
``OUT_DIR/<ID>/<ID>_<jaw>.obj`` + ``.json`` for both jaws of N patients and ``train.txt``/``val.txt``/
``test.txt`` (70/15/15 % of the IDs).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .augment import random_rotation
from .fdi import LOWER_FDI, UPPER_FDI, check_jaw
from .mesh import apply_transform
from .scan import Scan
from .teeth3ds import instances_from_labels

MIN_VERTICES, MAX_VERTICES = 1000, 2_000_000

# Per position 1..8 (central incisor .. third molar), in mm: mesiodistal width, buccolingual width,
# crown height above the gingival crest (typical adult values).
_WIDTH = {"upper": (8.6, 6.6, 7.6, 7.0, 6.7, 10.2, 9.2, 8.6), "lower": (5.4, 5.9, 6.9, 7.0, 7.1, 11.2, 10.5, 10.0)}
_DEPTH = {"upper": (7.0, 6.2, 8.0, 9.2, 9.0, 11.5, 11.0, 10.5), "lower": (5.8, 6.1, 7.5, 7.7, 8.2, 10.5, 10.2, 9.8)}
_HEIGHT = {"upper": (7.0, 6.2, 7.5, 5.8, 5.4, 5.0, 4.7, 4.3), "lower": (5.8, 5.8, 7.0, 5.8, 5.4, 5.0, 4.7, 4.3)}
_TYPE = ("incisor", "incisor", "canine", "premolar", "premolar", "molar", "molar", "molar")
# Footprint superellipse exponent and cusps (s, r, height fraction, width) per tooth type; s along the
# arch, r across (buccal +), both in units of the half widths.
_SHAPE = {
    "incisor": (2.6, ()),
    "canine": (2.2, ((0.0, 0.1, 0.35, 0.35),)),
    "premolar": (2.4, ((0.0, 0.45, 0.25, 0.3), (0.0, -0.45, 0.18, 0.3))),
    "molar": (3.0, ((0.45, 0.45, 0.18, 0.28), (-0.45, 0.45, 0.18, 0.28), (0.45, -0.45, 0.16, 0.28),
                    (-0.45, -0.45, 0.16, 0.28))),
}


def _arch(rng: np.random.Generator, half_length: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A U-shaped arch sampled densely: arc length (from the midline, negative on the -x side),
    points (K, 2) and outward unit normals (K, 2), scaled so the half arch is ``half_length`` long."""
    ratio = rng.uniform(0.65, 0.85)        # half width / depth of the front ellipse
    phi_max = np.radians(rng.uniform(105.0, 115.0))
    diverge = rng.uniform(0.05, 0.2)       # legs open outwards towards the back, as real arches do
    phi = np.linspace(-phi_max, phi_max, 4001)
    x = ratio * np.sin(phi) * (1.0 + diverge * (phi / phi_max) ** 2)
    y = np.cos(phi)
    seg = np.hypot(np.diff(x), np.diff(y))
    s = np.concatenate([[0.0], np.cumsum(seg)])
    s -= s[len(s) // 2]
    scale = half_length / s[-1]
    pts = np.stack([x, y], 1) * scale
    s = s * scale
    tangent = np.gradient(pts, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], 1)  # outward (buccal): +y at the front
    return s, pts, normal


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _pose_matrix(pose: str | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if isinstance(pose, str):
        if pose == "canonical":
            return np.eye(4)
        if pose != "random":
            raise ValueError(f"synthetic_jaw: pose must be 'random', 'canonical' or a 4x4 array, got {pose!r}")
        t = np.eye(4)
        t[:3, :3] = random_rotation(rng, "so3")
        t[:3, 3] = rng.uniform(-20.0, 20.0, 3)
        return t
    t = np.asarray(pose, dtype=np.float64)
    if t.shape != (4, 4):
        raise ValueError(f"synthetic_jaw: pose array must be 4x4, got {t.shape}")
    return t


def synthetic_jaw(seed: int, jaw: str = "upper", n_vertices: int = 20000, missing: Iterable[int] = (),
                  pose: str | np.ndarray = "random", id_patient: str | None = None) -> Scan:
    """A procedural jaw scan with FDI labels (see the module docstring).

    ``missing``: FDI numbers of absent teeth (must belong to ``jaw``); all other 16 teeth are present.
    ``n_vertices``: target vertex count (the grid hits it within 1 %). ``pose``: "random" (uniform
    rotation and a translation of up to 20 mm), "canonical", or a 4x4 transform applied to the
    canonical jaw. Same arguments, same arrays.
    """
    check_jaw(jaw)
    n_vertices = int(n_vertices)
    if not MIN_VERTICES <= n_vertices <= MAX_VERTICES:
        raise ValueError(f"synthetic_jaw: n_vertices must be in [{MIN_VERTICES}, {MAX_VERTICES}], got {n_vertices}")
    fdis = UPPER_FDI if jaw == "upper" else LOWER_FDI
    missing = {int(m) for m in missing}
    bad = sorted(missing - set(fdis))
    if bad:
        raise ValueError(f"synthetic_jaw: missing teeth {bad} are not teeth of the {jaw} jaw ({fdis[0]}-{fdis[-1]})")
    rng = np.random.default_rng([int(seed), 0 if jaw == "upper" else 1])

    # teeth: size, height, placement along the arch (from the midline), per side
    size = rng.normal(1.0, 0.04)
    width = np.array(_WIDTH[jaw]) * size * rng.normal(1.0, 0.03, (2, 8))
    depth = np.array(_DEPTH[jaw]) * size * rng.normal(1.0, 0.04, (2, 8))
    height = np.array(_HEIGHT[jaw]) * rng.uniform(0.85, 1.1) * rng.normal(1.0, 0.06, (2, 8))
    gap = rng.uniform(0.0, 0.3, (2, 8))
    centre = np.cumsum(width + gap, axis=1) - (width + gap) / 2.0
    back = rng.uniform(2.0, 5.0)  # gingiva behind the last molar
    half_length = float(max(centre[0, -1] + width[0, -1] / 2, centre[1, -1] + width[1, -1] / 2) + back)

    # cross section (mm): ridge crest around t = 0, buccal side down to the vestibule, lingual side
    # down to the floor of the mouth (lower) or into the palate (upper, wider and deeper)
    t_buccal = rng.uniform(8.0, 11.0)
    t_lingual = rng.uniform(12.0, 15.0) if jaw == "upper" else rng.uniform(8.0, 11.0)
    h_buccal = rng.uniform(6.0, 9.0)
    h_lingual = rng.uniform(10.0, 14.0) if jaw == "upper" else rng.uniform(7.0, 10.0)
    crest = rng.uniform(2.5, 3.5)

    # grid: spacing about equal along and across the arch
    span_t = t_buccal + t_lingual
    nt = max(8, int(round(np.sqrt(n_vertices * span_t / (2 * half_length)))))
    nu = max(8, int(round(n_vertices / nt)))
    u = np.linspace(-half_length, half_length, nu)
    t = np.linspace(-t_lingual, t_buccal, nt)
    uu, tt = np.meshgrid(u, t, indexing="ij")  # (nu, nt)

    s_arch, pts, normals = _arch(rng, half_length)
    px = np.interp(u, s_arch, pts[:, 0])
    py = np.interp(u, s_arch, pts[:, 1])
    nx = np.interp(u, s_arch, normals[:, 0])
    ny = np.interp(u, s_arch, normals[:, 1])
    nn = np.hypot(nx, ny)
    nx, ny = nx / nn, ny / nn

    # gingiva height
    side_r = np.where(tt >= 0, (tt - crest) / (t_buccal - crest), (-tt - crest) / (t_lingual - crest))
    z = -np.where(tt >= 0, h_buccal, h_lingual) * _smoothstep(side_r)
    for _ in range(4):  # gentle irregularity
        ku, kt, ph = rng.uniform(0.02, 0.15), rng.uniform(0.05, 0.3), rng.uniform(0, 2 * np.pi, 2)
        z += rng.uniform(0.1, 0.35) * np.sin(ku * uu + ph[0]) * np.sin(kt * tt + ph[1])

    # crowns
    labels = np.zeros((nu, nt), dtype=np.int64)
    crown = np.zeros((nu, nt))
    best_rho = np.full((nu, nt), np.inf)
    for side in (0, 1):  # 0: quadrant 1/3 at -x (u < 0), 1: quadrant 2/4 at +x (u > 0)
        sign = -1.0 if side == 0 else 1.0
        for p in range(8):
            fdi = fdis[side * 8 + p]
            if fdi in missing:
                continue
            a, b, h = width[side, p] / 2.0, depth[side, p] / 2.0, height[side, p]
            uc = sign * centre[side, p]
            lo, hi = np.searchsorted(u, [uc - 1.5 * a, uc + 1.5 * a])
            if hi <= lo:
                continue
            su, st = uu[lo:hi], tt[lo:hi]
            ang = np.radians(rng.normal(0.0, 6.0))
            tc = rng.normal(0.0, 0.3)
            ds, dr = (su - uc) / a, (st - tc) / b
            s_loc = sign * (np.cos(ang) * ds - np.sin(ang) * dr)  # s > 0 towards distal on both sides
            r_loc = np.sin(ang) * ds + np.cos(ang) * dr
            q, cusps = _SHAPE[_TYPE[p]]
            rho = (np.abs(s_loc) ** q + np.abs(r_loc) ** q) ** (1.0 / q)
            inside = rho < 1.0
            wall = np.sqrt(np.clip(1.0 - rho ** 8, 0.0, 1.0))
            top = 1.0 - 0.15 * rho ** 2
            if _TYPE[p] == "incisor":  # a blade: higher along the incisal edge (r = 0), thin at the tip
                top = 1.0 - 0.35 * r_loc ** 2 - 0.05 * s_loc ** 2
            for cs, cr, ch, cw in cusps:
                top = top + ch * np.exp(-((s_loc - cs) ** 2 + (r_loc - cr) ** 2) / cw ** 2)
            if _TYPE[p] == "molar":
                top = top - 0.12 * np.exp(-(s_loc ** 2 + r_loc ** 2) / 0.12)
            elif _TYPE[p] == "canine":
                top = top - 0.25 * rho ** 2
            z_crown = np.where(inside, h * wall * top * rng.uniform(0.97, 1.03), 0.0)
            take = inside & (rho < best_rho[lo:hi])
            labels[lo:hi][take] = fdi
            best_rho[lo:hi][take] = rho[take]
            crown[lo:hi] = np.where(take, np.maximum(z_crown, crown[lo:hi]), crown[lo:hi])
    z = z + crown

    x3 = px[:, None] + tt * nx[:, None]
    y3 = py[:, None] + tt * ny[:, None]
    vertices = np.stack([x3, y3, z], -1).reshape(-1, 3)
    labels = labels.reshape(-1)

    # faces: two triangles per grid cell, counter-clockwise seen from +z (normals out of the surface)
    i, j = np.meshgrid(np.arange(nu - 1), np.arange(nt - 1), indexing="ij")
    v00 = (i * nt + j).reshape(-1)
    v10, v01, v11 = v00 + nt, v00 + 1, v00 + nt + 1
    faces = np.concatenate([np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)])

    # shuffle vertex order, then pose
    perm = rng.permutation(len(vertices))
    rank = np.empty_like(perm)
    rank[perm] = np.arange(len(perm))
    vertices, labels, faces = vertices[perm], labels[perm], rank[faces]
    transform = _pose_matrix(pose, rng)
    vertices = apply_transform(vertices, transform)
    return Scan(vertices=vertices, faces=faces.astype(np.int64), labels=labels, jaw=jaw,
                id_patient=id_patient or f"SYN{int(seed):05d}", path=None,
                instances=instances_from_labels(labels), meta={"pose": transform, "seed": int(seed)})


def random_missing(rng: np.random.Generator, jaw: str, p_third_molar: float = 0.6,
                   p_other: float = 0.04) -> list[int]:
    """A plausible set of absent teeth: third molars often, any other tooth rarely."""
    fdis = UPPER_FDI if jaw == "upper" else LOWER_FDI
    draw = rng.random(len(fdis))
    return [f for f, d in zip(fdis, draw) if d < (p_third_molar if f % 10 == 8 else p_other)]


def write_dataset(out_dir: str | Path, count: int, n_vertices: int = 20000, seed: int = 0,
                  split: Sequence[float] = (0.7, 0.15, 0.15), progress: bool = True) -> list[str]:
    """Write ``count`` synthetic patients (both jaws) in Teeth3DS layout plus split files; returns IDs."""
    from tqdm import tqdm

    from .scan import save_scan

    if count < 1:
        raise ValueError(f"write_dataset: count must be >= 1, got {count}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ids = [f"SYN{i:05d}" for i in range(count)]
    for i, pid in enumerate(tqdm(ids, desc="synthetic jaws", disable=not progress)):
        for jaw in ("upper", "lower"):
            rng = np.random.default_rng([int(seed), i, 0 if jaw == "upper" else 1, 7])
            scan = synthetic_jaw(int(rng.integers(2 ** 31)), jaw, n_vertices, random_missing(rng, jaw),
                                 "random", id_patient=pid)
            save_scan(out, scan)
    order = np.random.default_rng([int(seed), 99]).permutation(count)
    n_train = max(1, int(round(split[0] * count)))
    n_val = int(round(split[1] * count)) if count - n_train > 1 else 0
    parts = {"train": order[:n_train], "val": order[n_train:n_train + n_val], "test": order[n_train + n_val:]}
    for name, idx in parts.items():
        (out / f"{name}.txt").write_text("".join(f"{ids[k]}\n" for k in sorted(idx)))
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pointmamba.data.synthetic",
                                     description="Write procedural jaw scans in Teeth3DS layout.")
    parser.add_argument("out_dir", type=Path, help="output folder (created)")
    parser.add_argument("--count", type=int, required=True, help="number of patients (two jaws each)")
    parser.add_argument("--vertices", type=int, default=20000, help="vertices per jaw (default 20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        ids = write_dataset(args.out_dir, args.count, args.vertices, args.seed, progress=not args.quiet)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"wrote {2 * len(ids)} scans of {len(ids)} patients to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
