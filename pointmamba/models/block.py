"""Old name of :mod:`pointmamba.models.mamba_block` (``MambaBlock``, ``DropPath``), kept for imports."""
from .mamba_block import DropPath, MambaBlock  # noqa: F401

__all__ = ["DropPath", "MambaBlock"]
