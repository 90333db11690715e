"""Pictures of a segmented scan: the mesh drawn as shaded triangles, coloured by tooth, FDI number on each
tooth; with a reference, the reference beside the prediction and the wrong vertices marked.

Drawn with matplotlib (Agg) so that it works on any machine without a display or GPU: triangles are
projected orthographically, sorted back to front (painter's algorithm) and shaded with a Lambert term
from a light above the viewer. Views: occlusal (looking onto the crowns) and frontal.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# (name, rotation from the canonical frame (crowns +z, incisors +y) to the view: x right, y up, z to viewer)
VIEWS = {
    "occlusal": np.eye(3),
    "frontal": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
}


def _draw(ax, vertices: np.ndarray, faces: np.ndarray, vertex_rgb: np.ndarray, rotation: np.ndarray,
          fdi: np.ndarray | None, wrong: np.ndarray | None) -> None:
    from matplotlib.collections import PolyCollection

    v = vertices @ rotation.T
    tri = v[faces]  # (F, 3, 3)
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    light = np.array([0.3, 0.4, 1.0]) / np.linalg.norm([0.3, 0.4, 1.0])
    shade = 0.35 + 0.65 * np.abs(normal @ light)  # two-sided: scans have no consistent winding
    rgb = vertex_rgb[faces].mean(1) * shade[:, None]
    order = tri[:, :, 2].mean(1).argsort()  # far first
    ax.add_collection(PolyCollection(tri[order, :, :2], facecolors=np.clip(rgb[order], 0, 1), edgecolors="none",
                                     antialiased=False))
    if wrong is not None and wrong.any():
        ax.scatter(v[wrong, 0], v[wrong, 1], s=1.5, c="black", linewidths=0, zorder=3)
    if fdi is not None:
        front = v[:, 2] > np.percentile(v[:, 2], 40)  # label where the view sees the tooth
        for t in np.unique(fdi):
            sel = (fdi == t) & front
            if t <= 0 or sel.sum() < 5:
                continue
            x, y = np.median(v[sel, :2], axis=0)
            ax.text(x, y, str(int(t)), fontsize=7, ha="center", va="center", zorder=4, color="black",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75})
    lo, hi = v[:, :2].min(0), v[:, :2].max(0)
    pad = 0.03 * (hi - lo).max()
    ax.set_xlim(lo[0] - pad, hi[0] + pad)
    ax.set_ylim(lo[1] - pad, hi[1] + pad)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def render_segmentation(path: str | Path, aligned: np.ndarray, faces: np.ndarray, fdi: np.ndarray,
                        colors: np.ndarray, classes: np.ndarray, title: str,
                        reference_fdi: np.ndarray | None = None, reference_classes: np.ndarray | None = None,
                        views: tuple[str, ...] = ("occlusal", "frontal")) -> Path:
    """Write a PNG of the segmented scan (see module doc) and return its path.

    ``aligned`` (V, 3) vertices in the canonical frame; ``classes`` index ``colors`` (uint8 RGB table);
    ``fdi`` the numbers written on the teeth. With ``reference_*`` a reference row is drawn above the
    prediction and vertices whose predicted FDI differs are marked black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..atomic_file import save_figure

    rows = [("prediction", classes, fdi, None)]
    if reference_fdi is not None and reference_classes is not None:
        wrong = reference_fdi != fdi
        rows = [("reference", reference_classes, reference_fdi, None),
                (f"prediction ({wrong.mean():.1%} of vertices wrong, marked black)", classes, fdi, wrong)]
    fig, axes = plt.subplots(len(rows), len(views), figsize=(5.2 * len(views), 4.4 * len(rows)), squeeze=False)
    for r, (name, cls, numbers, wrong) in enumerate(rows):
        rgb = colors[cls].astype(np.float64) / 255.0
        for c, view in enumerate(views):
            _draw(axes[r, c], aligned, faces, rgb, VIEWS[view], numbers, wrong)
            axes[r, c].set_title(f"{name}: {view}", fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    path = save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
