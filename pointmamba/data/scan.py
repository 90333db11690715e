"""Loading a scan with its labels, and saving one in Teeth3DS layout."""
from __future__ import annotations

import re
from os import PathLike
from pathlib import Path

import numpy as np

from .errors import ScanFormatError
from .fdi import check_jaw
from .mesh import Scan, read_mesh, write_obj
from .teeth3ds import check_fdi, instances_from_labels, read_labels, save_labels

_JAW_IN_NAME = re.compile(r"(?:^|[_\-. ])(upper|lower)(?:$|[_\-. ])", re.IGNORECASE)


def jaw_from_name(name: str) -> str | None:
    """"upper"/"lower" where the file name says so (``MSN001_upper.obj``), else None."""
    found = {m.lower() for m in _JAW_IN_NAME.findall(Path(name).stem)}
    return found.pop() if len(found) == 1 else None


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
        stem = path.stem
        id_patient = _JAW_IN_NAME.sub("", stem) or stem
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
