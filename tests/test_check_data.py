"""pointmamba-check-data: the shared scans pass (one reference known one tooth off is named); a mirrored copy
and a copy in cm are flagged."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from pointmamba.data import mirror_fdi, read_mesh, write_obj

from support.tools import run_tool


def test_shared_scans_pass_and_the_one_reference_known_off_is_named(scans_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_tool("check_data", scans_dir, "--out", tmp_path / "table.md")
    assert code == 0, out[-2000:] + err
    assert "49 scans: 48 ok, 1 with warnings, 0 failed" in out
    assert out.count("| ok (+") == 49  # the side check passes all
    # MSN023_upper's reference is one tooth off (docs/results/review_flag): its "14" is a canine, its "23" a premolar
    (row,) = [ln for ln in out.splitlines() if "| warn |" in ln]
    assert row.startswith("| MSN023_upper |") and "tooth 14 is shaped as a canine" in row
    assert "tooth 23 is shaped as a first premolar" in row
    assert (tmp_path / "table.md").read_text().strip() == out.strip()


def test_mirrored_copy_is_flagged_scan_by_scan(scans_dir: Path, tmp_path: Path) -> None:
    mirrored = tmp_path / "mirrored"
    for obj in sorted(scans_dir.glob("*/*.obj")):
        folder = mirrored / obj.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / obj.name).symlink_to(obj)
        doc = json.loads(obj.with_suffix(".json").read_text())
        doc["labels"] = mirror_fdi(np.array(doc["labels"])).tolist()  # left and right swapped
        (folder / obj.with_suffix(".json").name).write_text(json.dumps(doc))
    code, out, _ = run_tool("check_data", mirrored)
    assert code == 1
    assert "49 scans: 0 ok, 0 with warnings, 49 failed" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| MSN") or ln.startswith("| MLEX")]
    assert len(rows) == 49 and all("| mirrored (-" in r and "left/right swapped" in r for r in rows)


def test_wrong_units_and_bad_labels_are_flagged(scans_dir: Path, tmp_path: Path) -> None:
    src = scans_dir / "MSN001"
    (tmp_path / "MSN001").mkdir()
    v, f = read_mesh(src / "MSN001_upper.obj")
    write_obj(tmp_path / "MSN001" / "MSN001_upper.obj", v / 10, f)  # centimetres
    shutil.copy(src / "MSN001_upper.json", tmp_path / "MSN001")
    shutil.copy(src / "MSN001_lower.obj", tmp_path / "MSN001")
    doc = json.loads((src / "MSN001_lower.json").read_text())
    doc["labels"][5] = 11  # an upper tooth in a lower jaw
    (tmp_path / "MSN001" / "MSN001_lower.json").write_text(json.dumps(doc))
    code, out, _ = run_tool("check_data", tmp_path)
    assert code == 1 and "2 scans: 0 ok, 0 with warnings, 2 failed" in out
    assert "looks like cm, not mm" in out and "FDI number(s) [11] not valid for the lower jaw" in out
