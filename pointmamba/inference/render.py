"""Pictures of a segmented scan: the mesh drawn as shaded triangles, coloured by tooth, FDI number on each
tooth; with a reference, the reference beside the prediction and the wrong vertices marked.

The mesh is rasterized here at the pixel size the picture has (:func:`rasterize`: a z-buffer of which
triangle is in front at each pixel centre, a numba loop over the faces in :mod:`.raster_kernel`), and Pillow
lays out the panels and writes the titles and numbers (matplotlib did; its import alone was 0.4-0.5 s of a
prediction). Triangles are projected
orthographically and flat-shaded with a Lambert term from a light above the viewer, as the picture
always was (matplotlib polygons, sorted back to front), with the nearest triangle winning each pixel
instead of the last one drawn. Views: occlusal (looking onto the crowns) and frontal.

:func:`render_thumbnail` draws the occlusal view alone at a review page card's size, with the FDI numbers in
a font that stays readable there (the four-panel picture shrunk to a card made them about 4 px tall).

Why not matplotlib polygons: 14 s for the 400k faces of a 200k-vertex scan; this path: about 0.3 s with the
z-buffer in numpy, less with it in numba (docs/results/predict_speed).
PyVista/VTK off-screen was measured too: a 560 MB dependency, 0.5 s to import and 1.6-2.9 s per
screenshot of that mesh here (software OpenGL).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

# (name, rotation from the canonical frame (crowns +z, incisors +y) to the view: x right, y up, z to viewer)
VIEWS = {
    "occlusal": np.eye(3),
    "frontal": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
}
_LIGHT = np.array([0.3, 0.4, 1.0]) / np.linalg.norm([0.3, 0.4, 1.0])


def rasterize(xy: np.ndarray, depth: np.ndarray, faces: np.ndarray, width: int, height: int) -> np.ndarray:
    """The front triangle at each pixel centre: (height, width) int64 face indices, -1 where none.

    ``xy`` (V, 2) vertex positions in pixels (x to the right, y up, pixel (i, j) centred at (i + 0.5,
    j + 0.5)); ``depth`` (V,) larger is nearer the viewer. Both windings count (scans have no consistent
    one); degenerate triangles cover nothing; of two at one depth the later face wins. Row 0 of the result is
    the bottom row.
    """
    from .raster_kernel import nearest_faces

    best_face = np.full(width * height, -1, dtype=np.int64)
    nearest_faces(np.ascontiguousarray(xy, dtype=np.float64), np.ascontiguousarray(depth, dtype=np.float64),
                  np.ascontiguousarray(faces, dtype=np.int64).reshape(-1, 3), int(width), int(height),
                  np.full(width * height, -np.inf), best_face)
    return best_face.reshape(height, width)


def _face_shading(v: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Lambert term per face (F,), two-sided: scans have no consistent winding."""
    from ..data.mesh import face_normals

    n = face_normals(v, faces)
    nx, ny, nz = n[:, 0], n[:, 1], n[:, 2]
    length = np.sqrt(nx * nx + ny * ny + nz * nz)
    return 0.35 + 0.65 * np.abs(nx * _LIGHT[0] + ny * _LIGHT[1] + nz * _LIGHT[2]) / np.maximum(length, 1e-12)


def _visible(hit: np.ndarray, v: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What a view's rasterized faces ``hit`` (-1: none) show: (the covered pixels' mask, the faces in the picture
    (k, 3), each covered pixel's index among them, each such face's shading). Only the faces in the picture are
    shaded (a 201k-vertex scan shows about a third of its 400k faces at this size); the rows of a picture share it."""
    seen = hit >= 0
    shown, where = np.unique(hit[seen], return_inverse=True)
    f = faces[shown]
    return seen, f, where.reshape(-1), _face_shading(v, f)


def _pixels(hit: np.ndarray, visible: tuple[np.ndarray, ...], vertex_rgb: np.ndarray) -> np.ndarray:
    """(height, width, 3) uint8 picture, row 0 at the top, of the rasterized faces ``hit`` (white where none) with
    their :func:`_visible` parts: each face its vertices' mean colour (``vertex_rgb`` in [0, 1]), shaded."""
    seen, f, where, shade = visible
    image = np.ones(hit.shape + (3,))
    image[seen] = np.clip((vertex_rgb[f].mean(1) * shade[:, None])[where], 0, 1)
    return (image[::-1] * 255 + 0.5).astype(np.uint8)


