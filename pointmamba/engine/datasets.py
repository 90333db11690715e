"""Old name of :mod:`pointmamba.engine.data_builders`, kept for imports."""
from .data_builders import build_dataset, build_loader, ensure_data  # noqa: F401
