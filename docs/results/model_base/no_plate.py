"""Rule 1 of docs/results/model_base: no plate on the shared scans or the samples as they are. For every mesh, what
find_model_base finds and the largest coplanar patch it would see with no area threshold (its thresholds set to 0
here, for the margin): one line per scan, then the largest.

    python docs/results/model_base/no_plate.py > docs/results/model_base/no_plate.txt
"""
from pathlib import Path

from pointmamba.data import model_base
from pointmamba.data.mesh import read_obj

ROOT = Path(__file__).resolve().parents[3]
meshes = sorted((ROOT.parent / "shared" / "data").glob("*/*/*.obj")) + sorted((ROOT / "data" / "samples").glob("*/*.obj"))
rows = []
for path in meshes:
    v, f = read_obj(path)[:2]
    found = model_base.find_model_base(v, f)
    saved = model_base.MIN_AREA_MM2, model_base.MIN_SHARE
    model_base.MIN_AREA_MM2, model_base.MIN_SHARE = 0.0, 0.0
    try:
        patch = model_base.find_model_base(v, f)
    finally:
        model_base.MIN_AREA_MM2, model_base.MIN_SHARE = saved
    rows.append((path.stem, found is not None, patch.area_mm2 if patch is not None else 0.0))
    print(f"{path.stem} plate={found is not None} largest_coplanar_patch_mm2={rows[-1][2]:.2f}", flush=True)
print(f"# {len(rows)} meshes, plates found: {sum(r[1] for r in rows)}, largest coplanar patch: "
      f"{max(r[2] for r in rows):.2f} mm^2 ({max(rows, key=lambda r: r[2])[0]})")
