"""Configuration: YAML files with inheritance, dotted command-line overrides, validation against defaults.

The defaults below (and ``MODEL_DEFAULTS`` of the network) are the schema: a config may only set keys
that exist there, with a value of the same type. A file may inherit with ``_base_: other.yaml`` (or a
list; paths relative to the file); later files and ``--set key=value`` overrides win.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from .inference.config import INFER_DEFAULTS

DATA_DEFAULTS: dict[str, Any] = {
    # Teeth3DS-layout directory (<ID>/<ID>_<jaw>.obj + .json), or a list of them (scan names unique
    # across them; split files live in the first unless split_dir says otherwise)
    "root": "data/synthetic",
    "synthetic_count": 0,  # > 0: generate this many synthetic patients into `root` if it has no scans
    "synthetic_vertices": 12000,  # vertices per generated jaw
    "split_dir": None,  # where train.txt/val.txt/test.txt live (default: root)
    "train_split": "train",  # split name (reads <split_dir>/<name>.txt; "all": every scan) ...
    "val_split": "val",
    "test_split": "test",
    "train_names": None,  # ... or an explicit list of scan names (<ID>_<jaw> or <ID>), overriding the split file
    "val_names": None,
    "test_names": None,
    "train_exclude": None,  # names (<ID>_<jaw> or <ID>) left out of the training set, e.g. the val patients
    "num_classes": 17,  # 17 (per jaw, lower shifted by -20) or 33 (both jaws)
    "jaw": None,  # "upper", "lower" or None for both
    "grid_size": 0.2,  # mm; voxel size of grid sampling and of the network's first grid
    "max_points": 16000,  # point cap per training scan after grid sampling (None: no cap)
    "align": True,  # canonical pose (PCA, occlusal axis up) before augmentation
    # training augmentation: true (DEFAULT_AUGMENT), false (none) or a mapping with DEFAULT_AUGMENT's keys
    # (keys left out take the defaults; a key set to null turns that step off)
    "augment": True,
    "jaw_feature": False,  # one more input channel: +1 upper, -1 lower jaw (model.in_channels: input_channels())
    # the centred coordinates as 3 input channels; false leaves the network only normals (+ jaw) and the
    # points' relative positions (convolutions, serialization): an ablation of counting from the midline
    "coord_feature": True,
    "cache_dir": None,  # preprocessing cache (default: $POINTMAMBA_CACHE or ~/.cache/pointmamba)
    "num_workers": 0,  # DataLoader worker processes (0: the loader runs in a thread one batch ahead of the step)
    # roots whose labels are positions along the arch, not tooth identities (where teeth are missing, the
    # numbers behind the gap are shifted): their arches that miss a tooth weigh position_label_weight in
    # the loss, and only their complete arches get missing-tooth augmentation
    "position_label_roots": [],
    "position_label_weight": 1.0,
    # missing-tooth augmentation (pointmamba/data/missing_teeth.py): false (off), true (its defaults) or a
    # mapping with its keys; training only, identity-labelled arches only
    "missing_teeth": False,
    # training scans drawn more than once an epoch, {<ID>_<jaw> or <ID>: times}, each draw with its own
    # augmentation (pointmamba/data/repeated_scans.py); {}: off. The fine-tune on a clinic's corrections
    # (tools/train.py --corrections) draws its corrected scans this way; repeating rare kinds of arch in
    # the recipe gained nothing (docs/results/numbering)
    "scan_repeats": {},
}

TRAIN_DEFAULTS: dict[str, Any] = {
    "epochs": 20,
    "batch_size": 2,  # scans per step (per process under DDP)
    "optimizer": "adamw",
    "lr": 0.002,
    "weight_decay": 0.05,
    "betas": [0.9, 0.999],
    "schedule": "onecycle",  # onecycle | cosine | constant
    "lr_warmup_pct": 0.05,  # fraction of steps with linear lr warm-up (onecycle / cosine)
    "grad_clip": 1.0,  # max gradient norm (0: off)
    "amp": True,  # mixed precision on CUDA (ignored on CPU)
    "val_interval": 1,  # validate every N epochs (0: never)
    "log_interval": 10,  # TensorBoard scalars every N steps
    "max_nonfinite": 5,  # stop after this many non-finite losses in a row
    "max_steps_per_epoch": None,  # cap steps per epoch (quick runs, tests)
    "device": "auto",  # auto | cpu | cuda
    "label_smoothing": 0.0,
    # class-balanced loss: tooth class c weighs (freq_c / median tooth freq) ** -class_balance (clipped to
    # [1/4, 4]; gingiva 1), counted on the training labels; 0: plain cross-entropy. Rare classes (third
    # molars) are otherwise drowned by the others
    "class_balance": 0.0,
    "progress": True,  # tqdm progress bars
    "init_from": None,  # fine-tune: start from this checkpoint's weights ("pretrained": the shipped model)
}

DIAGNOSTICS_DEFAULTS: dict[str, Any] = {
    "interval": 0,  # steps between diagnostics (0: off)
    # also on the first step (the model at init) and the last step of every epoch, whatever the interval;
    # those are the points the ablation table compares (init, epoch 1, epoch 10)
    "epoch_ends": False,
    "histograms": True,  # gate values and normalized distances as TensorBoard histograms
    "explode_ratio": 0.1,  # flag grad-norm/param-norm above this
    "vanish_ratio": 1e-5,  # flag grad-norm/param-norm below this
}

_TAG = "retired after tag pre-renovation (commit 483fb29)"
# Keys removed with their code: each failed its own pre-registered rule. A config file or --set naming one
# is refused; a checkpoint's stored config loses them (see drop_retired). The tag reproduces each study.
RETIRED: dict[str, str] = {
    "data.relabel_closed_extractions": f"{_TAG}: no gain on either split (docs/results/numbering)",
    "data.relabel_counted_sides": f"{_TAG}: no gain, closed-space removals worse (docs/results/numbering)",
    "data.missing_teeth.close": f"{_TAG}: closing removed teeth's spaces did not help (docs/results/numbering)",
    "data.missing_teeth.close_min": f"{_TAG}: went with data.missing_teeth.close (docs/results/numbering)",
    "data.augment.shift_mm": f"{_TAG}: shifting the scan did not help (docs/results/numbering)",
    "infer.tooth_decoding": f"{_TAG}: it failed its rule (docs/results/numbering)",
    "infer.tooth_relabel": f"{_TAG}: replaced by infer.instance_numbering (docs/results/numbering)",
    "infer.decoding_width_weight": f"{_TAG}: went with infer.tooth_decoding (docs/results/numbering)",
    "infer.shape_weight": f"{_TAG}: tooth-shape evidence was a net loss held out (docs/results/tooth_shape)",
    "infer.shape_model": f"{_TAG}: tooth-shape evidence was a net loss held out (docs/results/tooth_shape)",
    "infer.shape_floor": f"{_TAG}: tooth-shape evidence was a net loss held out (docs/results/tooth_shape)",
    "infer.tooth_weight": f"{_TAG}: the bare-ridge check failed its rule (docs/results/bare_ridge)",
    "infer.max_input_points": f"{_TAG}: thinning dense scans failed its rule (docs/results/scan_density)",
    "infer.graph_cut_density_angles": f"{_TAG}: it failed its rule (docs/results/scan_density)",
    "infer.mend_split": f"{_TAG}: merging split teeth failed its rule (docs/results/review_flag)",
    "infer.merge_cut_teeth": "retired at once: it failed its rule held out; its code is at commit 6481640 "
                             "(docs/results/review_flag)",
    "infer.deal_views": "retired at once: it failed its rule held out (split B's 10th percentile); its code is "
                        "at commit af073b7 (docs/results/predict_speed)",
    "infer.hole_fill": "retired at once: it failed its rule (0.076 s on a 201k-vertex scan, 0.05 asked); its code "
                       "is at commit d4693d5 (docs/results/hole_fill)",
    "infer.pose_parts": "retired at once: it failed its rule (7 of 40 shared scans with islands moved >0.005, 6 of "
                        "87 fragment variants >0.01, 0.089 s); its code is at commit 2fc39dd "
                        "(docs/results/export_variants)",
    "infer.dispute_confidence": "retired at once: it failed its rule held out (tooth AUC +0.014 / +0.002, "
                                "0.02 asked); its code is at commit a3158d3 (docs/results/review_flag)",
    "train.distill_from": "retired at once: the distilled student failed its rule held out (split A: mean "
                          "-0.007, kept -2 scans, removal check 21 % against the pair's 10 %); its code is at "
                          "commit 959eb66 (docs/results/distillation)",
    "train.distill_weight": "retired with train.distill_from; its code is at commit 959eb66 (docs/results/distillation)",
    "train.distill_temperature": "retired with train.distill_from; its code is at commit 959eb66 "
                                 "(docs/results/distillation)",
    "infer.numbering_missing_floor": "retired at once: 0.15 failed its rule held out (split A mean -0.002, "
                                     "removal check worse); its code is at commit b858172 (docs/results/review_flag)",
    "infer.unpair_packed": "retired at once: it failed its rule held out (split A mean -0.002, IOS004_upper and "
                           "IOS068_lower -0.03 each); its code is at commit 7ccbc90 (docs/results/review_flag)",
    "data.missing_teeth.partial": "retired at once: cutting training arches to partial scans (0.3, both networks "
    "or the no-coordinates one) failed its rule on split B (removal check), and 0.15 in the no-coordinates one on "
    "both splits (split A's mean and kept, the removal check on both); code at commits e87edab and 34fd348 "
    "(docs/results/partial_arches)",
    "data.missing_teeth.partial_min_teeth": "retired at once: went with data.missing_teeth.partial (commit e87edab, "
    "docs/results/partial_arches)",
    "infer.numbering_unnumbered_cost": "retired at once: 4.65 and 2.3 failed their rule held out (split A's "
                                       "removal check 7.3 -> 6.7 / 6.4 %, 1 point asked, teeth changed 29 -> "
                                       "40 / 39); its code is at commit 397a94d (docs/results/review_flag)",
    "infer.dentition_pairs": "retired at once: it changed no val scan on either split (the rule asked +0.02 on the "
                             "pattern arches with the dentition given); its code is at commit 24e8955 "
                             "(docs/results/review_flag)",
    "data.dentition_feature": "retired at once: the dentition as an input of the network without coordinates "
                              "failed its rule held out (the pattern arches with the dentition given +0.030 on "
                              "split A, +0.05 asked, and -0.094 on split B); its code is at commits f31f9d6 and "
                              "baa561d (docs/results/review_flag)",
    "infer.mend_unnumbered_regions": "retired at once: a space the dropped-tooth mend added, numbered without the "
                                     "width floor, failed its rule held out (split B's removal check 2.1 -> 7.4 %: "
                                     "partly shown third molars come and go); its code is at commit 6442310 "
                                     "(docs/results/review_flag)",
}
# the stored values under which a retired key did nothing that the code left does not do (a checkpoint
# holding one of them loads silently; any other value is dropped with a warning)
_RETIRED_INERT: dict[str, tuple[Any, ...]] = {
    "data.relabel_closed_extractions": (False,),
    "data.relabel_counted_sides": (False,),
    "data.missing_teeth.close": (0, 0.0),
    "data.missing_teeth.close_min": (0.6,),
    "data.augment.shift_mm": (0, 0.0),
    "infer.tooth_decoding": (False,),
    "infer.tooth_relabel": (False,),  # and True where infer.instance_numbering is on (it replaced the relabel)
    "infer.decoding_width_weight": (0.1,),
    "infer.shape_weight": (None, 0, 0.0),
    "infer.shape_model": (None,),
    "infer.shape_floor": (0, 0.0),
    "infer.tooth_weight": (None, 0, 0.0),
    "infer.max_input_points": (None,),
    "infer.graph_cut_density_angles": (False,),
    "infer.mend_split": (False,),
    "infer.merge_cut_teeth": (False,),
    "infer.deal_views": (False,),
    "infer.dispute_confidence": (False,),
    "infer.hole_fill": (False,),
    "infer.pose_parts": (False,),
    "infer.numbering_missing_floor": (0.05,),
    "infer.unpair_packed": (False,),
    "data.missing_teeth.partial": (0, 0.0),
    "data.missing_teeth.partial_min_teeth": (3,),
    "infer.numbering_unnumbered_cost": (0, 0.0),
    "infer.dentition_pairs": (False,),
    "data.dentition_feature": (False,),
    "infer.mend_unnumbered_regions": (False,),
    "train.distill_from": (None,),
    # train.distill_weight and train.distill_temperature: any value without a teacher, none with one (_inert)
}


def _find(cfg: Any, key: str) -> tuple[dict[str, Any], str] | None:
    """(the mapping holding dotted ``key``'s last part, that part) where ``cfg`` sets ``key``, else None."""
    *path, last = key.split(".")
    node = cfg
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return (node, last) if isinstance(node, dict) and last in node else None


def refuse_retired(cfg: dict[str, Any], where: str) -> None:
    """ConfigError in one line naming the key, ``where`` (a file, an override) and the reason, for the first
    key of :data:`RETIRED` that ``cfg`` (a config as written, not resolved) sets."""
    for key, reason in RETIRED.items():
        if _find(cfg, key) is not None:
            raise ConfigError(f"{where}: config key {key!r} no longer exists ({reason}): remove it")


def _inert(key: str, value: Any, cfg: dict[str, Any]) -> bool:
    if key == "infer.tooth_relabel" and value is True:
        found = _find(cfg, "infer.instance_numbering")
        return found is None or found[0][found[1]] is not False
    if key in ("train.distill_weight", "train.distill_temperature"):  # they did nothing without a teacher
        found = _find(cfg, "train.distill_from")
        return found is None or found[0][found[1]] is None
    return any(value is v or (type(value) is type(v) and value == v) for v in _RETIRED_INERT[key])


def drop_retired(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """``cfg`` (a checkpoint's stored config) without the keys of :data:`RETIRED`; one warning naming those
    whose stored value did something the code no longer does (none for the values of ``_RETIRED_INERT``)."""
    import warnings

    found = [(key, _find(cfg, key)) for key in RETIRED]
    found = [(key, hit) for key, hit in found if hit is not None]
    if not found:
        return cfg
    out = copy.deepcopy(cfg)
    changed = [f"{key}={hit[0][hit[1]]!r} ({RETIRED[key]})" for key, hit in found if not _inert(key, hit[0][hit[1]], cfg)]
    for key, _ in found:
        node, last = _find(out, key)  # type: ignore[misc]
        del node[last]
    if changed:
        warnings.warn(f"{where}: its stored config sets retired option(s), now ignored: {'; '.join(changed)}",
                      stacklevel=3)
    return out


WARMUP_DEFAULTS: dict[str, Any] = {
    "epochs": 0,  # RelPos disabled for the first N epochs (0: on from the start)
    "ramp_epochs": 0,  # then its contribution ramps linearly from 0 to 1 over M epochs
}


def input_features(data: dict[str, Any]) -> dict[str, bool]:
    """The input switches of a ``data`` section as :func:`~pointmamba.data.dataset.make_item` takes them
    (a checkpoint's config older than a switch gets its default)."""
    return {"jaw_feature": bool(data.get("jaw_feature", False)), "coord_feature": bool(data.get("coord_feature", True))}


def input_parts(data: dict[str, Any]) -> list[tuple[str, int]]:
    """The network's input for a ``data`` section, in feature order, as (name, channels): centred
    coords (unless ``coord_feature`` is false), normals, the jaw (with ``jaw_feature``)."""
    f = input_features(data)
    return [(name, n) for name, n, on in (("coords", 3, f["coord_feature"]), ("normals", 3, True),
                                          ("jaw", 1, f["jaw_feature"])) if on]


def input_columns(outer: dict[str, Any], inner: dict[str, Any]) -> list[int]:
    """The columns of ``outer``'s input that a network of ``inner``'s input takes, in its order (one
    prepared batch serving networks of other inputs); KeyError naming the part ``outer`` lacks."""
    start, at = 0, {}
    for part, width in input_parts(outer):
        at[part] = list(range(start, start + width))
        start += width
    return [c for part, _ in input_parts(inner) for c in at[part]]


def input_channels(data: dict[str, Any]) -> int:
    """The network's input channels for a ``data`` section (the sum of :func:`input_parts`)."""
    return sum(n for _, n in input_parts(data))


def defaults() -> dict[str, Any]:
    """The full default config (a fresh copy)."""
    from .models.config import MODEL_DEFAULTS

    return copy.deepcopy(
        {
            "seed": 0,
            "work_dir": None,  # default: work_dirs/<config stem>
            "model": MODEL_DEFAULTS,
            "data": DATA_DEFAULTS,
            "train": TRAIN_DEFAULTS,
            "diagnostics": DIAGNOSTICS_DEFAULTS,
            "warmup": WARMUP_DEFAULTS,
            "infer": INFER_DEFAULTS,
        }
    )


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e-3`` as a string; accept the exponent forms people write for learning rates."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+][0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


class ConfigError(ValueError):
    """A config file or override that does not fit the schema."""


def _parse_yaml(text: str, where: str) -> Any:
    """YAML text -> data; ConfigError naming ``where`` for malformed, unreadable or absurdly nested text."""
    try:
        return _yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: malformed YAML: {exc}") from None
    except RecursionError:  # the parser recurses per level: [[[[...]]]] thousands deep
        raise ConfigError(f"{where}: a value is nested too deeply (lists or mappings thousands of levels "
                          "inside each other)") from None
    except ValueError as exc:  # e.g. a date like 2024-13-45, an integer of more than 4300 digits
        raise ConfigError(f"{where}: unreadable value: {exc}") from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): save the "
                          "file as UTF-8") from None
    data = _parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def _load_file(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: circular _base_ inheritance")
    data = _read_yaml(path)
    refuse_retired(data, str(path))
    bases = data.pop("_base_", None)
    if bases is None:
        bases = []
    elif isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        text = repr(bases)
        raise ConfigError(f"{path}: _base_ must be a file name or a list of file names, got "
                          f"{text[:80] + '...' if len(text) > 80 else text}")
    merged: dict[str, Any] = {}
    for base in bases:
        merged = merge(merged, _load_file(path.parent / base, seen + (path,)))
    return merge(merged, data)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Recursive merge: mappings merge key by key, anything else is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``{"a.b.c": value}`` (for comparing two configs key by key)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def parse_override(item: str) -> dict[str, Any]:
    """``a.b.c=value`` -> {"a": {"b": {"c": value}}}; the value is parsed as YAML (numbers, lists, null)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key.subkey=value")
    key, raw = item.split("=", 1)
    try:
        value = _yaml(raw) if raw != "" else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: cannot parse value: {exc}") from exc
    out: dict[str, Any] = {}
    node = out
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _type_ok(default: Any, value: Any) -> bool:
    if default is None or value is None:
        return True  # None defaults accept any type; None clears a setting
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def _validate_root(value: Any) -> None:
    if isinstance(value, str) and value:
        return
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        return
    raise ConfigError(f"config key 'data.root' must be a folder or a non-empty list of folders, got {value!r}")


def _validate_switch(name: str, value: Any, schema: dict[str, Any], build: Any, label: str) -> None:
    """A section that is true, false or a mapping of ``schema``'s keys, whose values ``build`` (the class
    applying them, raising ``"<label>: ..."``) checks."""
    if isinstance(value, bool):
        return
    if not isinstance(value, dict):
        raise ConfigError(f"config key {name!r} must be true, false or a mapping with keys "
                          f"{', '.join(sorted(schema))}, got {type(value).__name__} {value!r}")
    try:
        validate(value, schema, name + ".")
        build(value)
    except ValueError as exc:
        raise ConfigError(str(exc).replace(f"{label}:", f"config key {name!r}:")) from None


def _validate_missing_teeth(value: Any) -> None:
    from .data.missing_teeth import DEFAULT_MISSING_TEETH, MissingTeeth

    _validate_switch("data.missing_teeth", value, dict(DEFAULT_MISSING_TEETH), MissingTeeth, "MissingTeeth")


def resolve_missing_teeth(value: Any) -> dict[str, Any] | None:
    """``data.missing_teeth`` -> the mapping for :class:`~pointmamba.data.missing_teeth.MissingTeeth`, or None."""
    if value is None or value is False:
        return None
    return {} if value is True else dict(value)


def _validate_scan_repeats(value: Any) -> None:
    from .data.repeated_scans import check_scan_repeats

    try:
        check_scan_repeats(value)
    except ValueError as exc:
        raise ConfigError(f"config key {exc}") from None


def _validate_augment(value: Any) -> None:
    # resolve_augment: value checks (ranges, modes) by the class that applies them
    _validate_switch("data.augment", value, augment_defaults(), resolve_augment, "Augment")


def augment_defaults() -> dict[str, Any]:
    """DEFAULT_AUGMENT with lists for tuples (YAML-safe), as the schema of ``data.augment``."""
    from .data.augment import DEFAULT_AUGMENT

    return {k: list(v) if isinstance(v, tuple) else v for k, v in DEFAULT_AUGMENT.items()}


def resolve_augment(value: Any) -> dict[str, Any] | None:
    """``data.augment`` -> the mapping for :class:`~pointmamba.data.augment.Augment`, or None for off.

    true: the defaults; false/None: off; a mapping: the defaults with its keys replaced."""
    from .data.augment import Augment

    if value is None or value is False:
        return None
    out = augment_defaults()
    if isinstance(value, dict):
        out.update(value)
    Augment(out)  # raises ValueError with the offending key
    return out


def _validate_dentition(value: Any) -> None:
    from .inference.config import DENTITIONS

    if value not in DENTITIONS:
        raise ConfigError(f"config key 'infer.dentition' must be one of {', '.join(DENTITIONS)}, got {value!r}")


# keys whose value is not simply of its default's type: each checked by its own function
_SPECIAL = {"data.root": _validate_root, "data.augment": _validate_augment,
            "data.missing_teeth": _validate_missing_teeth, "data.scan_repeats": _validate_scan_repeats,
            "infer.dentition": _validate_dentition}


def validate(cfg: dict[str, Any], schema: dict[str, Any], where: str = "") -> None:
    """Raise ConfigError for a key not in ``schema`` or a value of the wrong type."""
    for key, value in cfg.items():
        name = f"{where}{key}"
        if name in _SPECIAL and key in schema:
            _SPECIAL[name](value)
            continue
        if name in RETIRED and key not in schema:
            raise ConfigError(f"config key {name!r} no longer exists ({RETIRED[name]}): remove it")
        if key not in schema:
            valid = ", ".join(sorted(schema))
            raise ConfigError(f"unknown config key {name!r}; valid keys{' under ' + where[:-1] if where else ''}: {valid}")
        default = schema[key]
        if isinstance(default, dict) and default:
            if not isinstance(value, dict):
                raise ConfigError(f"config key {name!r} must be a mapping with keys {', '.join(sorted(default))}")
            validate(value, default, name + ".")
        elif not _type_ok(default, value):
            raise ConfigError(
                f"config key {name!r} must be of type {type(default).__name__} (default {default!r}), "
                f"got {type(value).__name__} {value!r}"
            )


def resolve_config(user: dict[str, Any], where: str) -> dict[str, Any]:
    """Defaults <- ``user`` (a config as read from a file, or a checkpoint's stored config), validated: known
    keys and types, the rules between keys, value ranges. Raises ConfigError in one line starting with
    ``where`` (the file, or ``<overrides>``)."""
    from .config_ranges import range_errors

    cfg = defaults()
    try:
        validate(user, cfg)
        cfg = merge(cfg, user)
        want = input_channels(cfg["data"])
        if cfg["model"]["in_channels"] != want:
            parts = " + ".join(name for name, _ in input_parts(cfg["data"]))
            raise ConfigError(f"model.in_channels must be {want} with data.coord_feature="
                              f"{str(cfg['data']['coord_feature']).lower()} and data.jaw_feature="
                              f"{str(cfg['data']['jaw_feature']).lower()} ({parts}), got {cfg['model']['in_channels']}")
        if cfg["model"]["num_classes"] != cfg["data"]["num_classes"]:
            raise ConfigError(f"model.num_classes ({cfg['model']['num_classes']}) must equal data.num_classes "
                              f"({cfg['data']['num_classes']}): the head predicts the data's classes")
        if errors := range_errors(cfg):  # "train.batch_size must be >= 1", not the library's message later
            raise ConfigError(errors[0])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except RecursionError:  # a crafted checkpoint's config can nest a value far deeper than YAML allows
        raise ConfigError(f"{where}: a value is nested too deeply") from None
    return cfg


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """Defaults <- file (with its bases) <- overrides, validated. Returns a plain nested dict."""
    user: dict[str, Any] = {}
    if path is not None:
        user = _load_file(Path(path))
    for item in overrides:
        override = parse_override(item)
        refuse_retired(override, f"--set {item}")
        user = merge(user, override)
    cfg = resolve_config(user, str(path) if path is not None else "<overrides>")
    if cfg["work_dir"] is None:
        cfg["work_dir"] = str(Path("work_dirs") / (Path(path).stem if path is not None else "default"))
    cfg["_config_path"] = str(path) if path is not None else None
    return cfg


def resolve_infer(infer: dict[str, Any] | None, where: str = "infer") -> dict[str, Any]:
    """The whole ``infer`` section: ``INFER_DEFAULTS`` <- ``infer``, checked as a config file's is (types
    and ranges; ConfigError in one line starting with ``where`` and naming the key)."""
    return resolve_config({"infer": {} if infer is None else infer}, where)["infer"]


def dump_config(cfg: dict[str, Any], path: str | Path) -> None:
    """Write the resolved config as YAML (kept beside checkpoints for reproducibility)."""
    from .utils.atomic_file import atomic_write

    clean = {k: v for k, v in cfg.items() if not k.startswith("_")}
    atomic_write(path, yaml.safe_dump(clean, sort_keys=False).encode())
