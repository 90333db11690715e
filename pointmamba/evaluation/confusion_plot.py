"""Confusion-matrix picture as a PNG (matplotlib Agg, no pyplot state)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def plot_confusion(
    matrix: Any,
    class_names: Sequence[str],
    path: str | Path,
    normalize: bool = True,
    title: str | None = None,
    annotate: bool | None = None,
) -> Path:
    """Draw ``matrix`` (rows = target, columns = prediction) to the PNG ``path`` and return the path.

    ``matrix`` is a (C, C) array / tensor or a ``ConfusionMatrix``. With ``normalize`` each row is divided
    by its sum (recall per target class; rows with no points stay 0). Cell values are written into the
    cells when ``annotate`` is True, by default only for up to 20 classes (33 FDI classes are unreadable).
    """
    if hasattr(matrix, "matrix") and hasattr(matrix, "num_classes"):  # ConfusionMatrix
        matrix = matrix.matrix
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().numpy()
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"plot_confusion: matrix must be square (C, C), got shape {m.shape}")
    c = m.shape[0]
    names = [str(n) for n in class_names]
    if len(names) != c:
        raise ValueError(f"plot_confusion: {len(names)} class names for a {c}x{c} matrix")
    if normalize:
        rows = m.sum(axis=1, keepdims=True)
        m = np.divide(m, rows, out=np.zeros_like(m), where=rows > 0)
    if annotate is None:
        annotate = c <= 20

    size = max(4.0, 0.35 * c + 2.0)
    fig = Figure(figsize=(size + 1.0, size), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(m, cmap="Blues", vmin=0.0, vmax=1.0 if normalize else None, interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="fraction of target row" if normalize else "count")
    ax.set_xticks(range(c), labels=names, rotation=90, fontsize=8)
    ax.set_yticks(range(c), labels=names, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("target")
    ax.set_title(title or ("confusion matrix (row-normalised)" if normalize else "confusion matrix"))
    if annotate:
        top = m.max() if m.size else 0.0
        for i in range(c):
            for j in range(c):
                v = m[i, j]
                text = f"{v:.2f}" if normalize else f"{int(v)}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if top > 0 and v > 0.5 * top else "black")
    fig.tight_layout()
    from ..utils.atomic_file import save_figure

    return save_figure(fig, path)
