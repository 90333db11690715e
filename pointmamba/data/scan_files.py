"""Which files a tool segments when given files and folders: every mesh under a folder, recursively.

A folder is walked in sorted order by :func:`walk_tree`, the one rule for predict and training
(``find_scans``): symbolic links to folders are followed, each folder is entered once (a link loop ends
there), hidden folders and the folders in ``skip`` (the output folder) are not entered. Its meshes are the
files ending in ``.obj``, ``.ply`` or ``.stl`` (any case), less the files this tool wrote itself
(:func:`written_by_pointmamba`: a predicted PLY carries :data:`PLY_MARKER` in its header, a tooth STL
:data:`TOOTH_STL_HEADER`; a ``summary.csv`` of a run marks the PLY and tooth STLs it lists): an earlier
run's results in an input folder are not segmented as patients. In the Teeth3DS layout
(``<ID>/<ID>_<jaw>.obj`` with ``<ID>_<jaw>.json`` beside it) the label file beside a mesh is its reference
where the user asks for it (:func:`label_file_beside`).
"""
from __future__ import annotations

import csv
import os
import re
from os import PathLike
from pathlib import Path
from typing import Iterable, Iterator, Sequence

MESH_SUFFIXES = (".obj", ".ply", ".stl")

PLY_MARKER = "comment written by pointmamba predict"
"""A header line of every PLY that ``tools/predict.py`` writes (the scan coloured by tooth)."""
TOOTH_STL_HEADER = b"pointmamba tooth mesh"
"""The start of the 80-byte header of every tooth STL that ``--export-teeth`` writes."""
SUMMARY = "summary.csv"
_SUMMARY_HEAD = "scan,output,jaw,"
_PIECE = re.compile(r"_(gingiva|\d\d)$")
_LEGACY_PLY_PROPERTIES = ["x", "y", "z", "red", "green", "blue", "label"]


def walk_tree(top: str | PathLike, skip: Iterable[str | PathLike] = ()) -> Iterator[tuple[Path, list[str]]]:
    """``(folder, sorted file names)`` for ``top`` and every folder under it, top-down in sorted order:
    symbolic links to folders followed, each folder entered once (by device and inode, so a link loop or
    two links to one folder cost nothing), hidden folders and the folders ``skip`` names not entered."""
    seen: set[tuple[int, int]] = set()
    top_key = _key(top)
    for folder in skip:
        key = _key(folder)
        if key is not None and key != top_key:  # a folder given as input is walked, even if it is --out
            seen.add(key)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
        key = _key(dirpath)
        if key is None or key in seen:
            dirnames[:] = []
            continue
        seen.add(key)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        yield Path(dirpath), sorted(filenames)


def _key(folder: str | PathLike) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def written_by_pointmamba(path: str | PathLike) -> bool:
    """Whether the mesh ``path`` is a file that ``tools/predict.py`` wrote: a PLY with :data:`PLY_MARKER`
    (or, from before the marker, exactly the vertex properties x y z red green blue label, which no
    scanner writes) or an STL whose header starts with :data:`TOOTH_STL_HEADER`."""
    suffix = Path(path).suffix.lower()
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096 if suffix == ".ply" else 80)
    except OSError:
        return False
    if suffix == ".stl":
        return head.startswith(TOOTH_STL_HEADER)
    if suffix != ".ply":
        return False
    header = head.split(b"end_header", 1)[0].decode("ascii", "replace").splitlines()
    props = [ln.split()[-1] for ln in header if ln.startswith("property") and " list " not in ln]
    return PLY_MARKER in header or props == _LEGACY_PLY_PROPERTIES


def _summary_outputs(folder: Path) -> set[str]:
    """The output stems a run's ``summary.csv`` in ``folder`` lists (none where it is not one of ours)."""
    try:
        with open(folder / SUMMARY, newline="", encoding="utf-8", errors="replace") as fh:
            if not fh.readline().startswith(_SUMMARY_HEAD):
                return set()
            fh.seek(0)
            return {row.get("output") or "" for row in csv.DictReader(fh)} - {""}
    except OSError:
        return set()


def _is_output(folder: Path, name: str, listed: set[str]) -> bool:
    stem, suffix = os.path.splitext(name)
    suffix = suffix.lower()
    if suffix == ".ply" and stem in listed:
        return True
    if suffix == ".stl" and _PIECE.search(stem) and _PIECE.sub("", stem) in listed:
        return True
    return suffix in (".ply", ".stl") and written_by_pointmamba(folder / name)


def expand_scan_paths(paths: Sequence[str | PathLike], skip: Iterable[str | PathLike] = (),
                      skipped: list[Path] | None = None) -> list[Path]:
    """Files as given; each folder replaced by the meshes under it (see :func:`walk_tree`; a file reached
    twice through links counted once). ``skip``: folders not to enter (the output folder); the files this
    tool wrote are left out and appended to ``skipped``. Raises FileNotFoundError for a path that does not
    exist and ValueError for a folder without a mesh, naming it."""
    skip = list(skip)
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            if not os.path.lexists(path):
                raise FileNotFoundError(f"{path}: no such file or folder")
            out.append(path)  # a FIFO or a broken link: refused, named, by the check
            continue
        found: list[Path] = []
        reached: set[Path] = set()
        for folder, filenames in walk_tree(path, skip):
            meshes = [f for f in filenames if f.lower().endswith(MESH_SUFFIXES) and not f.startswith(".")]
            listed = _summary_outputs(folder) if SUMMARY in filenames and meshes else set()
            for name in meshes:
                file = folder / name
                if _is_output(folder, name, listed):
                    if skipped is not None:
                        skipped.append(file)
                    continue
                real = file.resolve()
                if real not in reached:  # one file through two links to its folder
                    reached.add(real)
                    found.append(file)
        if not found:
            raise ValueError(f"{path}: no mesh files ({', '.join(MESH_SUFFIXES)}) in this folder or below it")
        out += found
    return out


def label_file_beside(mesh: str | PathLike) -> Path | None:
    """``<mesh stem>.json`` beside the mesh (the Teeth3DS layout), or None where there is none."""
    sidecar = Path(mesh).with_suffix(".json")
    return sidecar if sidecar.is_file() else None
