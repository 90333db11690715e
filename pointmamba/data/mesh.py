"""Mesh files and geometry: OBJ, PLY and STL readers, OBJ and coloured-PLY writers, normals, transforms.

Vertices keep their file order everywhere (Teeth3DS labels are per vertex in OBJ order). Readers are
vectorised: a 250k-vertex OBJ parses in about half a second on one core.
"""
from __future__ import annotations

import re
import warnings
from os import PathLike
from pathlib import Path

import numpy as np

from ..utils.atomic_file import atomic_write, atomic_writer
from .errors import ScanFormatError, ScanWarning
from .integrity import check_complete, check_one_surface

MESH_SUFFIXES = (".obj", ".ply", ".stl")


def rotate(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``points @ matrix.T`` for (N, 3) points and a 3x3 matrix, in the points' dtype.

    Written out per column: BLAS's (N, 3) x (3, 3) product is 10-40x slower on busy machines (thread
    start-up and contention for a tiny inner dimension).
    """
    m = np.asarray(matrix).astype(points.dtype, copy=False)
    return points[:, 0:1] * m[:, 0] + points[:, 1:2] * m[:, 1] + points[:, 2:3] * m[:, 2]


def apply_transform(points: np.ndarray, transform: np.ndarray, direction: bool = False) -> np.ndarray:
    """Map (N, 3) points by a 4x4 transform; ``direction=True`` applies the rotation part only."""
    transform = np.asarray(transform)
    out = rotate(points, transform[:3, :3])
    if not direction:
        out = out + transform[:3, 3].astype(out.dtype)
    return out


def face_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unnormalised face normals (F, 3): cross products, length = 2 x triangle area."""
    # per coordinate and per corner, on contiguous columns: the same products as np.cross of the edge
    # vectors, bit for bit, in half its time (400k faces: 0.07 s -> 0.04 s; it runs six times a scan)
    x, y, z = np.ascontiguousarray(np.asarray(vertices).T)
    a, b, c = np.ascontiguousarray(np.asarray(faces).T)
    ax, ay, az = x[a], y[a], z[a]
    ux, uy, uz = x[b] - ax, y[b] - ay, z[b] - az
    vx, vy, vz = x[c] - ax, y[c] - ay, z[c] - az
    return np.stack([uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx], 1)


def face_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Each face's area (F,), float64 (half the length of its :func:`face_normals`)."""
    cross = face_normals(np.asarray(vertices, dtype=np.float64), faces)
    return np.sqrt(np.einsum("ij,ij->i", cross, cross)) / 2


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted unit vertex normals (V, 3) float64, following the face winding.

    A vertex in no face (or only in zero-area faces) gets the zero vector.
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    fn = face_normals(vertices, faces)
    idx = faces.reshape(-1)
    n = np.empty((len(vertices), 3))
    for k in range(3):  # bincount is many times faster than np.add.at
        n[:, k] = np.bincount(idx, weights=np.repeat(fn[:, k], 3), minlength=len(vertices))
    length = np.linalg.norm(n, axis=1, keepdims=True)
    return np.divide(n, length, out=np.zeros_like(n), where=length > 0)


def vertex_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """A third of the area of the faces around each vertex (V,): the vertex's share of the surface."""
    area = np.linalg.norm(face_normals(np.asarray(vertices, dtype=np.float64), faces), axis=1) / 6.0
    return np.bincount(faces.reshape(-1), weights=np.repeat(area, 3), minlength=len(vertices))


# ---------------------------------------------------------------------------------------------- checks
MAX_COORDINATE = 1e12
"""Largest coordinate accepted (a scan a million km from its origin, in mm, is no scan)."""


def mesh_edges(faces: np.ndarray, num_vertices: int | None = None) -> np.ndarray:
    """Unique undirected edges (E, 2) of a triangle mesh, smaller index first, sorted.

    Deduplicated as a sparse adjacency matrix (a counting sort by the first vertex, then each vertex's
    few neighbours): no sort of all 3F half-edges (``np.unique(axis=0)`` took 1.4 s for 400k faces,
    this 0.05 s)."""
    from scipy.sparse import csr_matrix

    f = np.asarray(faces, dtype=np.int64)
    if f.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    n = int(f.max()) + 1 if num_vertices is None else int(num_vertices)
    a, b = f.T.reshape(-1), f[:, [1, 2, 0]].T.reshape(-1)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    adjacency = csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (lo[keep], hi[keep])), shape=(n, n))
    adjacency.sum_duplicates()  # sorts each row's columns and merges repeats
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(adjacency.indptr))
    return np.stack([rows, adjacency.indices.astype(np.int64)], 1)


