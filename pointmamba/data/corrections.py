"""A reviewer's folder of corrected scans, as training data: the meshes with the review page's JSON beside them.

The review page downloads one Teeth3DS JSON per corrected scan (``id_patient``, ``jaw``, ``labels``: one
FDI number per vertex of the original file, in file order, ``instances``), named after the scan
(``<stem>.json``). A corrections folder holds those files beside the meshes they label: the Teeth3DS layout
(``<ID>/<ID>_<jaw>.obj`` + ``.json``) or a flat folder of ``<stem>.<obj|ply|stl>`` + ``<stem>.json``, any
depth. A mesh without a JSON was not corrected and is not used; a JSON without its mesh is an error.

The training set reads scans named ``<ID>_<jaw>`` in the Teeth3DS layout, so :func:`stage_corrections`
copies each corrected pair under that name into a folder of its own (a vendor name such as
``Patient 7 mandible.stl`` becomes ``Patient_7_mandible_lower``), beside links to the training scans
replayed with them: a corrected scan then replaces a training scan of the same name (a reviewer who
corrected one of the data set's own scans) instead of clashing with it.
"""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Sequence

from .errors import ScanFormatError
from .mesh import MESH_SUFFIXES
from .scan import load_scan
from .scan_files import walk_tree

_SCAN_NAME = re.compile(r"(.+)_(upper|lower)")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
STAGED_MARKER = ".pointmamba-corrections"
"""A file in every staging folder: only such a folder is ever cleared and rewritten."""


@dataclass(frozen=True)
class Correction:
    """One corrected scan: its training name (``<ID>_<jaw>``), its mesh and the reviewer's JSON."""

    name: str
    mesh: Path
    labels: Path


def find_corrections(folder: str | PathLike) -> list[Correction]:
    """Every ``<stem>.json`` under ``folder`` with the mesh it labels, each read and checked now (a JSON
    whose label count differs from its mesh's vertex count, a bad FDI number or a jaw that contradicts the
    file name raises :class:`ScanFormatError` naming the JSON). Sorted by name; names are unique."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: corrections folder not found")
    found: dict[str, Correction] = {}
    for dirpath, filenames in walk_tree(folder):
        meshes = {Path(f).stem: dirpath / f for f in filenames
                  if Path(f).suffix.lower() in MESH_SUFFIXES and not f.startswith(".")}
        for f in filenames:
            if Path(f).suffix.lower() != ".json" or f.startswith("."):
                continue
            json_path = dirpath / f
            mesh = meshes.get(json_path.stem)
            if mesh is None:
                raise ScanFormatError(json_path, "mesh", f"no mesh {json_path.stem}.obj/.ply/.stl beside it: put the "
                                                          "scan the review page showed next to its corrected JSON")
            scan = load_scan(mesh, labels=json_path)  # checks the count against the mesh, FDI, jaw
            name = training_name(json_path.stem, scan.jaw)
            if name in found:
                raise ScanFormatError(json_path, "name", f"two corrected scans named {name!r}: "
                                                          f"{found[name].labels} and {json_path}")
            found[name] = Correction(name, mesh, json_path)
    if not found:
        raise FileNotFoundError(f"{folder}: no corrected scans (<stem>.json beside <stem>.obj/.ply/.stl, as the "
                                "review page downloads them)")
    return [found[n] for n in sorted(found)]


def training_name(stem: str, jaw: str) -> str:
    """``<ID>_<jaw>`` for a scan file ``stem`` whose labels say ``jaw``: the stem itself where it already
    ends in that jaw, else the stem with unsafe characters replaced, plus the jaw."""
    m = _SCAN_NAME.fullmatch(stem)
    if m and m.group(2) == jaw:
        return stem
    return f"{_UNSAFE.sub('_', stem).strip('_') or 'scan'}_{jaw}"


def staging_folder(folder: str | PathLike, cache_dir: str | PathLike) -> Path:
    """Where :func:`stage_corrections` puts the copies of ``folder``: one folder per corrections folder
    under ``<cache_dir>/corrections``."""
    digest = hashlib.sha1(str(Path(folder).resolve()).encode()).hexdigest()[:16]
    return Path(cache_dir) / "corrections" / digest


def stage_corrections(corrections: list[Correction], dest: str | PathLike,
                      replay: Sequence[tuple[str, Path]] = ()) -> list[Path]:
    """The data roots of a fine-tune: each corrected scan copied to ``dest/corrected/<name>/<name>.<ext>`` +
    ``.json`` (the Teeth3DS layout training reads), and each replayed training scan ``(group, mesh)`` linked
    (mesh and label file) under ``dest/replay/<group>/``, one root per group (its source: a data root's folder
    name, so that per-root rules such as position labels still apply). A corrected scan and a replayed one
    never share a name (the caller leaves the replayed one out). What an earlier staging left in ``dest`` is
    replaced; a ``dest`` that exists and was not written here is refused (nothing of the user's is removed).
    Returns the roots: ``dest/corrected`` first, then each group's."""
    dest = Path(dest)
    if dest.is_symlink() or (dest.exists() and not (dest / STAGED_MARKER).is_file()):
        raise FileExistsError(f"{dest}: exists and is not a corrections staging folder; not replacing it")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "corrected").mkdir(parents=True)
    (dest / STAGED_MARKER).write_text("copies of corrected scans and links to replayed ones, for training "
                                      "(pointmamba/data/corrections.py)\n")
    for c in corrections:
        (dest / "corrected" / c.name).mkdir()
        shutil.copyfile(c.mesh, dest / "corrected" / c.name / f"{c.name}{c.mesh.suffix.lower()}")
        shutil.copyfile(c.labels, dest / "corrected" / c.name / f"{c.name}.json")
    roots = [dest / "corrected"]
    for group, mesh in replay:  # links: the preprocessing cache (keyed by the resolved file) is shared
        folder = dest / "replay" / group / mesh.stem
        folder.mkdir(parents=True)
        (folder / mesh.name).symlink_to(mesh.resolve())
        if mesh.with_suffix(".json").is_file():
            (folder / f"{mesh.stem}.json").symlink_to(mesh.with_suffix(".json").resolve())
        if folder.parent not in roots:
            roots.append(folder.parent)
    return roots
