"""pointmamba: tooth segmentation of intraoral scans with bidirectional Mamba over space-filling curves."""
from __future__ import annotations

__version__ = "0.1.0"


def build_model(cfg):  # noqa: ANN001, ANN201 - thin lazy re-export keeps `import pointmamba` light
    """Build the segmentation network from a config (see ``pointmamba.models.network``)."""
    from .models.network import build_model as _build

    return _build(cfg)
