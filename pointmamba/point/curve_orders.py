"""The space-filling-curve orders points can be serialized along (``pointmamba.point.serialization`` encodes them).

Kept free of torch so configs (``models/config.py``) can name them without importing it.
"""
from __future__ import annotations

ORDERS: tuple[str, ...] = ("z", "z-trans", "hilbert", "hilbert-trans")
"""z-order and Hilbert curves and their "-trans" variants (x and y swapped); also the default model orders."""
