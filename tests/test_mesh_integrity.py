"""Signs of a truncated mesh: vertices in no face, few faces, a last line cut mid-number; absurd coordinates."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pointmamba.data import ScanFormatError, load_scan, read_mesh, write_obj
from pointmamba.data.errors import ScanWarning


def obj_lines(scans_dir: Path) -> list[bytes]:
    return (scans_dir / "MSN001" / "MSN001_lower.obj").read_bytes().split(b"\n")


@pytest.mark.parametrize("kept", [0.5, 0.97])
def test_obj_cut_at_a_line_boundary_in_the_faces_is_refused(scans_dir: Path, tmp_path: Path, kept: float) -> None:
    lines = obj_lines(scans_dir)
    faces = [i for i, ln in enumerate(lines) if ln.startswith(b"f ")]
    cut = tmp_path / "MSN001_lower.obj"
    cut.write_bytes(b"\n".join(lines[: faces[int(len(faces) * kept)]]) + b"\n")
    with pytest.raises(ScanFormatError, match=r"MSN001_lower.obj: faces: \d+ of 5467 vertices .* are in no face.*truncated"):
        load_scan(cut)


def test_faces_lost_out_of_order_and_a_cut_last_line_warn(scans_dir: Path, tmp_path: Path) -> None:
    v, f = read_mesh(scans_dir / "MSN001" / "MSN001_lower.obj")
    keep = np.random.default_rng(0).permutation(len(f))[: int(0.5 * len(f))]  # every vertex still in a face
    used = np.unique(f[keep])
    remap = np.full(len(v), -1)
    remap[used] = np.arange(len(used))
    write_obj(tmp_path / "sparse.obj", v[used], remap[f[keep]])
    with pytest.warns(ScanWarning, match=r"sparse.obj: faces: only \d+ faces for \d+ vertices"):
        read_mesh(tmp_path / "sparse.obj")

    data = (scans_dir / "MSN001" / "MSN001_lower.obj").read_bytes().rstrip(b"\n")
    (tmp_path / "noeol.obj").write_bytes(data[:-2])  # the last face line loses two digits
    with pytest.warns(ScanWarning, match=r"noeol.obj: the file ends without a newline, in the middle of a face line"):
        read_mesh(tmp_path / "noeol.obj")


def test_complete_meshes_raise_nothing(scans_dir: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScanWarning)
        for path in sorted(scans_dir.glob("MSN00[1-3]/*.obj")):
            read_mesh(path)


def test_absurd_coordinates_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "big_upper.obj").write_text("v 0 0 0\nv 1e39 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(ScanFormatError, match=r"big_upper.obj: vertices: 1 vertex\(es\) beyond \+-1e\+12, first at vertex 1"):
        read_mesh(tmp_path / "big_upper.obj")
