"""pointmamba: tooth segmentation of intraoral scans with bidirectional Mamba over space-filling curves."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Segmentation", "Segmenter", "build_model"]


def __getattr__(name: str):  # noqa: ANN202 - lazy, so `import pointmamba` stays light
    if name in ("Segmenter", "Segmentation"):
        import sys

        if "torch" not in sys.modules:  # early in a script: the tools' CPU settings (pointmamba/utils/cpu_runtime.py)
            from .utils.cpu_runtime import tune_cpu_runtime

            tune_cpu_runtime()
        from .inference import segmenter, segmentation

        return getattr(segmenter if name == "Segmenter" else segmentation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_model(cfg):  # noqa: ANN001, ANN201 - thin lazy re-export keeps `import pointmamba` light
    """Build the segmentation network from a config (see ``pointmamba.models.network``)."""
    from .models.network import build_model as _build

    return _build(cfg)
