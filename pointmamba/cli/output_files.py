"""Where a tool writes its results: checked up front, never over an input or a file it did not write.

* The output directory must be (or become) a writable directory: checked before any work, creating
  nothing, so a typo costs a one-line error, not a traceback after minutes of inference.
* One output name per input: inputs that share a file name in different folders get their folder's
  name as a prefix (``a/scan_upper.obj`` -> ``a_scan_upper.*``), so no patient's result replaces another's.
* A planned output that is an input (a mesh, a reference or the label file beside a mesh) is refused
  always, and so is one that belongs to a labelled scan in ``--out`` (``X.json`` beside a mesh ``X.obj``,
  ``.ply`` or ``.stl`` that this tool did not write): ``--overwrite`` replaces earlier results, never
  ground truth. One that exists already (an earlier run's result, a planted symlink) is refused unless the
  user passes ``--overwrite``.
* Every file is written atomically (temp file + rename): a symlink in its place is replaced, never
  written through.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Sequence


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
        parents = [paths[i].resolve().parent.parts for i in members]
        for depth in range(1, max(len(p) for p in parents) + 1):
            tags = ["_".join(p[-depth:]) for p in parents]
            if len(set(tags)) == len(tags):
                for i, tag in zip(members, tags):
                    stems[i] = f"{tag}_{stem}"
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


def _written_by_us(ply: Path) -> bool:
    """Whether ``ply`` looks like the coloured prediction ``tools/predict.py`` writes: vertex properties
    exactly x y z red green blue label (a scanner's export has no integer ``label``)."""
    try:
        with open(ply, "rb") as fh:
            head = fh.read(4096).split(b"end_header", 1)[0].decode("ascii", "replace")
    except OSError:
        return False
    props = [ln.split()[-1] for ln in head.splitlines() if ln.startswith("property") and " list " not in ln]
    return props == ["x", "y", "z", "red", "green", "blue", "label"]


def labelled_scan(out: Path, stem: str) -> Path | None:
    """The mesh ``out/<stem>.obj|.stl|.ply`` when it and ``out/<stem>.json`` exist (a scan with its ground
    truth, Teeth3DS layout) and the mesh is not a prediction this tool wrote; else None."""
    if not (out / f"{stem}.json").is_file():
        return None
    for suffix in (".obj", ".stl", ".ply"):
        mesh = out / f"{stem}{suffix}"
        if mesh.is_file() and not (suffix == ".ply" and _written_by_us(mesh)):
            return mesh
    return None


def plan_outputs(inputs: Sequence[str | Path], out: str | Path, suffixes: Sequence[str], overwrite: bool = False,
                 protected: Iterable[str | Path] = ()) -> list[dict[str, Path]]:
    """Output paths per input (``{suffix: out/<stem><suffix>}``), checked before anything is written.

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
    stems = output_stems(inputs)
    for stem in stems:  # a scan with its ground truth in --out: never replaced, not even with --overwrite
        scan = labelled_scan(out, stem)
        if scan is not None:
            never = "(never replaced, not even with --overwrite)"
            guarded.setdefault((out / f"{stem}.json").resolve(), f"the ground truth of the labelled scan {scan} {never}")
            guarded.setdefault(scan.resolve(), f"the labelled scan {scan} {never}")
    plan = [{sfx: out / f"{stem}{sfx}" for sfx in suffixes} for stem in stems]
    _raise_problems([path for files in plan for path in files.values()], guarded, overwrite)
    return plan


def check_run_files(files: Sequence[str | Path], inputs: Sequence[str | Path], planned: Sequence[dict[str, Path]],
                    overwrite: bool = False, protected: Iterable[str | Path] = ()) -> None:
    """Check a run's own files (a summary table, a report page) as :func:`plan_outputs` checks the
    per-input ones: never an input, a ``protected`` file or a planned output; an existing one only with
    ``overwrite``."""
    guarded = {Path(p).resolve(): f"input {p}" for p in inputs}
    guarded.update({Path(p).resolve(): f"{p} (a label or reference file of the inputs)" for p in protected})
    guarded.update({path.resolve(): f"{path} (an output of this run)" for files in planned for path in files.values()})
    _raise_problems([Path(f) for f in files], guarded, overwrite)


def _raise_problems(paths: list[Path], guarded: dict[Path, str], overwrite: bool) -> None:
    """:class:`OutputError` (one line: the first problem and how many more) for outputs that would replace
    a guarded file, or an existing file without ``overwrite``."""
    problems: list[str] = []
    for path in paths:
        target = path.resolve()  # follows a symlink planted in its place
        if target in guarded:
            problems.append(f"{path} would overwrite {guarded[target]}: choose another --out")
        elif os.path.lexists(path) and not overwrite:
            kind = "is a symbolic link" if path.is_symlink() else "exists"
            problems.append(f"{path} {kind} (not written by this run): pass --overwrite to replace it "
                            "or choose another --out")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise OutputError(problems[0] + more)
