"""Where a tool writes its results: checked up front, never over an input or a file it did not write.

* The output directory must be (or become) a writable directory: checked before any work, creating
  nothing, so a typo costs a one-line error, not a traceback after minutes of inference.
* One output name per input: inputs that share a file name in different folders get their folder's
  name as a prefix (``a/scan_upper.obj`` -> ``a_scan_upper.*``), so no patient's result replaces another's.
  A name too long for the file system (255 bytes with its longest suffix) is cut and tagged by a hash.
* Every planned output lies in the output directory itself (:func:`check_inside`, one rule for all of
  them), is no folder, and is checked before any work, the tooth meshes ``--export-teeth`` may write
  included.
* A planned output that is an input (a mesh, a reference or the label file beside a mesh) is refused
  always, and so is one that belongs to a labelled scan in ``--out`` (``X.json`` beside a mesh ``X.obj``,
  ``.ply`` or ``.stl`` that this tool did not write): ``--overwrite`` replaces earlier results, never
  ground truth. One that exists already (an earlier run's result, a planted symlink) is refused unless the
  user passes ``--overwrite``.
* Every file is written atomically (temp file + rename): a symlink in its place is replaced, never
  written through.
* One run at a time writes an output directory (:func:`lock_out_dir`): a second one stops in one line.
* With ``--layout per-scan`` each input's files go in a folder of its own, ``out/<stem>/``: the same rule,
  one level down (the folder is a plain folder directly in ``out``, never a link).
* What a run keeps for itself (the done-records of ``--skip-existing``, the review page's spool) lies in
  one hidden folder, ``out/.pointmamba-predict/`` (:data:`STATE_DIR`), checked like the outputs.
* The review page's chunk pages (``index-01.html`` ... beside ``index.html``) are known only at the end:
  :func:`check_report_pages` checks every existing file of that pattern, and no planned output may have it.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

from pointmamba.utils.atomic_file import utf8_prefix
from pointmamba.data.scan_files import written_by_pointmamba
from pointmamba.utils.folder_lock import FolderInUse, lock_folder

NAME_MAX = 255
"""Longest file name, in bytes, that common file systems (ext4, XFS, APFS, NTFS in UTF-16 units) take."""
LOCK_FILE = ".pointmamba-predict.lock"
"""The lock a run holds in its output directory (hidden: a folder walk never reads it as a scan)."""
STATE_DIR = ".pointmamba-predict"
"""The hidden folder in the output directory for what a run keeps for itself (done-records, page spool)."""
RUN_FILE = "run.json"
"""A batch run's record in the output directory: checkpoint, its sha256, inference options, versions."""


class OutputError(ValueError):
    """An output directory or file that cannot or must not be written."""


