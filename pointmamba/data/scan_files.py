"""Which files a tool segments when given files and folders: every mesh under a folder, recursively.

A folder is walked in sorted order (hidden folders and the tool's own output folders skipped); its
meshes are the files ending in ``.obj``, ``.ply`` or ``.stl`` (any case). In the Teeth3DS layout
(``<ID>/<ID>_<jaw>.obj`` with ``<ID>_<jaw>.json`` beside it) the label file beside a mesh is its
reference where the user asks for it (:func:`label_file_beside`).
"""
from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import Iterable, Sequence

MESH_SUFFIXES = (".obj", ".ply", ".stl")


def expand_scan_paths(paths: Sequence[str | PathLike], skip: Iterable[str | PathLike] = ()) -> list[Path]:
    """Files as given; each folder replaced by the meshes under it (recursive, sorted). ``skip``: folders
    not to enter (e.g. the output folder inside an input folder). Raises FileNotFoundError for a path
    that does not exist and ValueError for a folder without a mesh, naming it."""
    skipped = {Path(s).resolve() for s in skip}
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such file or folder")
            out.append(path)
            continue
        found = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames
                                 if not d.startswith(".") and (Path(dirpath) / d).resolve() not in skipped)
            found += [Path(dirpath) / f for f in sorted(filenames)
                      if f.lower().endswith(MESH_SUFFIXES) and not f.startswith(".")]
        if not found:
            raise ValueError(f"{path}: no mesh files ({', '.join(MESH_SUFFIXES)}) in this folder or below it")
        out += found
    return out


def label_file_beside(mesh: str | PathLike) -> Path | None:
    """``<mesh stem>.json`` beside the mesh (the Teeth3DS layout), or None where there is none."""
    sidecar = Path(mesh).with_suffix(".json")
    return sidecar if sidecar.is_file() else None
