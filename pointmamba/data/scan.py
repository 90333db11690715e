"""The scan (`Scan`: a jaw mesh with its labels), loading one with its labels, saving one in Teeth3DS layout."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from .errors import ScanFormatError
from .fdi import check_jaw
from .mesh import read_mesh, vertex_normals, write_obj
from .teeth3ds import check_fdi, instances_from_labels, read_labels, save_labels

_JAW_IN_NAME = re.compile(r"(?:^|[_\-. ])(upper|lower)(?:$|[_\-. ])", re.IGNORECASE)


@dataclass
class Scan:
    """One jaw scan: a triangle mesh with optional per-vertex FDI labels.

    ``vertices`` (V, 3) float64, ``faces`` (F, 3) int64 (0-based), ``labels`` (V,) int64 FDI numbers
    (0 = gingiva) or None, ``instances`` (V,) int64 (0 = gingiva, 1..k one per tooth) or None, ``jaw``
    "upper"/"lower"/None, ``id_patient``, ``path`` of the mesh file (None for generated scans) and
    ``meta`` for anything else (the synthetic generator stores its pose there).
    """

    vertices: np.ndarray
    faces: np.ndarray
    labels: np.ndarray | None = None
    jaw: str | None = None
    id_patient: str | None = None
    path: Path | None = None
    instances: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    @property
    def num_vertices(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def num_faces(self) -> int:
        return int(self.faces.shape[0])

    @property
    def name(self) -> str:
        """``<id_patient>_<jaw>`` (the Teeth3DS file stem), or the file stem."""
        if self.id_patient and self.jaw:
            return f"{self.id_patient}_{self.jaw}"
        return self.path.stem if self.path is not None else (self.id_patient or "scan")

    def vertex_normals(self) -> np.ndarray:
        return vertex_normals(self.vertices, self.faces)



def jaw_from_name(name: str) -> str | None:
    """"upper"/"lower" where the file name says so (``MSN001_upper.obj``), else None."""
    found = {m.lower() for m in _JAW_IN_NAME.findall(Path(name).stem)}
    return found.pop() if len(found) == 1 else None


def patient_from_name(name: str) -> str:
    """The patient id in a scan's name: the name without its jaw (``MSN001_lower`` -> ``MSN001``)."""
    stem = Path(name).stem if Path(name).suffix.lower() in (".obj", ".ply", ".stl") else str(name)
    return _JAW_IN_NAME.sub("", stem) or stem


def load_scan(path: str | PathLike, labels: str | PathLike | np.ndarray | bool | None = None,
              jaw: str | None = None) -> Scan:
    """Read a mesh (OBJ, PLY or STL) with its labels, checked.

    ``labels``: None -> ``<stem>.json`` beside the mesh if present (else an unlabelled scan); False -> no
    labels (a label file beside the mesh is not read); a path -> that Teeth3DS JSON; an array -> FDI
    numbers, one per vertex. The jaw comes from the JSON, else the
    file name (``_upper``/``_lower``), else the ``jaw`` argument; sources that disagree are an error.
    Raises :class:`ScanFormatError` (a ValueError) naming the file and field for any bad input.
    """
    path = Path(path)
    check_jaw(jaw, allow_none=True)
    vertices, faces = read_mesh(path)
    label_file = None
    if labels is False:
        labels = None
    elif labels is None:
        sidecar = path.with_suffix(".json")
        if sidecar.is_file():
            label_file = read_labels(sidecar, len(vertices))
    elif isinstance(labels, (str, PathLike)):
        label_file = read_labels(labels, len(vertices))
    jaws = {}  # source -> jaw, in order of precedence
    if label_file is not None:
        jaws[str(label_file.path)] = label_file.jaw
    if (named := jaw_from_name(path.name)) is not None:
        jaws[f"{path} (file name)"] = named
    if jaw is not None:
        jaws["jaw argument"] = jaw
    if len(set(jaws.values())) > 1:
        raise ScanFormatError(label_file.path if label_file else path, "jaw",
                              "sources disagree: " + ", ".join(f"{k} says {v!r}" for k, v in jaws.items()))
    jaw = next(iter(jaws.values()), None)
    instances = None
    if label_file is not None:
        fdi, instances, id_patient = label_file.labels, label_file.instances, label_file.id_patient
    elif labels is not None:
        fdi = np.asarray(labels)
        if fdi.ndim != 1 or not np.issubdtype(fdi.dtype, np.integer):
            raise ScanFormatError(path, "labels", f"label array must be 1-D integers, got {fdi.dtype} {fdi.shape}")
        fdi = fdi.astype(np.int64)
        if len(fdi) != len(vertices):
            raise ScanFormatError(path, "labels", f"{len(fdi)} labels but the mesh has {len(vertices)} vertices")
        check_fdi(fdi, jaw, path)
        id_patient = None
    else:
        fdi = None
        id_patient = None
    if not id_patient:
        id_patient = patient_from_name(path.name)
    return Scan(vertices=vertices, faces=faces, labels=fdi, jaw=jaw, id_patient=id_patient, path=path,
                instances=instances)


def save_scan(root: str | PathLike, scan: Scan, precision: int = 6) -> Path:
    """Write ``root/<ID>/<ID>_<jaw>.obj`` (``%.{precision}f`` coordinates) and its label JSON (if labelled).

    Returns the OBJ path. Needs ``scan.id_patient`` and ``scan.jaw``.
    """
    if not scan.id_patient:
        raise ValueError("save_scan: the scan has no id_patient")
    check_jaw(scan.jaw)
    folder = Path(root) / scan.id_patient
    obj = write_obj(folder / f"{scan.id_patient}_{scan.jaw}.obj", scan.vertices, scan.faces, precision)
    if scan.labels is not None:
        instances = scan.instances if scan.instances is not None else instances_from_labels(scan.labels)
        save_labels(obj.with_suffix(".json"), scan.labels, scan.jaw, scan.id_patient, instances)
    return obj