def _probe(directory: Path, out: Path, what: str) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".pointmamba-write-test-")
    except OSError as exc:
        raise OutputError(f"{what} {out}: cannot write in {directory}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)


def check_out_dir(out: str | Path, what: str = "--out") -> None:
    """Raise :class:`OutputError` unless ``out`` is a writable directory or can be created as one (its
    nearest existing ancestor is a writable directory). Creates nothing."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise OutputError(f"{what} {out} is a file, not a directory")
        _probe(out, out, what)
        return
    if out.is_symlink():
        raise OutputError(f"{what} {out} is a broken symbolic link")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{what} {out}: {parent} is a file, not a directory")
    _probe(parent, out, what)


def check_out_file(out: str | Path, inputs: Iterable[str | Path] = (), overwrite: bool = False,
                   what: str = "--out") -> Path:
    """Raise :class:`OutputError` unless a tool may write the single file ``out``: not a directory, not one
    of its ``inputs`` (also through a link), not an existing file without ``overwrite``, in a directory
    that is or can be made writable. Creates nothing."""
    out = Path(out)
    if out.is_dir():
        raise OutputError(f"{what} {out} is a directory: give the file to write")
    for path in inputs:
        if out.resolve() == Path(path).resolve():
            raise OutputError(f"{what} {out} is the input {path}: writing it would replace the input; choose another file")
    if os.path.lexists(out) and not overwrite:
        raise OutputError(f"{what} {out} exists: pass --overwrite to replace it or choose another file")
    check_out_dir(out.parent, f"{what} {out}: its folder")
    return out


def make_out_dir(out: str | Path, what: str = "--out") -> Path:
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{what} {out}: cannot create the directory: {exc.strerror or exc}") from None
    return out


def output_stems(inputs: Sequence[str | Path]) -> list[str]:
    """One distinct output stem per input: the file stem; where inputs in different folders share it,
    prefixed by as many parent folder names as tell them apart; otherwise numbered (``-2``, ``-3``)."""
    paths = [Path(p) for p in inputs]
    stems = [p.stem for p in paths]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(stems):
        groups.setdefault(s, []).append(i)
    for stem, members in groups.items():
        if len(members) == 1:
            continue
        parents = [paths[i].resolve().parent.parts[1:] for i in members]  # never the root ("/") itself
        for depth in range(1, max(len(p) for p in parents) + 1):
            tags = ["_".join(p[-depth:]) for p in parents]
            if len(set(tags)) == len(tags):
                for i, tag in zip(members, tags):
                    stems[i] = f"{tag}_{stem}" if tag else stem  # a file in / keeps its plain name
                break
        else:
            for k, i in enumerate(members[1:], start=2):
                stems[i] = f"{stem}-{k}"
    taken: dict[str, int] = {}
    out = []
    for s in stems:  # a prefixed name can still equal another input's plain one
        taken[s] = taken.get(s, 0) + 1
        out.append(s if taken[s] == 1 else f"{s}-{taken[s]}")
    return out


def fit_stems(stems: Sequence[str], suffixes: Sequence[str]) -> list[str]:
    """``stems`` cut where one with the longest of ``suffixes`` would exceed :data:`NAME_MAX` bytes; a cut
    stem ends in ``~`` and 8 hex digits of a hash of the whole one, so that cut stems stay distinct."""
    room = NAME_MAX - max((len(s.encode("utf-8")) for s in suffixes), default=0)
    out = []
    for stem in stems:
        whole = stem.encode("utf-8", "surrogateescape")
        if len(whole) <= room:
            out.append(stem)
        else:
            tag = "~" + hashlib.sha256(whole).hexdigest()[:8]
            out.append(utf8_prefix(stem, room - len(tag)) + tag)
    return out


def check_inside(paths: Iterable[Path], out: str | Path) -> None:
    """Raise :class:`OutputError` for a path that is not a file directly in ``out`` (its folder, with links
    resolved, is ``out``'s; its name is a plain name): the one rule that keeps a run's outputs in ``--out``."""
    root = os.path.realpath(out)
    for path in paths:
        if path.name in ("", ".", "..") or os.path.realpath(path.parent) != root:
            raise OutputError(f"{path} would be written outside --out {out}: refused")


def labelled_scan(out: Path, stem: str) -> Path | None:
    """The mesh ``out/<stem>.obj|.stl|.ply`` when it and ``out/<stem>.json`` exist (a scan with its ground
    truth, Teeth3DS layout) and the mesh is not a prediction this tool wrote; else None."""
    if not (out / f"{stem}.json").is_file():
        return None
    for suffix in (".obj", ".stl", ".ply"):
        mesh = out / f"{stem}{suffix}"
        if mesh.is_file() and not written_by_pointmamba(mesh):
            return mesh
    return None


def plan_outputs(inputs: Sequence[str | Path], out: str | Path, suffixes: Sequence[str], overwrite: bool = False,
                 protected: Iterable[str | Path] = (), per_scan: bool = False) -> list[dict[str, Path]]:
    """Output paths per input (``{suffix: out/<stem><suffix>}``; ``per_scan``: ``out/<stem>/<stem><suffix>``),
    checked before anything is written.

    Raises :class:`OutputError` (one line, the first problem and how many more) for an input listed
    twice, an output that is an input or another ``protected`` file (always), or an output that exists
    already (unless ``overwrite``).
    """
    out = Path(out)
    resolved = [Path(p).resolve() for p in inputs]
    seen: dict[Path, int] = {}
    for i, r in enumerate(resolved):
        if r in seen:
            raise OutputError(f"{inputs[i]}: listed twice (as input {seen[r] + 1} and {i + 1})")
        seen[r] = i
    guarded = {r: f"input {p}" for r, p in zip(resolved, inputs)}
    guarded.update({Path(p).resolve(): f"{p} (a label or reference file of the inputs)" for p in protected})
    stems = fit_stems(output_stems(inputs), suffixes)
    folders = [out / stem if per_scan else out for stem in stems]
    if per_scan:
        check_scan_folders(folders, out)
    for folder, stem in zip(folders, stems):  # a scan with its ground truth there: never replaced, not even with --overwrite
        scan = labelled_scan(folder, stem)
        if scan is not None:
            never = "(never replaced, not even with --overwrite)"
            guarded.setdefault((folder / f"{stem}.json").resolve(), f"the ground truth of the labelled scan {scan} {never}")
            guarded.setdefault(scan.resolve(), f"the labelled scan {scan} {never}")
    plan = [{sfx: folder / f"{stem}{sfx}" for sfx in suffixes} for folder, stem in zip(folders, stems)]
    for folder, files in zip(folders, plan):
        check_inside(files.values(), folder)
    _raise_problems([path for files in plan for path in files.values()], guarded, overwrite)
    return plan


def check_scan_folders(folders: Sequence[Path], out: str | Path) -> None:
    """Raise :class:`OutputError` unless each of ``folders`` (``--layout per-scan``) is, or can be made, a
    plain folder directly in ``out``: a plain name, not the run's own :data:`STATE_DIR`, not a link, not a file."""
    root = os.path.realpath(out)
    for folder in folders:
        if folder.name in ("", ".", "..", STATE_DIR) or os.path.realpath(folder.parent) != root:
            raise OutputError(f"{folder} would be written outside --out {out}, or over the run's own files: refused")
        if folder.is_symlink():
            raise OutputError(f"{folder} is a symbolic link, where this run makes the scan's folder: "
                              "remove it or choose another --out")
        if os.path.lexists(folder) and not folder.is_dir():
            raise OutputError(f"{folder} is a file, where this run makes the scan's folder: "
                              "move it or choose another --out")


def check_state_dir(out: str | Path) -> Path:
    """The run's hidden folder ``out/.pointmamba-predict`` (:data:`STATE_DIR`), checked: a plain folder or
    absent (made when first needed), never a link or a file. Raises :class:`OutputError`."""
    state = Path(out) / STATE_DIR
    if state.is_symlink() or (os.path.lexists(state) and not state.is_dir()):
        raise OutputError(f"{state} is not the folder this run keeps its records in (a link or a file): "
                          "remove it or choose another --out")
    return state


def report_page_pattern(report: Path) -> re.Pattern[str]:
    """The names of the chunk pages a review page ``report`` may write beside it (``index-01.html`` ...)."""
    return re.compile(re.escape(report.stem) + r"-\d{2,}" + re.escape(report.suffix))


def check_report_pages(report: Path, planned: Iterable[Path], guarded: Iterable[Path], overwrite: bool) -> None:
    """Raise :class:`OutputError` where the review page's chunk pages could replace a file: a planned output
    or ``guarded`` file (an input, a label file) beside ``report`` of their pattern (always), or an existing
    file of it (unless ``overwrite``). Their number is known only at the end; the pattern covers them all."""
    pattern = report_page_pattern(report)
    folder = os.path.realpath(report.parent)
    for path in [*planned, *guarded]:
        path = Path(path)
        if os.path.realpath(path.parent) == folder and pattern.fullmatch(path.name):
            raise OutputError(f"{path} has the name of a page of the review page {report} (its chunks): "
                              "choose another --report name")
    if report.parent.is_dir():
        pages = sorted(p for p in report.parent.iterdir() if pattern.fullmatch(p.name))
        _raise_problems(pages, {}, overwrite, what="a page of the review page")


def check_run_files(files: Sequence[str | Path], inputs: Sequence[str | Path], planned: Sequence[dict[str, Path]],
                    overwrite: bool = False, protected: Iterable[str | Path] = (), out: str | Path | None = None) -> None:
    """Check a run's own files (a summary table, a report page) as :func:`plan_outputs` checks the
    per-input ones: never an input, a ``protected`` file, a planned output, another of ``files`` or the
    lock in ``out``; an existing one only with ``overwrite``."""
    guarded = {Path(p).resolve(): f"input {p}" for p in inputs}
    guarded.update({Path(p).resolve(): f"{p} (a label or reference file of the inputs)" for p in protected})
    guarded.update({path.resolve(): f"{path} (an output of this run)" for files in planned for path in files.values()})
    if out is not None:
        guarded[(Path(out) / LOCK_FILE).resolve()] = f"{Path(out) / LOCK_FILE} (the lock of this run)"
        guarded[(Path(out) / STATE_DIR).resolve()] = f"{Path(out) / STATE_DIR} (the records of this run)"
    for file in map(Path, files):
        _raise_problems([file], guarded, overwrite)
        guarded.setdefault(file.resolve(), f"{file} (another file of this run)")


def _raise_problems(paths: list[Path], guarded: dict[Path, str], overwrite: bool, what: str = "") -> None:
    """:class:`OutputError` (one line: the first problem and how many more) for outputs that would replace
    a guarded file, or an existing file without ``overwrite`` (``what`` the output is, for the message)."""
    problems: list[str] = []
    for path in paths:
        target = path.resolve()  # follows a symlink planted in its place
        if target in guarded:
            problems.append(f"{path} would overwrite {guarded[target]}: choose another --out")
        elif path.is_dir() and not path.is_symlink():  # not even --overwrite replaces a folder
            problems.append(f"{path} is a folder, where this run writes a file: move it or choose another --out")
        elif os.path.lexists(path) and not overwrite:
            kind = "is a symbolic link" if path.is_symlink() else "exists"
            problems.append(f"{path} {kind} (not written by this run{f', {what}' if what else ''}): pass --overwrite "
                            "to replace it, --skip-existing to resume the run that wrote it, or choose another --out")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise OutputError(problems[0] + more)


def lock_out_dir(out: str | Path) -> int:
    """Hold the lock of the existing output directory ``out`` for this run (a descriptor; the lock goes when
    the process ends). Raises :class:`OutputError` (one line) where another run holds it."""
    try:
        return lock_folder(out, LOCK_FILE)
    except FolderInUse as busy:
        raise OutputError(f"--out {out} is in use by another run{f' (pid {busy.holder})' if busy.holder else ''}: "
                          "wait for it to end or choose another --out") from None
    except OSError as exc:
        raise OutputError(f"--out {out}: cannot create its lock {LOCK_FILE}: {exc.strerror or exc}") from None
