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


# ------------------------------------------------------------------------------ second round
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def sample(name: str = "MSN022_upper") -> tuple[np.ndarray, np.ndarray]:
    return read_mesh(SAMPLES / name.split("_")[0] / f"{name}.obj")


@pytest.mark.parametrize("text", [False, True])
def test_ply_declaring_more_elements_than_its_bytes_is_refused_before_allocating(tmp_path: Path, text: bool) -> None:
    """A 195 KB binary PLY declaring 2^31 faces took 150 s and 17 GB before failing. The declared counts
    are checked against the file size first: no allocation beyond the header's few KB (traced), and the
    error names the element and the count."""
    import re
    import tracemalloc

    from plyfile import PlyData, PlyElement

    v, f = sample()
    vert = np.array([tuple(p) for p in v.astype(np.float32)], dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    face = np.empty(len(f), dtype=[("vertex_indices", "i4", (3,))])
    face["vertex_indices"] = f
    good = tmp_path / "good.ply"
    PlyData([PlyElement.describe(vert, "vertex"), PlyElement.describe(face, "face")], text=text).write(str(good))
    assert read_mesh(good)[1].shape == f.shape  # an honest header reads as before
    for element, count in (("face", 2**31), ("vertex", 2**40)):
        data = re.sub(rb"element %s \d+" % element.encode(), b"element %s %d" % (element.encode(), count), good.read_bytes())
        bomb = tmp_path / f"{element}.ply"
        bomb.write_bytes(data)
        tracemalloc.start()
        try:
            with pytest.raises(ScanFormatError, match=rf"{element}.ply: {element}: the header declares {count:,} {element} "
                                                      r"elements \(at least [\d,]+ bytes\) but [\d,]+ bytes follow it"):
                read_mesh(bomb)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB allocated before the error"


def test_obj_with_a_byte_order_mark_or_cr_only_lines_reads_every_vertex(tmp_path: Path) -> None:
    """A UTF-8 BOM right before the first 'v' dropped that vertex (and the error blamed a face); CR-only
    line ends (classic Mac) read as one line: 'no faces'. Both now read exactly as the plain file."""
    path = SAMPLES / "MSN022" / "MSN022_upper.obj"
    v, f = read_mesh(path)
    data = path.read_bytes()
    for name, variant in (("bom", b"\xef\xbb\xbf" + data), ("cr", data.replace(b"\n", b"\r")),
                          ("bom_cr", b"\xef\xbb\xbf" + data.replace(b"\n", b"\r")), ("crlf", data.replace(b"\n", b"\r\n"))):
        (tmp_path / f"{name}.obj").write_bytes(variant)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScanWarning)
            v2, f2 = read_mesh(tmp_path / f"{name}.obj")
        assert np.array_equal(v2, v) and np.array_equal(f2, f), name
    write_obj(tmp_path / "s.obj", v, f)  # ASCII STL with a BOM is still ASCII STL
    from pointmamba.data.mesh import write_stl

    write_stl(tmp_path / "a.stl", v, f, ascii=True)
    (tmp_path / "b.stl").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "a.stl").read_bytes())
    assert read_mesh(tmp_path / "b.stl")[0].shape == read_mesh(tmp_path / "a.stl")[0].shape


def test_double_sided_mesh_and_two_jaws_in_one_file_are_warned_about(tmp_path: Path) -> None:
    """Both read cleanly and predicted far worse (the shipped model on MSN001_lower: accuracy 0.94; its
    double-sided copy, normals cancelled: 0.85; stacked with its upper jaw in one file: 0.53)."""
    v, f = sample("MSN022_upper")
    write_obj(tmp_path / "double.obj", v, np.concatenate([f, f[:, ::-1]]))
    lv, lf = sample("MSN021_lower")
    write_obj(tmp_path / "stacked.obj", np.concatenate([v, lv + [0, 0, 30]]), np.concatenate([f, lf + len(v)]))
    write_obj(tmp_path / "single.obj", v, f)
    for name, message in (("double", r"double.obj: faces: \d+ of \d+ faces \(50%\) repeat another face's three vertices, "
                                      r"\d+ of them with the opposite winding: a double-sided mesh"),
                          ("stacked", r"stacked.obj: faces: the mesh has 2 large separate parts \(\d+%, \d+% of the "
                                       r"vertices\): two jaws in one file\?")):
        with pytest.warns(ScanWarning, match=message):
            read_mesh(tmp_path / f"{name}.obj")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScanWarning)
        read_mesh(tmp_path / "single.obj")
        for name in ("MSN021_lower", "MSN022_upper", "MSN023_lower"):
            sample(name)


def test_repeated_faces_count_copies_and_windings() -> None:
    from pointmamba.data.integrity import repeated_faces

    f = np.array([[0, 1, 2], [2, 1, 0], [1, 2, 0], [3, 4, 5], [5, 4, 3], [6, 7, 8]])
    assert repeated_faces(f) == (3, 2)  # one same-winding copy (a rotation), two flipped
    assert repeated_faces(f[[0, 3, 5]]) == (0, 0)
