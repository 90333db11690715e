#!/usr/bin/env python3
"""A scan exported as a model: does the shipped model segment it as it segments the scan? (``infer.model_base``)

    python -m pointmamba.research.model_base_check SCAN.obj [...] --out DIR [--checkpoint CKPT] [--subdivide]

Each labelled scan is given a model's base (:func:`with_model_base`: walls from its open rim straight down to
4 mm below its lowest point, in the canonical frame of its labels, closed by a flat plate) and segmented as
tools/predict.py does (the Segmenter, the jaw given): as it is, on the base with ``infer.model_base`` off and
on, and on the walls alone (no plate). Per-scan mIoU on the scan's own vertices; DIR/per_scan.csv and
DIR/summary.md. ``--subdivide`` splits every triangle of the based mesh in four first (a plate with vertices of
its own, as a remeshed base has). Without scans: the 29 shared scans of docs/results/model_base.
"""
from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

SHARED = Path(os.environ.get("POINTMAMBA_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
DEFAULT_PATIENTS = ([f"iosseg/IOS{k:03d}" for k in (2, 9, 18, 25, 36, 45, 57, 72, 82, 94)]
                    + [f"scans/MSN{k:03d}" for k in (2, 7, 12, 17, 22)])
"""The probe's patients: every 7th 3D-IOSSeg patient (10) and five MSN patients; each jaw their folder holds (29)."""


def boundary_loop(faces: np.ndarray) -> np.ndarray:
    """The longest closed loop of the mesh's boundary edges, wound as the face beside its first edge is (vertex
    ids; a vertex where the rim touches itself may appear twice). Walked over undirected edges: a scan whose
    faces are not all wound alike still has its rim."""
    from collections import defaultdict

    f = np.asarray(faces, dtype=np.int64)
    half = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    _, inverse, count = np.unique(np.sort(half, 1), axis=0, return_inverse=True, return_counts=True)
    rim = half[count[inverse.reshape(-1)] % 2 == 1]  # an edge of three faces (a fold in the scan) is on the rim too
    rim = np.unique(np.sort(rim, 1), axis=0) if (count == 3).any() else rim
    around: dict[int, list[int]] = defaultdict(list)
    for a, b in rim.tolist():
        around[a].append(b)
        around[b].append(a)
    best: list[int] = []
    for start in list(around):
        while around[start]:  # each walk uses up its edges: every loop is found once
            loop, v = [start], around[start].pop()
            around[v].remove(start)
            while v != start and around[v]:
                loop.append(v)
                nxt = around[v].pop()
                around[nxt].remove(v)
                v = nxt
            if v == start and len(loop) > len(best):
                best = loop
    if len(best) < 3:
        raise ValueError("with_model_base: the mesh has no closed open rim to stand on a base")
    wound = {(a, b) for a, b in half[count[inverse.reshape(-1)] == 1].tolist()}
    forward = sum((a, b) in wound for a, b in zip(best, best[1:] + best[:1]))
    return np.asarray(best if 2 * forward >= len(best) else best[::-1])


def with_fan(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mesh with its longest open rim closed by a fan of triangles to the rim's centre, as a watertight export
    fills the hole (one new vertex, last; the new faces last, wound as the rim's faces are)."""
    v = np.asarray(vertices, dtype=np.float64)
    loop = boundary_loop(faces)
    fan = np.stack([np.roll(loop, -1), loop, np.full(len(loop), len(v))], 1)
    return np.vstack([v, v[loop].mean(0)]), np.vstack([np.asarray(faces, dtype=np.int64), fan])


def with_model_base(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray, depth: float = 4.0,
                    rings: int = 4, plate: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """(vertices, faces, plate faces) of the scan on a model's base: walls from its longest open rim straight
    down (``rings`` rows of faces) to ``depth`` mm below its lowest point along the occlusal axis of its
    ``labels``' canonical frame, closed by a flat plate (``plate``); the scan's own vertices and faces come
    first and unchanged, the plate's faces last."""
    from matplotlib.path import Path as Polygon
    from scipy.spatial import Delaunay

    from ..data.mesh import apply_transform
    from ..data.pose import canonical_pose

    v = np.asarray(vertices, dtype=np.float64)
    transform = canonical_pose(v, faces, labels)
    aligned = apply_transform(v, transform)
    loop = boundary_loop(faces)
    bottom = aligned[:, 2].min() - depth
    new_points, new_faces, top, n = [aligned], [np.asarray(faces, dtype=np.int64)], loop, len(v)
    for r in range(1, rings + 1):
        ring = aligned[loop].copy()
        ring[:, 2] += (bottom - ring[:, 2]) * r / rings
        below = np.arange(n, n + len(loop))
        n += len(loop)
        new_points.append(ring)
        # a rim edge (a -> b) is wound a -> b by its face: the wall's faces run b -> a
        new_faces += [np.stack([np.roll(top, -1), top, below], 1), np.stack([np.roll(top, -1), below, np.roll(below, -1)], 1)]
        top = below
    plate_faces = np.zeros((0, 3), dtype=np.int64)
    if plate:
        outline = aligned[loop, :2]
        triangles = Delaunay(outline).simplices
        inside = Polygon(outline).contains_points(outline[triangles].mean(1))
        plate_faces = top[triangles[inside]]
        points = np.concatenate(new_points)
        up = np.cross(points[plate_faces[:, 1]] - points[plate_faces[:, 0]],
                      points[plate_faces[:, 2]] - points[plate_faces[:, 0]])[:, 2] > 0
        plate_faces = np.where(up[:, None], plate_faces[:, [0, 2, 1]], plate_faces)  # facing down, out of the model
        new_faces.append(plate_faces)
    back = np.linalg.inv(transform)
    return apply_transform(np.concatenate(new_points), back), np.concatenate(new_faces), len(plate_faces)


def probe_meshes(scans: list[Path] | None = None) -> Iterator[tuple[Path, np.ndarray, np.ndarray, np.ndarray, str]]:
    """Each probe scan (default: the 29 of :data:`DEFAULT_PATIENTS`) as (path, vertices float64, faces, reference
    FDI labels, jaw from its name), read one at a time."""
    from ..data.mesh import read_obj
    from ..data.teeth3ds import read_labels

    for path in scans or [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]:
        v, f = read_obj(path)[:2]
        yield (path, np.asarray(v, dtype=np.float64), f, read_labels(path.with_suffix(".json"), len(v)).labels,
               "upper" if "upper" in path.stem else "lower")


def dense_scan() -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of the probes' timing mesh: the shared MLEX001_upper subdivided once (201,287 vertices),
    as ``bench/predict.py`` makes its 200k scan."""
    from ..data.mesh import read_obj, subdivide

    v, f = read_obj(SHARED / "scans" / "MLEX001" / "MLEX001_upper.obj")[:2]
    return subdivide(v, f)[:2]


def best_seconds(fn: Callable[[], Any], repeats: int = 3) -> float:
    """The shortest wall time of ``repeats`` calls of ``fn()`` (the machines are shared: the best, not one)."""
    import time

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def probe_parser(description: str) -> argparse.ArgumentParser:
    """The arguments of a probe of exported meshes: scans (default: the 29 of :data:`DEFAULT_PATIENTS`), --out,
    --checkpoint."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("scans", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checkpoint", default=None)
    return parser


def probe_setup(args: argparse.Namespace, switch: str) -> tuple[list[Path], dict[bool, Any]]:
    """(the probe's scans, a Segmenter with the ``infer`` ``switch`` off and one with it on); DIR made."""
    from ..inference.segmenter import Segmenter

    scans = args.scans or [p for folder in DEFAULT_PATIENTS for p in sorted((SHARED / folder).glob("*.obj"))]
    args.out.mkdir(parents=True, exist_ok=True)
    return scans, {on: Segmenter(args.checkpoint, infer={switch: on}) for on in (False, True)}


def probe_miou(labels: np.ndarray, reference: np.ndarray, jaw: str) -> float:
    """A probe's per-scan mIoU: FDI ``labels`` against FDI ``reference`` (the same vertices) over the 17 classes of
    ``jaw``, as tools/test.py scores a scan."""
    from ..data import fdi_to_class
    from ..evaluation.metrics import ConfusionMatrix

    return ConfusionMatrix(17).update(fdi_to_class(labels, jaw, 17), fdi_to_class(reference, jaw, 17)).miou()


def main(argv: list[str] | None = None) -> None:
    from tqdm import tqdm

    from ..utils.atomic_file import write_csv

    from ..data.mesh import subdivide

    parser = probe_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--subdivide", action="store_true")
    args = parser.parse_args(argv)
    scans, segmenters = probe_setup(args, "model_base")
    rows = []
    for path, v, f, reference, jaw in tqdm(probe_meshes(scans), total=len(scans), desc="based scans"):
        based, based_faces, plate = with_model_base(v, f, reference)
        walls, walls_faces, _ = with_model_base(v, f, reference, plate=False)
        if args.subdivide:
            based, based_faces = subdivide(based, based_faces)[:2]  # the scan's vertices stay first
        row = {"scan": path.stem, "vertices": len(v), "plate_faces": plate}
        cases = {"plain": (v, f, True), "base_off": (based, based_faces, False), "base_on": (based, based_faces, True),
                 "walls": (walls, walls_faces, True)}
        for name, (vv, ff, on) in cases.items():
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = segmenters[on]((vv, ff), jaw=jaw, name=path.stem, units="mm")
            row[name] = round(probe_miou(result.labels[:len(v)], reference, jaw), 4)
            if name == "base_on":
                row["plate_found"] = "model_base" in result.meta
                row["warned"] = any("model's base" in str(w.message) for w in seen)
        rows.append(row)
    write_csv(args.out / "per_scan.csv", rows)
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("plain", "base_off", "base_on", "walls")}
    worst = min(r["base_on"] - r["plain"] for r in rows)
    lines = [f"# Based scans ({len(rows)}{', subdivided' if args.subdivide else ''})", "",
             "| | as it is | on a base, model_base off | on a base, model_base on | walls alone |", "|---|---|---|---|---|",
             f"| mean per-scan mIoU | {mean['plain']:.4f} | {mean['base_off']:.4f} | {mean['base_on']:.4f} | {mean['walls']:.4f} |",
             f"| scans more than 0.05 below as it is | - | {sum(r['base_off'] < r['plain'] - 0.05 for r in rows)} | "
             f"{sum(r['base_on'] < r['plain'] - 0.05 for r in rows)} | {sum(r['walls'] < r['plain'] - 0.05 for r in rows)} |",
             "", f"Plate found on {sum(r['plate_found'] for r in rows)} of {len(rows)}, warned on "
             f"{sum(r['warned'] for r in rows)}; the largest fall with it on: {worst:+.4f}."]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
