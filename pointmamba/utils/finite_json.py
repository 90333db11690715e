"""JSON that every reader accepts: no NaN or Infinity, ever.

Python's ``json`` writes ``NaN`` / ``Infinity`` by default, which is not JSON: a browser's ``JSON.parse``
stops at it (a reference without teeth has ``"TLA": NaN``, and the review page went blank) and so do
strict readers elsewhere. Every JSON the package writes goes through :func:`dumps`: a value that is not
finite becomes ``null``, and ``allow_nan=False`` proves that none is left.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


_PLAIN = (int, bool, str, type(None))  # JSON-ready as they are (a float may be NaN)


def finite(value: Any) -> Any:
    """A JSON-ready copy of ``value``: NaN and +-Infinity as None, numpy scalars and arrays as Python
    numbers and lists, tuples as lists, dict keys as strings."""
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # a scan's labels are 100k+ integers: one pass of type checks, not a call per element
        if all(type(v) in _PLAIN for v in value):
            return list(value)
        return [finite(v) for v in value]
    if isinstance(value, np.ndarray) and (value.dtype.kind in "biu" or (value.dtype.kind == "f"
                                                                         and np.isfinite(value).all())):
        return value.tolist()
    if isinstance(value, (np.ndarray, np.generic)) or type(value).__name__ == "Tensor":  # torch's, unimported
        value = value.tolist()
        if isinstance(value, list):
            return finite(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` (``value``): non-finite numbers as ``null``; ``kwargs`` as for
    ``json.dumps`` (``indent``, ``separators``, ``default`` ...)."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)
