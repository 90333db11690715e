"""Which scans a checkpoint was trained on, so that a score measured on them is named as such.

The trainer records the names (stems, ``<ID>_<jaw>``) of its training scans in every checkpoint
(``train_scans``; with ``train.init_from``, the starting model's too), and ``pointmamba-export-model`` keeps
them. A checkpoint written before that has no list: it is derived from its stored config where that
determines it (explicit ``data.train_names``, a split file that is here, or ``train_split: all`` with its
data roots here: every scan under them), less ``data.train_exclude``. ``tools/test.py`` and
``tools/predict.py --reference`` warn when a scan they score is among them: a score on training scans
measures fit, not accuracy on new scans.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

KEY = "train_scans"
"""The checkpoint entry: a sorted list of scan names (plain strings: the file stays weights-only)."""


@dataclass
class TrainingScans:
    """The training scans of one or more networks: per network, its ``entries`` (scan names, or patient IDs:
    a split file may list ``<ID>`` for both jaws) less its ``excluded`` ones, of its jaw only where it was
    trained on one (``data.jaw``); ``source`` says how they were known."""

    parts: list[tuple[set[str], set[str], str | None]]
    source: str

    def among(self, names: Iterable[str]) -> list[str]:
        """The scans of ``names`` (``<ID>_<jaw>`` stems) that some network was trained on, in the given order."""
        return [n for n in names if any(_matches(n, e) and not _matches(n, x) and (j is None or n.endswith("_" + j))
                                        for e, x, j in self.parts)]


def _matches(name: str, entries: set[str]) -> bool:
    return name in entries or name.rsplit("_", 1)[0] in entries


def _roots(root: Any) -> list[Path] | None:
    """``data.root`` as folders that exist here: a relative one is taken from the current folder, else from
    the checkout that holds this package (where the tools run); None when any is absent."""
    from ..data.dataset import data_roots

    checkout = Path(__file__).resolve().parents[2]
    out = []
    for r in data_roots(root):
        found = next((c for c in ([r] if r.is_absolute() else [r, checkout / r]) if c.is_dir()), None)
        if found is None:
            return None
        out.append(found)
    return out


def derive_from_config(cfg: dict[str, Any]) -> TrainingScans | None:
    """The training scans a stored config determines (see the module doc); None when it does not here."""
    from ..data.dataset import find_scans, read_split, split_path

    d = cfg.get("data") if isinstance(cfg, dict) else None
    if not isinstance(d, dict) or "root" not in d:
        return None
    excluded = set(d.get("train_exclude") or [])
    jaw = d.get("jaw")
    if d.get("train_names") is not None:
        return TrainingScans([(set(d["train_names"]), excluded, jaw)], "its config's data.train_names")
    roots = _roots(d["root"])
    if roots is None:
        return None
    split = d.get("train_split", "train")
    if split == "all":
        where = ", ".join(str(r) for r in data_roots_as_given(d["root"]))
        return TrainingScans([(set(find_scans(roots)), excluded, jaw)], f"its config: every scan under {where}")
    path = split_path(roots, split, d.get("split_dir"))
    if not path.is_file():
        return None
    return TrainingScans([(set(read_split(path)), excluded, jaw)], f"its config's split file {path}")


def data_roots_as_given(root: Any) -> list[str]:
    return [root] if isinstance(root, str) else [str(r) for r in root]


def of_state(state: dict[str, Any]) -> TrainingScans | None:
    """One network's training scans: recorded in ``state``, else derived from its stored config."""
    recorded = state.get(KEY)
    if isinstance(recorded, list) and all(isinstance(n, str) for n in recorded):
        return TrainingScans([(set(recorded), set(), None)], "recorded in the checkpoint")
    return derive_from_config(state.get("config") or {})


def of_checkpoints(paths: Iterable[str | Path]) -> tuple[TrainingScans | None, list[str]]:
    """The union of the training scans of every network in checkpoint files ``paths`` (a model file's
    ``average_with`` networks included), and the networks whose scans are unknown (named)."""
    from ..checkpoints.checkpoint import load_checkpoint

    union: TrainingScans | None = None
    unknown: list[str] = []
    for path in paths:
        state = load_checkpoint(path)
        members = [state] + list(state.get("average_with") or [])
        for k, member in enumerate(members, 1):
            scans = of_state(member)
            if scans is None:
                unknown.append(f"{path}" + (f" (network {k})" if len(members) > 1 else ""))
                continue
            if union is None:
                union = scans
            else:
                source = union.source if scans.source in union.source else f"{union.source}; {scans.source}"
                union = TrainingScans(union.parts + scans.parts, source)
    return union, unknown


def warning_line(checkpoint: str | Path, names: list[str], scans: TrainingScans | None, unknown: list[str]) -> str | None:
    """One line for a tool to print when scored scans ``names`` were trained on (else None); a note when the
    training scans of some network are unknown."""
    if scans is not None:
        seen = scans.among(names)
        if seen:
            shown = ", ".join(seen[:12]) + (f", ... ({len(seen) - 12} more)" if len(seen) > 12 else "")
            return (f"warning: {len(seen)} of the {len(names)} scored scan(s) were among the training scans of "
                    f"{Path(checkpoint).name} ({scans.source}): {shown}; their scores measure fit, not accuracy "
                    "on new scans")
    if unknown:
        return (f"note: the training scans of {', '.join(unknown)} are not recorded and its config does not "
                "determine them here: cannot tell whether the scored scans were trained on")
    return None