def edge_tally(faces: np.ndarray, num_vertices: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each undirected edge of the faces as (smaller index, larger index) in two arrays (E,), with how many faces run
    it (E,) and how many of those run it from the smaller index to the larger (E,): a sparse counting sort of the
    half-edges, no sort. A degenerate face's collapsed edge (both ends one vertex) is tallied as any other."""
    from scipy.sparse import csr_matrix

    f = np.asarray(faces, dtype=np.int64)
    a, b = f.T.reshape(-1), f[:, [1, 2, 0]].T.reshape(-1)
    # each half-edge adds 1 to its edge's count and 2^16 where it runs from the smaller index to the larger (int32:
    # exact while an edge has fewer than 2^15 faces)
    tally = csr_matrix((1 + (a < b).astype(np.int32) * 65536, (np.minimum(a, b), np.maximum(a, b))),
                       shape=(num_vertices, num_vertices))
    tally.sum_duplicates()
    rows = np.repeat(np.arange(num_vertices, dtype=np.int64), np.diff(tally.indptr))
    return rows, tally.indices, tally.data & 0xFFFF, tally.data >> 16


def rim_edges(faces: np.ndarray, num_vertices: int) -> np.ndarray:
    """(E, 2) the mesh's edges that belong to exactly one face (its open rim), smaller index first."""
    rows, cols, count, _ = edge_tally(faces, num_vertices)
    once = count == 1
    return np.stack([rows[once], cols[once].astype(np.int64)], 1)


def subdivide(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each triangle into four through its edges' midpoints: (vertices, faces, parents). The V old vertices
    come first, unchanged, then one per edge; ``parents`` (E, 2) are each new vertex's two ends. The surface
    stays the same, only denser: a stand-in for a full-resolution scan of a decimated one."""
    v = np.asarray(vertices)
    f = np.asarray(faces, dtype=np.int64)
    edges = mesh_edges(f, len(v))  # sorted by (first, second): a key search finds each face edge's row
    key = edges[:, 0] * len(v) + edges[:, 1]

    def mid(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return len(v) + np.searchsorted(key, np.minimum(a, b) * len(v) + np.maximum(a, b))

    a, b, c = f.T
    ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
    new_faces = np.concatenate([np.stack(t, 1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))])
    return np.concatenate([v, (v[edges[:, 0]] + v[edges[:, 1]]) / 2]), new_faces, edges


DEGENERATE_AREA = 1e-6
"""A mesh whose faces cover at most this times its bounding box's largest side squared has no surface (its
vertices lie on a line or in one point, up to the rounding of a text file): nothing to segment, and its pose
cannot be found. A jaw scan covers about half its side squared or more."""


def mesh_arrays(vertices: object, faces: object, what: str | PathLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (float64) and faces (int64) from the arrays (or lists) a caller of the API gives; raise
    :class:`ScanFormatError` for coordinates that are not real numbers (strings, complex numbers, objects
    would be converted silently, or lose their imaginary part) and faces that are not integer indices
    (an unsigned index beyond int64 is shown as given, not wrapped round to a negative one)."""
    v, f = np.asarray(vertices), np.asarray(faces)
    if v.dtype.kind not in "iuf":
        raise ScanFormatError(what, "vertices", f"coordinates must be real numbers, got {v.dtype} values")
    if f.size and f.dtype.kind not in "iu":
        raise ScanFormatError(what, "faces", f"faces must be integer vertex indices, got {f.dtype}")
    if f.size and f.dtype.kind == "u" and int(f.max()) > np.iinfo(np.int64).max:
        row = int(np.flatnonzero((f > np.iinfo(np.int64).max).any(-1))[0]) if f.ndim == 2 else 0
        raise ScanFormatError(what, "faces", f"face {row} (0-based) has vertex index {int(f.max())}: out of "
                                             f"range, the mesh has {len(v)} vertices")
    return v.astype(np.float64), f.astype(np.int64)


def check_mesh(vertices: np.ndarray, faces: np.ndarray, path: str | PathLike | None) -> None:
    """Raise :class:`ScanFormatError` for an empty mesh, non-finite coordinates, bad face indices or a
    mesh without surface (all vertices in one point or on one line)."""
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise ScanFormatError(path, "vertices", f"expected (V, 3) coordinates, got shape {vertices.shape}")
    if len(vertices) == 0:
        raise ScanFormatError(path, "vertices", "empty mesh: no vertices")
    if faces.ndim != 2 or faces.shape[1] != 3:
        raise ScanFormatError(path, "faces", f"expected (F, 3) triangles, got shape {faces.shape}")
    if len(faces) == 0:
        raise ScanFormatError(path, "faces", f"empty mesh: {len(vertices)} vertices but no faces")
    finite = np.isfinite(vertices).all(1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ScanFormatError(path, "vertices", f"{len(bad)} vertex(es) with NaN or inf coordinates, first at "
                                                f"vertex {bad[0]} (0-based): {vertices[bad[0]].tolist()}")
    huge = np.abs(vertices).max(1) > MAX_COORDINATE
    if huge.any():  # beyond it even float64 keeps no 0.001 mm; 1e39 also overflows float32 (inf)
        bad = np.flatnonzero(huge)
        raise ScanFormatError(path, "vertices", f"{len(bad)} vertex(es) beyond +-{MAX_COORDINATE:g}, first at vertex "
                                                f"{bad[0]} (0-based): {vertices[bad[0]].tolist()}")
    lo, hi = faces.min(), faces.max()
    if lo < 0 or hi >= len(vertices):
        row = int(np.flatnonzero((faces < 0).any(1) | (faces >= len(vertices)).any(1))[0])
        raise ScanFormatError(path, "faces", f"face {row} (0-based) has vertex index "
                                             f"{faces[row].tolist()} (0-based) out of range: the mesh has "
                                             f"{len(vertices)} vertices")
    side = float(np.ptp(vertices, axis=0).max())
    area = float(np.linalg.norm(face_normals(np.asarray(vertices, dtype=np.float64), faces), axis=1).sum()) / 2
    if not area > DEGENERATE_AREA * side * side:
        spread = np.linalg.svd(vertices - vertices.mean(0), compute_uv=False)  # along the principal axes
        dims = int((spread > 1e-4 * spread[0]).sum()) if side > 0 else 0
        shape = {0: "all its vertices are one point", 1: "its vertices lie on one line"}.get(dims, "every face has zero area")
        raise ScanFormatError(path, "faces", f"degenerate mesh: {shape} ({len(vertices)} vertices, "
                                             f"{len(faces)} faces, no surface area): not a scan")


def _fan(polygons: list[list[int]]) -> np.ndarray:
    """Triangulate polygons (lists of vertex indices) as fans around their first vertex."""
    tris = [(p[0], p[i], p[i + 1]) for p in polygons for i in range(1, len(p) - 1)]
    return np.asarray(tris, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------------------------------- OBJ
def _fromstring(buf: bytes, dtype: type) -> np.ndarray | None:
    """Whitespace-separated numbers -> 1-D array, or None where the text has something else in it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy only warns when it stops early at a bad token
            return np.fromstring(buf, sep=" ", dtype=dtype)  # fastest text-to-number path in numpy
    except (ValueError, DeprecationWarning):
        return None


_FACE_SEPARATORS = bytes.maketrans(b"/f", b"  ")
_V_SEPARATOR = bytes.maketrans(b"v", b" ")


def _line_counts(buf: bytes, chars: bytes) -> list[np.ndarray]:
    """For each byte in ``chars``: how often it occurs on each line of ``buf`` (numpy, no Python loop)."""
    arr = np.frombuffer(buf, np.uint8)
    bounds = np.concatenate([[0], np.flatnonzero(arr == 10) + 1, [len(arr) + 1]])
    return [np.diff(np.searchsorted(np.flatnonzero(arr == c), bounds)) for c in chars]


def _blocks(data: bytes) -> dict[bytes, tuple[bytes, int]]:
    """The ``v`` and ``f`` lines of an OBJ as one newline-separated buffer each (and their count).

    Usually each kind is one contiguous run of lines and is sliced out without a Python loop over lines.
    """
    arr = np.frombuffer(data, np.uint8)
    starts = np.concatenate([[0], np.flatnonzero(arr == 10) + 1])
    ends = np.append(starts[1:] - 1, len(arr))
    last = max(len(arr) - 1, 0)
    first = arr[np.minimum(starts, last)] if len(arr) else np.zeros(1, np.uint8)
    second = np.where(starts + 1 <= last, arr[np.minimum(starts + 1, last)], 0) if len(arr) else first
    out = {}
    for kind in (b"v", b"f"):
        idx = np.flatnonzero((first == kind[0]) & ((second == 32) | (second == 9)))
        if len(idx) == 0:
            out[kind] = (b"", 0)
        elif idx[-1] - idx[0] + 1 == len(idx):
            out[kind] = (data[starts[idx[0]]:ends[idx[-1]]], len(idx))
        else:
            out[kind] = (b"\n".join(data[a:b] for a, b in zip(starts[idx], ends[idx])), len(idx))
    return out


def _text_lines(data: bytes) -> bytes:
    """Text mesh bytes without a UTF-8 byte-order mark and with ``\\n`` line ends where the file has only
    ``\\r`` (classic Mac): the mark glued to the first ``v`` dropped that vertex, and CR-only lines read
    as one line with no faces."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data and b"\n" not in data:
        data = data.replace(b"\r", b"\n")
    return data


def read_obj(path: str | PathLike) -> tuple[np.ndarray, np.ndarray]:
    """OBJ ``v`` and ``f`` lines -> vertices (V, 3) float64, faces (F, 3) int64 (0-based).

    ``f`` entries may be ``a``, ``a/t``, ``a//n`` or ``a/t/n``; polygons are fan-triangulated;
    ``vn``/``vt``/groups/materials are ignored; extra ``v`` columns (vertex colours) are ignored.
    """
    data = _text_lines(Path(path).read_bytes())
    if data and not data.endswith(b"\n"):
        last = data.rsplit(b"\n", 1)[-1]
        if last[:2] in (b"v ", b"f ", b"v\t", b"f\t"):
            warnings.warn(ScanWarning(f"{path}: the file ends without a newline, in the middle of a "
                                      f"{'face' if last[:1] == b'f' else 'vertex'} line ({last[:60].decode(errors='replace')!r}): "
                                      "it may be cut short"), stacklevel=2)
    blocks = _blocks(data)
    vbuf, nv = blocks[b"v"]
    fbuf, nf = blocks[b"f"]
    # Fast path: single-spaced lines of one shape, parsed in one numpy call. A line with s spaces (and
    # its 'v' the only letter v) holds at most s numbers, so "total == lines x s" proves every line has
    # exactly s; anything else takes the per-line path, which reports the bad line.
    vertices = None
    if nv and b"\t" not in vbuf and vbuf.count(b"v") == nv:
        (spaces,) = _line_counts(vbuf, b" ")
        s = int(spaces[0])
        if s >= 3 and (spaces == s).all():
            flat = _fromstring(vbuf.translate(_V_SEPARATOR), np.float64)
            if flat is not None and len(flat) == s * nv:
                vertices = flat.reshape(nv, s)[:, :3].copy()
    if vertices is None:
        vertices = np.empty((nv, 3))
        for i, ln in enumerate(vbuf.split(b"\n") if nv else []):
            tok = ln.split()[1:]
            try:
                if len(tok) < 3:
                    raise ValueError
                vertices[i] = [float(t) for t in tok[:3]]
            except ValueError:
                raise ScanFormatError(path, "v", f"vertex line {i + 1} is not 3 numbers: {ln[:80]!r}") from None
    faces = None
    fbuf2 = fbuf.replace(b"//", b"/")  # "a//n" -> "a/n": no empty fields, so each separator adds one number
    if nf and b"\t" not in fbuf2 and fbuf2.count(b"f") == nf:
        spaces, slashes = _line_counts(fbuf2, b" /")
        s, d = int(spaces[0]), int(slashes[0])
        if s >= 3 and (s + d) % s == 0 and (spaces == s).all() and (slashes == d).all():
            flat = _fromstring(fbuf2.translate(_FACE_SEPARATORS), np.int64)
            if flat is not None and len(flat) and flat.max() == np.iinfo(np.int64).max:
                flat = None  # numpy saturates an index beyond int64: the per-line path reports it exactly
            if flat is not None and len(flat) == (s + d) * nf:
                corners = flat.reshape(nf, s, (s + d) // s)[:, :, 0]
                idx = np.arange(1, s - 1)
                faces = np.stack([np.repeat(corners[:, :1], len(idx), 1), corners[:, idx], corners[:, idx + 1]], -1)
                faces = faces.reshape(-1, 3)
    if faces is None:
        polygons = []
        for i, ln in enumerate(fbuf.split(b"\n") if nf else []):
            try:
                corners = [int(c.split(b"/")[0]) for c in ln.split()[1:]]
            except ValueError:
                raise ScanFormatError(path, "f", f"face line {i + 1} has a non-integer vertex index: "
                                                 f"{ln[:80]!r}") from None
            if len(corners) < 3:
                raise ScanFormatError(path, "f", f"face line {i + 1} has {len(corners)} vertices (needs >= 3)")
            if max(corners) > len(vertices):  # Python's exact integers: 2^63 is shown as written, not wrapped
                raise ScanFormatError(path, "faces", f"face line {i + 1} has vertex index {max(corners)} (1-based, as "
                                                     f"in the file) out of range: the mesh has {len(vertices)} vertices")
            polygons.append(corners)
        faces = _fan(polygons)
    if len(faces) and faces.min() <= 0:
        row = int(np.flatnonzero((faces <= 0).any(1))[0])
        raise ScanFormatError(path, "f", f"face {row} (0-based) has vertex index {faces[row].tolist()}: OBJ "
                                         "indices start at 1 (relative, negative indices are not supported)")
    return vertices, faces - 1


def write_obj(path: str | PathLike, vertices: np.ndarray, faces: np.ndarray, precision: int = 6) -> Path:
    """Write ``v x y z`` lines with ``%.{precision}f`` and 1-based ``f a b c`` lines (atomic)."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64) + 1
    vfmt = f"v %.{precision}f %.{precision}f %.{precision}f\n"
    text = (vfmt * len(vertices)) % tuple(vertices.ravel().tolist())
    text += ("f %d %d %d\n" * len(faces)) % tuple(faces.ravel().tolist())
    return atomic_write(path, text.encode())


# ---------------------------------------------------------------------------------------------- PLY
_PLY_SIZES = {"char": 1, "int8": 1, "uchar": 1, "uint8": 1, "short": 2, "int16": 2, "ushort": 2, "uint16": 2,
              "int": 4, "int32": 4, "uint": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}


def check_ply_counts(path: str | PathLike) -> None:
    """Raise :class:`ScanFormatError` when the element counts a PLY header declares cannot fit in the bytes
    after it (each element takes at least its fixed-size properties and list counts in binary, two
    characters per property in ASCII). Checked before plyfile allocates: a 195 KB file declaring 2^31 faces
    took 150 s and 17 GB before failing. Headers this check cannot read are left to plyfile."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    end = head.find(b"end_header")
    newline = head.find(b"\n", end)
    if not head.startswith(b"ply") or end < 0 or newline < 0:
        return
    body = path.stat().st_size - (newline + 1)
    ascii_format = b"format ascii" in head[:end]
    elements: list[list] = []  # [name, declared count, least bytes per element]
    for line in head[:end].decode("ascii", "replace").splitlines():
        tok = line.split()
        if len(tok) == 3 and tok[0] == "element":
            try:
                elements.append([tok[1], int(tok[2]), 0])
            except ValueError:
                return
        elif len(tok) >= 3 and tok[0] == "property" and elements:
            size = _PLY_SIZES.get(tok[2] if tok[1] == "list" else tok[1], 1)
            elements[-1][2] += 2 if ascii_format else size
    need = 0
    for name, count, least in elements:
        need += max(count, 0) * least
        if count < 0 or need > body:
            raise ScanFormatError(path, name, f"the header declares {count:,} {name} elements (at least {count * least:,} "
                                              f"bytes) but {max(body, 0):,} bytes follow it: the file is cut short or "
                                              "its header is damaged")


def read_ply(path: str | PathLike) -> tuple[np.ndarray, np.ndarray]:
    """PLY (ASCII or binary, via plyfile) -> vertices (V, 3) float64, faces (F, 3) int64."""
    from plyfile import PlyData

    check_ply_counts(path)
    try:
        ply = PlyData.read(str(path))
    except Exception as exc:  # plyfile raises several types for a broken header or body
        raise ScanFormatError(path, "ply", f"cannot parse PLY: {exc}") from None
    names = [e.name for e in ply.elements]
    if "vertex" not in names:
        raise ScanFormatError(path, "vertex", f"no 'vertex' element (elements: {names})")
    vert = ply["vertex"].data
    missing = [c for c in "xyz" if c not in vert.dtype.names]
    if missing:
        raise ScanFormatError(path, "vertex", f"missing propert{'y' if len(missing) == 1 else 'ies'} {missing}")
    vertices = np.stack([np.asarray(vert[c], dtype=np.float64) for c in "xyz"], 1)
    if "face" not in names:
        return vertices, np.zeros((0, 3), dtype=np.int64)
    face = ply["face"].data
    key = next((k for k in ("vertex_indices", "vertex_index") if k in face.dtype.names), None)
    if key is None:
        raise ScanFormatError(path, "face", f"no 'vertex_indices' property (has {face.dtype.names})")
    col = face[key]
    if col.dtype != object and col.ndim == 2:
        polys = col.astype(np.int64)
    else:
        lengths = np.fromiter((len(p) for p in col), dtype=np.int64, count=len(col))
        if len(col) and (lengths == 3).all():
            polys = np.stack(col).astype(np.int64)
        else:
            if (lengths < 3).any():
                raise ScanFormatError(path, "face", f"face {int(np.argmax(lengths < 3))} has fewer than 3 vertices")
            return vertices, _fan([list(map(int, p)) for p in col])
    if polys.shape[1] == 3:
        return vertices, polys.reshape(-1, 3)
    return vertices, _fan(polys.tolist())


_PLY_TYPES = {"f4": "float", "u1": "uchar", "i4": "int"}


def write_ply(path: str | PathLike, vertices: np.ndarray, faces: np.ndarray | None = None,
              colors: np.ndarray | None = None, labels: np.ndarray | None = None, comment: str | None = None) -> Path:
    """Binary (little-endian) PLY with optional per-vertex ``colors`` ((V, 3) uint8, or floats in [0, 1])
    and an integer ``label`` property (e.g. FDI numbers); viewers such as MeshLab show the colours.
    ``comment``: a header line (``comment ...``), one line of ASCII.

    Written from numpy structured arrays, one ``tobytes`` per element: the same bytes plyfile wrote,
    without its per-face Python loop (4.4 s -> 0.02 s for 400k faces).
    """
    vertices = np.asarray(vertices, dtype=np.float32)
    fields = [("x", "f4"), ("y", "f4"), ("z", "f4")]
    if colors is not None:
        colors = np.asarray(colors)
        if colors.shape != (len(vertices), 3):
            raise ValueError(f"write_ply: colors must be (V={len(vertices)}, 3), got {colors.shape}")
        if np.issubdtype(colors.dtype, np.floating):
            colors = np.clip(np.round(colors * 255), 0, 255)
        colors = colors.astype(np.uint8)
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (len(vertices),):
            raise ValueError(f"write_ply: labels must be (V={len(vertices)},), got {labels.shape}")
        fields += [("label", "i4")]
    vert = np.empty(len(vertices), dtype=[(name, "<" + kind) for name, kind in fields])
    vert["x"], vert["y"], vert["z"] = vertices.T
    if colors is not None:
        vert["red"], vert["green"], vert["blue"] = colors.T
    if labels is not None:
        vert["label"] = labels
    header = ["ply", "format binary_little_endian 1.0"]
    if comment is not None:
        if not comment.startswith("comment ") or not comment.isascii() or not comment.isprintable():
            raise ValueError(f"write_ply: comment must be one printable ASCII line 'comment ...', got {comment!r}")
        header.append(comment)
    header.append(f"element vertex {len(vert)}")
    header += [f"property {_PLY_TYPES[kind]} {name}" for name, kind in fields]
    body = [vert.tobytes()]
    if faces is not None:
        faces = np.asarray(faces)
        if faces.ndim != 2 or faces.shape[1] != 3:
            raise ValueError(f"write_ply: faces must be (F, 3), got {faces.shape}")
        face = np.empty(len(faces), dtype=[("n", "u1"), ("v", "<i4", (3,))])  # list length, then the indices
        face["n"] = 3
        face["v"] = faces
        header += [f"element face {len(face)}", "property list uchar int vertex_indices"]
        body.append(face.tobytes())
    with atomic_writer(path) as fh:
        fh.write(("\n".join(header) + "\nend_header\n").encode("ascii"))
        for part in body:
            fh.write(part)
    return Path(path)


# ---------------------------------------------------------------------------------------------- STL
_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("v", "<f4", (3, 3)), ("attr", "<u2")])
_ASCII_VERTEX = re.compile(rb"vertex\s+(\S+)\s+(\S+)\s+(\S+)")


def read_stl(path: str | PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Binary or ASCII STL -> vertices (V, 3) float64, faces (F, 3) int64.

    STL stores three corners per triangle; bit-identical corners are merged into one vertex (numbered in
    order of first appearance), so the result is a connected mesh with shared vertices.
    """
    data = Path(path).read_bytes()
    binary = len(data) >= 84 and len(data) == 84 + 50 * int(np.frombuffer(data, "<u4", 1, 80)[0])
    if binary:
        n = int(np.frombuffer(data, "<u4", 1, 80)[0])
        corners = np.frombuffer(data, _STL_RECORD, n, 84)["v"].reshape(-1, 3).astype(np.float64)
    elif _text_lines(data).lstrip()[:5].lower() == b"solid":
        data = _text_lines(data)
        found = _ASCII_VERTEX.findall(data)
        try:
            corners = np.array(found, dtype=np.bytes_).astype(np.float64).reshape(-1, 3)
        except ValueError:
            raise ScanFormatError(path, "vertex", "ASCII STL has a non-numeric vertex coordinate") from None
        if len(corners) % 3:
            raise ScanFormatError(path, "vertex", f"ASCII STL has {len(corners)} vertex lines, not 3 per facet")
        facets = len(re.findall(rb"\bendfacet\b", data))
        if facets != len(corners) // 3:
            raise ScanFormatError(path, "facet", f"{facets} facets but {len(corners)} vertex lines (expected 3 each)")
    else:
        raise ScanFormatError(path, "stl", f"neither binary STL ({len(data)} bytes does not match 84 + 50 x "
                                           "triangle count) nor ASCII STL (does not start with 'solid')")
    if len(corners) == 0:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    unique, first, inverse = np.unique(corners, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return unique[order], rank[inverse.reshape(-1)].reshape(-1, 3)


def write_stl(path: str | PathLike, vertices: np.ndarray, faces: np.ndarray, ascii: bool = False,
              header: bytes = b"pointmamba binary STL") -> Path:
    """Write a binary (default) or ASCII STL (mostly for tests and interchange); ``header``: the first bytes
    of a binary STL's 80-byte header (never ``solid``, which readers take for ASCII)."""
    tri = np.asarray(vertices, dtype=np.float64)[np.asarray(faces)]
    normals = face_normals(np.asarray(vertices, dtype=np.float64), np.asarray(faces))
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-30)
    if ascii:
        parts = ["solid scan\n"]
        for n, t in zip(normals.tolist(), tri.tolist()):
            parts.append("facet normal %r %r %r\n outer loop\n" % tuple(n))
            parts.extend("  vertex %r %r %r\n" % tuple(c) for c in t)
            parts.append(" endloop\nendfacet\n")
        parts.append("endsolid scan\n")
        return atomic_write(path, "".join(parts).encode())
    rec = np.zeros(len(tri), dtype=_STL_RECORD)
    rec["normal"], rec["v"] = normals, tri
    if len(header) > 80 or header[:5].lower() == b"solid":
        raise ValueError(f"write_stl: header must be at most 80 bytes and not start with 'solid', got {header!r}")
    head = header.ljust(80, b" ") + np.uint32(len(tri)).tobytes()
    return atomic_write(path, head + rec.tobytes())


# ---------------------------------------------------------------------------------------------- misc
def read_mesh(path: str | PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read an OBJ, PLY or STL file (by suffix) and check it (non-empty, finite, faces in range, no sign of
    lost faces; warnings for a double-sided mesh or two jaws in one file: see :mod:`pointmamba.data.integrity`)."""
    path = Path(path)
    if not path.is_file():
        if path.exists():  # a FIFO would block the reader; a folder or a device is no mesh either
            raise ScanFormatError(path, "file", "not a regular file (a folder, FIFO, socket or device)")
        raise FileNotFoundError(f"{path}: mesh file not found")
    suffix = path.suffix.lower()
    readers = {".obj": read_obj, ".ply": read_ply, ".stl": read_stl}
    if suffix not in readers:
        raise ScanFormatError(path, "format", f"unknown mesh suffix {suffix!r}; supported: {MESH_SUFFIXES}")
    vertices, faces = readers[suffix](path)
    check_mesh(vertices, faces, path)
    check_complete(vertices, faces, path)
    check_one_surface(vertices, faces, path)
    return vertices, faces