def _frame(v: np.ndarray) -> tuple[float, float, float, float]:
    """Axis limits (x0, x1, y0, y1) of a view: the projected mesh with a 3 % margin."""
    lo, hi = v[:, :2].min(0), v[:, :2].max(0)
    pad = 0.03 * (hi - lo).max() or 1.0  # a mesh with no extent still gets a frame
    return lo[0] - pad, hi[0] + pad, lo[1] - pad, hi[1] + pad


_CELL = (572, 484)  # pixels per view and row: the 5.2 x 4.4 in at 110 dpi of the matplotlib figure before
_TITLE_PX, _NUMBER_PX, _HEADER_PX = 14, 11, 18  # font sizes: 9, 7 and 12 pt at 110 dpi
_MARGIN = 14


@lru_cache(maxsize=None)
def _font(size: int):  # noqa: ANN202 - PIL is imported lazily
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # FreeType's bundled font (Pillow >= 10.1)


def _number_spots(v: np.ndarray, fdi: np.ndarray) -> list[tuple[int, float, float]]:
    """(FDI, x, y) at the median of each tooth's vertices the view sees (the nearer 60 %)."""
    front = v[:, 2] > np.percentile(v[:, 2], 40)
    spots = []
    for t in np.unique(fdi):
        sel = (fdi == t) & front
        if t <= 0 or sel.sum() < 5:
            continue
        x, y = np.median(v[sel, :2], axis=0)
        spots.append((int(t), float(x), float(y)))
    return spots


