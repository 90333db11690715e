"""Teeth3DS label files: ``<ID>_<jaw>.json`` with ``id_patient``, ``jaw``, ``labels``, ``instances``.

``labels`` has one FDI number per OBJ vertex (file order, 0 = gingiva); ``instances`` one instance id
per vertex (0 = gingiva, 1..k one per tooth). Predictions are written in the same schema.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np

from ..utils.finite_json import dumps
from .errors import ScanFormatError
from .fdi import JAWS, VALID_FDI, check_jaw
from .mesh import atomic_write

REQUIRED_KEYS = ("id_patient", "jaw", "labels")
"""Keys every label file must have; ``instances`` is optional (derived from ``labels`` when absent)."""


@dataclass
class LabelFile:
    """The content of one Teeth3DS label file (arrays are int64)."""

    id_patient: str
    jaw: str
    labels: np.ndarray
    instances: np.ndarray | None
    path: Path | None = None


def _int_array(value: object, path: str | PathLike, key: str) -> np.ndarray:
    if not isinstance(value, list):
        raise ScanFormatError(path, key, f"must be a list of integers, got {type(value).__name__}")
    # bool is no label either; an integer beyond 64 bits is none (numpy would raise OverflowError)
    bad = next((i for i, x in enumerate(value) if type(x) is not int or not -2**63 <= x < 2**63), None)
    if bad is not None:
        text = repr(value[bad])
        raise ScanFormatError(path, key, f"must be a list of 64-bit integers; entry {bad} is "
                                         f"{text if len(text) <= 60 else text[:60] + '...'}")
    return np.asarray(value, dtype=np.int64).reshape(-1)


def load_json(path: str | PathLike) -> object:
    """The parsed content of a JSON file; :class:`ScanFormatError` naming it for text that is not JSON, not
    UTF-8, nested too deeply for Python (arrays 100k deep), or holds a number Python will not convert."""
    try:
        return json.loads(Path(path).read_bytes())
    except json.JSONDecodeError as exc:
        raise ScanFormatError(path, "json", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise ScanFormatError(path, "json", f"not UTF-8 text: {exc}") from None
    except RecursionError:
        raise ScanFormatError(path, "json", "arrays or objects nested too deeply (thousands of levels)") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ScanFormatError(path, "json", f"unreadable number: {str(exc).split(';')[0]}") from None


def check_fdi(labels: np.ndarray, jaw: str | None, path: str | PathLike | None, key: str = "labels") -> None:
    """Raise :class:`ScanFormatError` unless every label is 0 or an FDI number of ``jaw``.

    With ``jaw`` None, numbers of either jaw are accepted but not a mix of both.
    """
    if jaw is None:
        uniq = set(np.unique(labels).tolist())
        if uniq <= VALID_FDI["upper"] or uniq <= VALID_FDI["lower"]:
            return
        valid = VALID_FDI["upper"] | VALID_FDI["lower"]
        bad = sorted(uniq - valid)
        if not bad:
            raise ScanFormatError(path, key, "mixes upper (1x, 2x) and lower (3x, 4x) FDI numbers in one scan")
        where, rule = "any jaw", "0, 11-18, 21-28, 31-38, 41-48"
    else:
        valid = VALID_FDI[jaw]
        uniq = set(np.unique(labels).tolist())
        bad = sorted(uniq - valid)
        if not bad:
            return
        where, rule = f"the {jaw} jaw", "0, 11-18, 21-28" if jaw == "upper" else "0, 31-38, 41-48"
    first = int(np.flatnonzero(np.isin(labels, bad))[0])
    raise ScanFormatError(path, key, f"FDI number(s) {bad[:10]} not valid for {where} (valid: {rule}); "
                                     f"first at vertex {first} (0-based)")


def read_labels(path: str | PathLike, num_vertices: int | None = None) -> LabelFile:
    """Read and check a Teeth3DS label file; ``num_vertices`` (the mesh's) checks the label count."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: label file not found")
    doc = load_json(path)
    if not isinstance(doc, dict):
        raise ScanFormatError(path, "json", f"top level must be an object with keys {REQUIRED_KEYS}, got "
                                            f"{type(doc).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in doc]
    if missing:
        raise ScanFormatError(path, missing[0], f"missing key(s) {missing} (has {sorted(doc)[:10]})")
    jaw = doc["jaw"]
    if not isinstance(jaw, str) or jaw.strip().lower() not in JAWS:
        raise ScanFormatError(path, "jaw", f"unknown jaw {jaw!r}; expected one of {JAWS}")
    jaw = jaw.strip().lower()
    id_patient = doc["id_patient"]
    if not isinstance(id_patient, (str, int)):
        raise ScanFormatError(path, "id_patient", f"must be a string, got {type(id_patient).__name__}")
    labels = _int_array(doc["labels"], path, "labels")
    if len(labels) == 0:
        raise ScanFormatError(path, "labels", "empty list (a scan has at least one vertex)")
    if num_vertices is not None and len(labels) != num_vertices:
        raise ScanFormatError(path, "labels", f"{len(labels)} labels but the mesh has {num_vertices} vertices "
                                              "(one label per vertex, in OBJ order)")
    check_fdi(labels, jaw, path)
    instances = None
    if "instances" in doc:
        instances = _int_array(doc["instances"], path, "instances")
        if len(instances) != len(labels):
            raise ScanFormatError(path, "instances", f"{len(instances)} instances but {len(labels)} labels")
        if len(instances) and instances.min() < 0:
            raise ScanFormatError(path, "instances", f"negative instance id {int(instances.min())}")
    return LabelFile(str(id_patient), jaw, labels, instances, path)


def instances_from_labels(labels: np.ndarray) -> np.ndarray:
    """Instance ids from FDI labels: 0 = gingiva, 1..k one per tooth (in increasing FDI order)."""
    labels = np.asarray(labels, dtype=np.int64)
    teeth, inverse = np.unique(labels, return_inverse=True)
    ids = np.cumsum(teeth > 0) * (teeth > 0)  # gingiva (and any non-positive value) -> 0
    return ids[inverse.reshape(-1)].astype(np.int64)


def save_labels(path: str | PathLike, labels: np.ndarray, jaw: str, id_patient: str,
                instances: np.ndarray | None = None, extra: dict | None = None) -> Path:
    """Write FDI ``labels`` (one per vertex) as a Teeth3DS JSON file, atomically (temp file + rename).

    ``instances`` default: one id per tooth (:func:`instances_from_labels`). ``extra``: more keys after
    the Teeth3DS ones (readers of the schema ignore them; they may not replace one). Raises ValueError for
    an unknown jaw or labels that are not valid FDI numbers of that jaw.
    """
    check_jaw(jaw)
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"save_labels: labels must be a 1-D integer array, got {labels.dtype} {labels.shape}")
    check_fdi(labels.astype(np.int64), jaw, path)
    if instances is None:
        instances = instances_from_labels(labels)
    instances = np.asarray(instances)
    if instances.shape != labels.shape:
        raise ValueError(f"save_labels: instances {instances.shape} and labels {labels.shape} differ in shape")
    doc = {"id_patient": str(id_patient), "jaw": jaw, "labels": labels.astype(int).tolist(),
           "instances": instances.astype(int).tolist()}
    clash = sorted(set(extra or {}) & set(doc))
    if clash:
        raise ValueError(f"save_labels: extra keys {clash} would replace Teeth3DS keys")
    doc.update(extra or {})
    return atomic_write(path, dumps(doc).encode())  # NaN / Infinity in ``extra`` as null: always JSON
