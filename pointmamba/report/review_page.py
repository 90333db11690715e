"""A self-contained review page for many segmented scans (``tools/predict.py ... --report DIR/index.html``).

One HTML file that opens from disk with no network: a grid of every scan (thumbnail, teeth found, review
flags, metrics where a reference was given), sortable by confidence; a click opens an interactive 3D view
(rotate, zoom, teeth coloured by FDI with their numbers, hover shows the number and its confidence; with
a reference, toggles for the reference and the wrong vertices).

The 3D view is plotly.js (its ``gl3d`` bundle, vendored in ``vendor/`` and inlined once). Meshes travel as
base64 little-endian typed arrays (float32 positions in the canonical frame, uint16/uint32 faces, uint8
FDI labels), decoded in the browser only when a scan is opened, so the page is about the size of the
meshes in a binary format plus the viewer (1.75 MB) and the thumbnails.
"""
from __future__ import annotations

import base64
import io
import json
import re
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
VIEWER = HERE / "vendor" / "plotly-gl3d.min.js"
THUMBNAIL_PX = 360


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def thumbnail(png: str | PathLike | bytes, size: int = THUMBNAIL_PX) -> str:
    """A small PNG of a picture (a path or PNG bytes) as a ``data:`` URL (64-colour palette)."""
    from PIL import Image

    src = io.BytesIO(png) if isinstance(png, bytes) else png
    with Image.open(src) as img:
        img = img.convert("RGB")
        img.thumbnail((size, size))
        small = img.quantize(colors=64)
    buf = io.BytesIO()
    small.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class ReviewPage:
    """Collects scans as they are segmented (compact, encoded) and writes the page (:meth:`write`)."""

    def __init__(self, title: str = "pointmamba review", model: str = "") -> None:
        self.title = title
        self.model = model
        self.scans: list[dict[str, Any]] = []

    def add(self, result: Any, reference: np.ndarray | None = None, metrics: dict[str, Any] | None = None,
            picture: str | PathLike | bytes | None = None, source: str | None = None) -> None:
        """Add a :class:`~pointmamba.segmentation.Segmentation`; ``reference`` FDI labels per vertex and
        their ``metrics`` (``Segmentation.compare``) where known; ``picture`` a PNG of it (thumbnail)."""
        from ..data import class_colors, fdi_to_class

        labels = np.asarray(result.labels)
        faces = np.asarray(result.faces)
        small = len(result.vertices) < 2 ** 16
        colors = class_colors(result.num_classes)
        present = np.unique(labels if reference is None else np.concatenate([labels, reference]))
        palette = {int(f): "#%02x%02x%02x" % tuple(colors[int(c)])
                   for f, c in zip(present, fdi_to_class(present, result.jaw, result.num_classes))}
        conf = result.confidence
        self.scans.append({
            "name": result.name, "jaw": result.jaw, "source": source or str(result.source or result.name),
            "vertices": int(len(labels)), "teeth": result.teeth, "review": conf.review,
            "reasons": list(conf.reasons),
            "min_confidence": None if conf.min_confidence is None else round(conf.min_confidence, 4),
            "confidence": [{"fdi": t.fdi, "confidence": round(t.confidence, 4), "runner_up": t.runner_up,
                            "runner_up_confidence": round(t.runner_up_confidence, 4)} for t in conf.teeth],
            "metrics": None if metrics is None else _plain(metrics),
            "thumbnail": None if picture is None else thumbnail(picture),
            "palette": palette,
            "mesh": {"positions": _b64(np.asarray(result.aligned, dtype="<f4")),
                     "faces": _b64(faces.astype("<u2" if small else "<u4")), "index_bytes": 2 if small else 4,
                     "labels": _b64(labels.astype(np.uint8)),
                     "reference": None if reference is None else _b64(np.asarray(reference).astype(np.uint8))},
        })

    def html(self) -> str:
        data = json.dumps({"model": self.model, "scans": self.scans}, separators=(",", ":"))
        parts = {
            "TITLE": _escape(self.title),
            "STYLE": (HERE / "page.css").read_text(),
            "DATA": data.replace("</", "<\\/"),  # never closes its <script> element
            "PLOTLY": VIEWER.read_text(),
            "APP": (HERE / "page.js").read_text(),
        }
        template = (HERE / "page.html").read_text()
        # one pass, so that nothing inserted is read as a placeholder
        return re.sub(r"\{\{(TITLE|STYLE|DATA|PLOTLY|APP)\}\}", lambda m: parts[m.group(1)], template)

    def write(self, path: str | PathLike) -> Path:
        """Write the page atomically and return its path."""
        from ..atomic_file import atomic_write

        return atomic_write(path, self.html().encode("utf-8"))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy numbers as Python ones, dict keys as strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