def render_segmentation(path: str | Path, aligned: np.ndarray, faces: np.ndarray, fdi: np.ndarray,
                        colors: np.ndarray, classes: np.ndarray, title: str,
                        reference_fdi: np.ndarray | None = None, reference_classes: np.ndarray | None = None,
                        views: tuple[str, ...] = ("occlusal", "frontal")) -> Path:
    """Write a PNG of the segmented scan (see module doc) and return its path.

    ``aligned`` (V, 3) vertices in the canonical frame; ``classes`` index ``colors`` (uint8 RGB table);
    ``fdi`` the numbers written on the teeth. With ``reference_*`` a reference row is drawn above the
    prediction and vertices whose predicted FDI differs are marked black."""
    from PIL import Image, ImageDraw

    from ..utils.atomic_file import atomic_writer
    from ..data.mesh import rotate

    faces = np.asarray(faces, dtype=np.int64)
    rows = [("prediction", classes, fdi, None)]
    if reference_fdi is not None and reference_classes is not None:
        wrong = reference_fdi != fdi
        rows = [("reference", reference_classes, reference_fdi, None),
                (f"prediction ({wrong.mean():.1%} of vertices wrong, marked black)", classes, fdi, wrong)]
    canvas = Image.new("RGB", (_CELL[0] * len(views), _HEADER_PX + 16 + _CELL[1] * len(rows)), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((canvas.width / 2, 6), title, fill="black", font=_font(_HEADER_PX), anchor="mt")
    projected = {view: rotate(np.asarray(aligned, dtype=np.float64), VIEWS[view]) for view in views}
    hits: dict[str, tuple] = {}  # one rasterization and its shading per view, shared by the rows
    for r, (name, cls, numbers, wrong) in enumerate(rows):
        vertex_rgb = colors[cls].astype(np.float64) / 255.0
        for c, view in enumerate(views):
            v = projected[view]
            x0, x1, y0, y1 = _frame(v)
            left, top = c * _CELL[0] + _MARGIN, _HEADER_PX + 16 + r * _CELL[1]
            box_w, box_h = _CELL[0] - 2 * _MARGIN, _CELL[1] - _TITLE_PX - 3 * _MARGIN
            scale = min(box_w / (x1 - x0), box_h / (y1 - y0))  # equal aspect, centred in the box
            width, height = max(1, round(scale * (x1 - x0))), max(1, round(scale * (y1 - y0)))
            left += (box_w - width) // 2
            top_img = top + _TITLE_PX + _MARGIN + (box_h - height) // 2
            if view not in hits:
                hit = rasterize((v[:, :2] - [x0, y0]) * [width / (x1 - x0), height / (y1 - y0)], v[:, 2], faces,
                                width, height)
                hits[view] = hit, _visible(hit, v, faces)
            hit, visible = hits[view]
            pixels = _pixels(hit, visible, vertex_rgb)
            if wrong is not None and wrong.any():  # a black mark of 2 x 2 pixels on each wrong vertex
                px = np.clip(((v[wrong, 0] - x0) * width / (x1 - x0)).astype(np.int64), 0, width - 1)
                py = np.clip(height - 1 - ((v[wrong, 1] - y0) * height / (y1 - y0)).astype(np.int64), 0, height - 1)
                for dx in (0, 1):
                    for dy in (0, 1):
                        pixels[np.minimum(py + dy, height - 1), np.minimum(px + dx, width - 1)] = 0
            canvas.paste(Image.fromarray(pixels), (left, top_img))
            draw.rectangle((left - 1, top_img - 1, left + width, top_img + height), outline="black")
            draw.text((left + width / 2, top_img - 4), f"{name}: {view}", fill="black", font=_font(_TITLE_PX),
                      anchor="md")
            for number, x, y in _number_spots(v, numbers):
                cx = left + (x - x0) * width / (x1 - x0)
                cy = top_img + height - (y - y0) * height / (y1 - y0)
                text = str(number)
                l, t, rr, b = draw.textbbox((cx, cy), text, font=_font(_NUMBER_PX), anchor="mm")
                draw.rounded_rectangle((l - 2, t - 2, rr + 2, b + 2), radius=3, fill=(255, 255, 255))
                draw.text((cx, cy), text, fill="black", font=_font(_NUMBER_PX), anchor="mm")
    path = Path(path)
    with atomic_writer(path) as fh:
        canvas.save(fh, format="PNG")
    return path


THUMBNAIL_SIZE = (400, 280)
"""Pixels of a thumbnail (the review page shows it at about this size)."""
_THUMB_NUMBER_PX = 17  # the FDI numbers on a thumbnail: readable at the card's size


def render_thumbnail(aligned: np.ndarray, faces: np.ndarray, fdi: np.ndarray, colors: np.ndarray,
                     classes: np.ndarray, size: tuple[int, int] = THUMBNAIL_SIZE) -> bytes:
    """PNG bytes of the occlusal view of a segmented scan, ``size`` (width, height) pixels, teeth coloured by
    ``classes`` (indices into ``colors``) and each tooth's FDI number from ``fdi`` on it."""
    import io

    from PIL import Image, ImageDraw

    from ..data.mesh import rotate

    faces = np.asarray(faces, dtype=np.int64)
    v = rotate(np.asarray(aligned, dtype=np.float64), VIEWS["occlusal"])
    x0, x1, y0, y1 = _frame(v)
    scale = min(size[0] / (x1 - x0), size[1] / (y1 - y0))
    width, height = max(1, round(scale * (x1 - x0))), max(1, round(scale * (y1 - y0)))
    hit = rasterize((v[:, :2] - [x0, y0]) * [width / (x1 - x0), height / (y1 - y0)], v[:, 2], faces, width, height)
    canvas = Image.new("RGB", size, "white")
    left, top = (size[0] - width) // 2, (size[1] - height) // 2
    pixels = _pixels(hit, _visible(hit, v, faces), colors[classes].astype(np.float64) / 255.0)
    canvas.paste(Image.fromarray(pixels), (left, top))
    draw = ImageDraw.Draw(canvas)
    font = _font(_THUMB_NUMBER_PX)
    for number, x, y in _number_spots(v, np.asarray(fdi)):
        cx, cy = left + (x - x0) * width / (x1 - x0), top + height - (y - y0) * height / (y1 - y0)
        l, t, r, b = draw.textbbox((cx, cy), str(number), font=font, anchor="mm")
        draw.rounded_rectangle((l - 3, t - 2, r + 3, b + 2), radius=4, fill=(255, 255, 255), outline=(90, 90, 90))
        draw.text((cx, cy), str(number), fill="black", font=font, anchor="mm")
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    return buf.getvalue()


def side_by_side(paths: list[str | Path], out: str | Path) -> Path:
    """Write the PNGs at ``paths`` next to each other, left to right on white, as one PNG at ``out``."""
    from PIL import Image

    panels = [Image.open(p) for p in paths]
    canvas = Image.new("RGB", (sum(p.width for p in panels), max(p.height for p in panels)), "white")
    x = 0
    for p in panels:
        canvas.paste(p, (x, 0))
        x += p.width
    canvas.save(out)
    return Path(out)
