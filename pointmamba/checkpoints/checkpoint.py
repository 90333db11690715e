"""Checkpoints: written atomically (temp file + rename), read back safely and with clear errors.

Safety: a ``.pth`` file is a pickle, and unpickling can call any Python function (a crafted file can
run a shell command the moment it is loaded). Every checkpoint we write holds only tensors and plain
Python data (dicts, lists, tuples, numbers, strings; RNG states included, see ``training/seed.py``), so
it loads with ``torch.load(weights_only=True)``, and that is the only way this module reads a file.
Checkpoints written before this rule kept NumPy's RNG state as a NumPy array; NumPy array
reconstruction (which cannot call anything else) is allowed on top of torch's weights-only set, so
they still load. Anything else is refused with :class:`UnsafeCheckpointError`, before any of it runs.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..utils.atomic_file import atomic_writer
from ..config import flatten


class CheckpointError(ValueError):
    """A checkpoint file that is missing, truncated or not one of ours."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint whose pickle would create objects or call functions beyond weights and plain data."""


def _legacy_numpy_globals() -> list[Any]:
    """What NumPy arrays in pickles (NumPy RNG state of older checkpoints) need: array reconstruction
    and dtypes, under both module names NumPy 1 and 2 write."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # NumPy 1
        from numpy.core.multiarray import _reconstruct
    out: list[Any] = [np.ndarray, np.dtype, _reconstruct]
    out += [(_reconstruct, name) for name in ("numpy.core.multiarray._reconstruct",
                                              "numpy._core.multiarray._reconstruct")]
    out += [type(np.dtype(c)) for c in "?bBhHiIlLqQefdgFDGUS"]
    return out


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically: a crash mid-write never leaves a half file under ``path``.

    ``state`` must hold only tensors and plain data, so the file loads with ``weights_only=True``.
    """
    with atomic_writer(path, fsync=True) as fh:
        torch.save(state, fh)


def _refused_global(exc: BaseException) -> str | None:
    """The function or class a weights-only load refused to call (``posix.system``), if that was why."""
    found = re.findall(r"GLOBAL ([\w.]+)", str(exc))
    return found[0] if found else None


def _first_reason(exc: BaseException) -> str:
    text = str(exc)
    if "WeightsUnpickler error:" in text:  # torch's reason, after several lines of advice
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _weights_only_load(path: Path, map_location: str | torch.device, mmap: bool) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` of a pointmamba checkpoint, its errors in one line naming the file.
    ``mmap``: map the file instead of reading it (tensors are read only when touched); a file torch cannot
    map (the pre-zip format) is read whole."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with torch.serialization.safe_globals(_legacy_numpy_globals()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols before refusing a file
            try:
                state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
            except RuntimeError as exc:
                if not mmap or "mmap" not in str(exc):
                    raise
                state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several types for truncated/garbage files
        call = _refused_global(exc)
        if call is not None:
            raise UnsafeCheckpointError(
                f"{path}: refused to load: its pickle calls {call}, which could run code on this machine; "
                "pointmamba checkpoints hold only weights and plain data (load files only from sources you trust)"
            ) from None
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt, truncated or not written by "
                              f"torch.save): {_first_reason(exc)}") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not a pointmamba checkpoint (no 'model' entry)")
    return state


def stored_config(path: str | Path) -> dict[str, Any]:
    """The resolved config stored in checkpoint ``path`` (see :func:`checkpoint_config`), its weights left
    unread: the file is mapped, not loaded, so a tool that needs the config before it builds the network
    does not read the weights twice (0.2-0.4 s for the shipped pair). The weights are checked when
    :func:`load_checkpoint` reads them."""
    path = Path(path)
    return checkpoint_config(_weights_only_load(path, "cpu", mmap=True), path)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint`` (weights-only unpickling: no code runs).

    Raises :class:`UnsafeCheckpointError` for a pickle that would call anything else, and
    :class:`CheckpointError` naming the file for a missing, corrupt or foreign one.
    """
    path = Path(path)
    state = _weights_only_load(path, map_location, mmap=False)
    check_weights(state["model"], path)
    state["model"] = upgrade_weights(state)
    members = state.get("average_with")  # more networks averaged at inference (inference/averaged_networks.py)
    if members is not None:
        if not isinstance(members, list) or not all(isinstance(m, dict) and "model" in m for m in members):
            raise CheckpointError(f"{path}: 'average_with' must be a list of networks, each with a 'model' entry")
        for k, member in enumerate(members, 2):
            check_weights(member["model"], f"{path} (network {k} of {len(members) + 1})")
            member["model"] = upgrade_weights(member)
    return state


def check_weights(weights: Any, path: str | Path) -> None:
    """Raise CheckpointError unless ``weights`` maps names to tensors with finite values: a NaN weight
    makes every prediction NaN (and aborted the graph cut natively)."""
    if not isinstance(weights, dict):
        raise CheckpointError(f"{path}: 'model' must map weight names to tensors, got {type(weights).__name__}")
    for name, value in weights.items():
        if not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{path}: weight {str(name)[:80]!r} is a {type(value).__name__}, not a tensor")
        if (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())  # counted only for the message: one test per tensor
            raise CheckpointError(f"{path}: weight {name!r} holds {bad} NaN or infinite value(s) of "
                                  f"{value.numel()}: the run diverged or the file is damaged; use an earlier "
                                  "checkpoint")


def checkpoint_config(state: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The config stored in checkpoint ``state``, resolved and checked by the rules of a config file (keys,
    types, ranges: a crafted ``enc_channels: [1e6, 1e6]`` is refused before anything is allocated); its
    ``model`` and ``data`` sections must be there."""
    from ..config import ConfigError, drop_retired, resolve_config

    stored = state.get("config")
    if not isinstance(stored, dict):
        raise CheckpointError(f"{path}: no config stored in the checkpoint")
    missing = [k for k in ("model", "data") if not isinstance(stored.get(k), dict)]
    if missing:  # unlike a config file's, these are facts of the training (classes, grid, channels), not choices
        raise CheckpointError(f"{path}: its stored config has no {' or '.join(repr(k) for k in missing)} section: "
                              "cannot tell how the model was trained (classes, grid size, input channels)")
    user = {k: v for k, v in stored.items() if not (isinstance(k, str) and k.startswith("_"))}
    user = drop_retired(user, str(path))  # a key retired since it was written (config.RETIRED)
    user = _without_unknown_infer_keys(user, path)
    try:
        return resolve_config(user, f"{path}: its stored config")
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None


def _without_unknown_infer_keys(user: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """``user`` without the ``infer`` options this version does not know, with a warning naming them.

    Inference options are choices made at prediction time, not facts of the training: a checkpoint written
    by another version (one with an option since removed, or not yet added) must still load. Every other
    section stays strict."""
    from ..inference.config import INFER_DEFAULTS

    infer = user.get("infer")
    if not isinstance(infer, dict):
        return user
    unknown = [k for k in infer if k not in INFER_DEFAULTS]
    if not unknown:
        return user
    warnings.warn(f"{path}: its stored config sets inference option(s) this version does not know, ignored: "
                  f"{', '.join('infer.' + str(k) for k in unknown)}", stacklevel=3)
    return {**user, "infer": {k: v for k, v in infer.items() if k in INFER_DEFAULTS}}


def upgrade_weights(state: dict[str, Any]) -> dict[str, Any]:
    """The model weights of checkpoint ``state`` in today's layout.

    Checkpoints written before RelPos's warm-up state (``enabled``, ``ramp``) was in the weights kept it
    only as the warm-up hook's ``factor``: each RelPos module (found by its ``running_scale`` buffer) gets
    the two buffers from that factor (absent: fully on), so a ``best.pth`` saved during warm-up still
    evaluates with RelPos off.
    """
    weights = dict(state["model"])
    hooks = state.get("hooks") if isinstance(state.get("hooks"), dict) else {}
    factor = (hooks.get("warmup") or {}).get("factor")
    factor = 1.0 if factor is None else float(factor)
    for key in [k for k in weights if k.endswith(".running_scale")]:
        prefix = key[: -len("running_scale")]
        if prefix + "ramp" not in weights:
            weights[prefix + "enabled"] = torch.tensor(factor > 0.0)
            weights[prefix + "ramp"] = torch.tensor(factor)
    return weights


RESUME_STATE = {"optimizer": dict, "scheduler": dict, "epoch": int, "iteration": int, "best_miou": (int, float),
                "nonfinite_total": int, "rng": dict, "hooks": dict}
"""What a checkpoint needs to be resumed from (beyond ``model``), with its types."""


def check_resume_state(state: dict[str, Any], path: str | Path) -> None:
    """Raise CheckpointError naming the entry unless ``state`` holds a training state to resume (a compact
    model file or a foreign checkpoint holds weights only)."""
    for key, kind in RESUME_STATE.items():
        if key not in state:
            raise CheckpointError(f"{path}: cannot resume from it: no {key!r} entry (a model file, not a training "
                                  "checkpoint?)")
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise CheckpointError(f"{path}: cannot resume from it: {key!r} is a {type(state[key]).__name__}")
    if state["epoch"] < 0 or state["iteration"] < 0:
        raise CheckpointError(f"{path}: cannot resume from it: negative epoch or iteration")


# ------------------------------------------------------------------------------ model compatibility
def model_config_diff(checkpoint_cfg: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """``["model.enc_channels: checkpoint [16, 16], config [32, 32]", ...]`` for every model key whose
    value differs (keys a checkpoint predates count with their default)."""
    from ..models.config import resolve_model_config

    def resolved(c: dict[str, Any]) -> dict[str, Any]:
        try:
            return resolve_model_config(c.get("model") or {})
        except ValueError:
            return dict(c.get("model") or {})

    a, b = flatten(resolved(checkpoint_cfg), "model."), flatten(resolved(cfg), "model.")
    missing = object()
    return [f"{k}: checkpoint {a.get(k, '<absent>')!r}, config {b.get(k, '<absent>')!r}"
            for k in sorted(set(a) | set(b)) if a.get(k, missing) != b.get(k, missing)]


def check_model_config(state: dict[str, Any], cfg: dict[str, Any], path: str | Path) -> None:
    """Raise CheckpointError in one line naming the differing keys when ``cfg`` builds another model than
    the one stored in the checkpoint ``state`` (nothing is checked if it stores no config)."""
    if not isinstance(state.get("config"), dict):
        return
    diff = model_config_diff(state["config"], cfg)
    if diff:
        raise CheckpointError(f"{path}: the config's model differs from the checkpoint's in {len(diff)} key(s): "
                              + "; ".join(diff[:8]) + ("; ..." if len(diff) > 8 else "")
                              + input_hint(state["config"], cfg))


def input_hint(checkpoint_cfg: dict[str, Any], cfg: dict[str, Any]) -> str:
    """``" (the checkpoint's input is set by data: --set ...)"`` where the two configs feed the network different
    input channels, else ``""``: the fix is a data switch, which the model keys alone do not name."""
    from ..config import input_channels, input_features

    stored = checkpoint_cfg.get("data") or {}
    if input_channels(stored) == input_channels(cfg.get("data") or {}):
        return ""
    f = input_features(stored)
    sets = " ".join(f"data.{k}={str(v).lower()}" for k, v in f.items())
    return f" (the checkpoint's input is set by data: --set {sets} model.in_channels={input_channels(stored)})"


def load_model_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor], path: str | Path) -> None:
    """``model.load_state_dict(weights)`` with a one-line summary instead of torch's dump on a mismatch."""
    own = model.state_dict()
    missing = [k for k in own if k not in weights]
    unexpected = [k for k in weights if k not in own]
    shapes = [f"{k} {tuple(weights[k].shape)} vs {tuple(own[k].shape)}" for k in own
              if k in weights and hasattr(weights[k], "shape") and tuple(weights[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            parts.append(f"{len(shapes)} shape mismatch(es) (checkpoint vs model), first {shapes[0]}")
        if missing:
            parts.append(f"{len(missing)} weight(s) missing, first {missing[0]}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected weight(s), first {unexpected[0]}")
        raise CheckpointError(f"{path}: weights do not fit the model config: " + "; ".join(parts))
    model.load_state_dict(weights)
