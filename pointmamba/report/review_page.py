"""A self-contained review page for many segmented scans (``tools/predict.py ... --report DIR/index.html``).

One HTML file that opens from disk with no network, to work through a batch:

* a grid of every scan: a thumbnail (the occlusal view with the FDI numbers, drawn at the card's size by
  :func:`~pointmamba.inference.render.render_thumbnail`), a dental chart (:func:`dental_chart`: the 16
  teeth a full arch has, found or missing, each found tooth's confidence and runner-up), the review
  findings and metrics where a reference was given; sortable, filterable to the flagged scans;
* a 3D view of one scan (rotate, zoom, teeth coloured by FDI with their numbers, hover: number, confidence,
  reference), in the view modes prediction, reference, compare (reference and prediction side by side,
  their cameras linked), errors and uncertainty (per vertex, the margin between the two most probable
  classes: :func:`margin_uint8`);
* keys to work through it (next, previous, accept, flag, next view; listed on the page), accept / flag
  marks kept in the browser's localStorage under the run's id (:attr:`ReviewPage.run`) and downloadable
  as a CSV, formulas neutralized as :func:`pointmamba.utils.atomic_file.csv_cell` does;
* deep links that choose the scan, the view and a tooth to select: ``index.html#scan=MSN001_lower&view=uncertainty``,
  ``#scan=MSN001_lower&tooth=36`` (a tooth of a card's chart opens so);
* corrections: a tooth (clicked in the 3D view or the chart) gets another number, or its runner-up with one key
  (``r``: where a number is wrong, its runner-up is right for 70-98 % of the teeth, docs/results/review_flag); a region (the connected
  vertices of one label under a click, a brush of N mm, or one side of a cutting plane clicked through it)
  is given to a neighbour, a new number or the gingiva; undo, reset. The result downloads as a Teeth3DS
  JSON per scan (``id_patient``, ``jaw``, ``labels``, ``instances``). The page's mesh is the scan's own,
  nothing decimated or merged (vertex k is the file's vertex k), so the labels are per original vertex in
  file order, as :func:`pointmamba.data.teeth3ds.read_labels` reads them.

The 3D view is plotly.js (its ``gl3d`` bundle, vendored in ``vendor/`` and inlined once). Meshes travel as
base64 little-endian typed arrays, decoded in the browser only when a scan is opened: positions quantized
to uint16 per axis over the scan's bounding box (``origin + q * step``; the step is the box's size / 65535,
about 1.5 um for a 100 mm arch), faces uint16 (under 65,536 vertices) or uint32, FDI labels and the
uncertainty margin uint8. Measured on a real scan (MSN021_lower) subdivided to 81k and 323k vertices (two
faces per vertex), segmented by the tiny model: 4.4 MB of page per 100k vertices with a reference, 4.3 MB
without (4.2 / 4.1 before the margin; float32 positions gave 5.0 MB), plus a thumbnail of about 20 kB per
scan and the viewer (1.75 MB) once per page. In headless Chromium (software WebGL) the 323k-vertex scan
drew in 7 s, its uncertainty view in 8 s, reference and prediction side by side in 12 s.

Size bound: scans are spooled to disk as they are added (:meth:`ReviewPage.add` keeps nothing of a scan in
memory), and :meth:`ReviewPage.write` streams them into the page. Up to ``PAGE_SCANS`` (25) scans and
``PAGE_BYTES`` (100 MB) of scan data make one page; a larger batch gets one page per chunk
(``index-01.html``, ``index-02.html`` ... beside ``index.html``) and ``index.html`` becomes an index of
every scan (no thumbnails or meshes) linking to the page that shows it. 50 full-resolution scans of about
150k vertices (6.6 MB each) make four pages of at most 15 scans and the index; the index shows every
scan's marks, since the pages of one run share them.

Everything embedded is JSON with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (``\\u003c`` ...), so no
file name can close or comment out the page's ``<script>`` elements, and without NaN or Infinity
(``null``, shown as "–"), which ``JSON.parse`` would stop at.
"""
from __future__ import annotations

import base64
import io
import json
import re
import secrets
import shutil
import tempfile
import time
import weakref
from os import PathLike
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..utils.finite_json import dumps

HERE = Path(__file__).resolve().parent
VIEWER = HERE / "vendor" / "plotly-gl3d.min.js"
PAGE_SCANS = 25
"""At most this many scans on one page (above it: one page per chunk and an index page)."""
PAGE_BYTES = 100 * 2 ** 20
"""At most about this many bytes of scan data on one page (a single larger scan gets a page of its own)."""
QUANT_LEVELS = 2 ** 16 - 1  # uint16 positions: 0 .. 65535 across the bounding box
_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def embed_json(value: Any) -> str:
    """``value`` as JSON that is safe inside an HTML ``<script>`` element: no ``<`` (so no ``</script>``,
    ``<!--`` or ``<script``), ``>``, ``&`` or line separators as characters, only as ``\\u`` escapes that
    JSON reads back unchanged; non-finite numbers as null."""
    return dumps(value, separators=(",", ":")).translate(_UNSAFE)


def quantize(points: np.ndarray) -> tuple[np.ndarray, list[float], list[float]]:
    """(N, 3) points as uint16 per axis over their bounding box: ``(q, origin, step)`` with ``points`` =
    ``origin + q * step`` within half a step (a flat axis has step 0)."""
    points = np.asarray(points, dtype=np.float64)
    origin = points.min(axis=0) if len(points) else np.zeros(3)
    extent = (points.max(axis=0) - origin) if len(points) else np.zeros(3)
    step = extent / QUANT_LEVELS
    scale = np.divide(1.0, step, out=np.zeros(3), where=step > 0)
    q = np.rint((points - origin) * scale).clip(0, QUANT_LEVELS).astype("<u2")
    return q, origin.tolist(), step.tolist()


def thumbnail(png: str | PathLike | bytes) -> str:
    """A picture (a path or PNG bytes) as a ``data:`` URL of a PNG no larger than a thumbnail (64-colour
    palette)."""
    from PIL import Image

    from ..inference.render import THUMBNAIL_SIZE

    src = io.BytesIO(png) if isinstance(png, bytes) else png
    with Image.open(src) as img:
        img = img.convert("RGB")
        img.thumbnail(THUMBNAIL_SIZE)
        small = img.quantize(colors=64)
    buf = io.BytesIO()
    small.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def margin_uint8(probabilities: np.ndarray) -> np.ndarray:
    """Per vertex, the margin between its two most probable classes (0: a tie, the model cannot tell them
    apart; 1: sure), quantized to uint8 (``round(255 * margin)``) for the uncertainty view."""
    p = np.asarray(probabilities, dtype=np.float32)
    if p.shape[1] < 2:
        return np.full(len(p), 255, dtype=np.uint8)
    top2 = np.partition(p, p.shape[1] - 2, axis=1)[:, -2:]
    margin = np.nan_to_num(np.abs(top2[:, 1] - top2[:, 0]), nan=0.0)  # a NaN probability: no certainty
    return np.rint(np.clip(margin, 0, 1) * 255).astype(np.uint8)


def dental_chart(jaw: str, teeth: list[Any]) -> list[dict[str, Any]]:
    """The teeth a full arch of ``jaw`` has, as a dental chart reads (the patient's right first: 18 .. 11,
    21 .. 28 or 48 .. 41, 31 .. 38), each ``found`` or not and, where found, its confidence and runner-up
    (``teeth``: :class:`~pointmamba.inference.confidence.ToothConfidence`; a number carried twice shows
    its less confident tooth, and ``twice``)."""
    right, left = ((18, 11), (21, 28)) if jaw == "upper" else ((48, 41), (31, 38))
    arch = list(range(right[0], right[1] - 1, -1)) + list(range(left[0], left[1] + 1))
    chart = []
    for fdi in arch:
        found = sorted((t for t in teeth if t.fdi == fdi), key=lambda t: t.confidence)
        entry: dict[str, Any] = {"fdi": fdi, "found": bool(found)}
        if found:
            t = found[0]
            entry.update(confidence=round(t.confidence, 4), runner_up=t.runner_up,
                         runner_up_confidence=round(t.runner_up_confidence, 4), twice=len(found) > 1)
            if getattr(t, "posterior", None) is not None:  # lowered because the scan is flagged
                entry["posterior"] = round(t.posterior, 4)
        chart.append(entry)
    return chart


class ReviewPage:
    """Collects scans as they are segmented and writes the page (:meth:`write`).

    Each scan goes to a spool folder on disk as it is added (``spool``: the folder to create it in, default
    the system's temporary folder; pass the report's own folder where that is small or held in memory); the
    spool is removed when the page object is.
    """

    def __init__(self, title: str = "pointmamba review", model: str = "",
                 spool: str | PathLike | None = None) -> None:
        self.title = title
        self.model = model
        self._spool = Path(tempfile.mkdtemp(prefix=".pointmamba-review-", dir=spool))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._spool, True)
        self._sizes: list[int] = []  # bytes of each spooled scan, in the order added
        # names this run's marks in the browser's localStorage: every page of one run shares them, another
        # run's page (a new model, new results) starts without them
        self.run = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
        self.written: list[Path] = []  # the files the last write() wrote, the page to open last

    def __len__(self) -> int:
        return len(self._sizes)

    def add(self, result: Any, reference: np.ndarray | None = None, metrics: dict[str, Any] | None = None,
            picture: str | PathLike | bytes | None = None, source: str | None = None) -> None:
        """Add a :class:`~pointmamba.inference.segmentation.Segmentation`; ``reference`` FDI labels per vertex and
        their ``metrics`` (``Segmentation.compare``) where known. The thumbnail is the scan's occlusal view
        with its FDI numbers, drawn here; ``picture`` (a PNG) replaces it where given."""
        from ..data import class_colors, fdi_to_class
        from ..data.fdi import LOWER_FDI, UPPER_FDI
        from ..inference.render import render_thumbnail

        labels = np.asarray(result.labels)
        faces = np.asarray(result.faces)
        small = len(result.vertices) < 2 ** 16
        colors = class_colors(result.num_classes)
        # every number of the jaw: a correction may give a tooth a number the prediction does not have
        present = np.union1d(np.unique(labels if reference is None else np.concatenate([labels, reference])),
                             (0,) + (UPPER_FDI if result.jaw == "upper" else LOWER_FDI))
        palette = {int(f): "#%02x%02x%02x" % tuple(colors[int(c)])
                   for f, c in zip(present, fdi_to_class(present, result.jaw, result.num_classes))}
        conf = result.confidence
        positions, origin, step = quantize(result.aligned)
        if picture is None:
            picture = render_thumbnail(result.aligned, faces, labels, colors, np.asarray(result.classes))
        card = {
            "name": result.name, "id_patient": result.id_patient, "jaw": result.jaw,
            "source": source or str(result.source or result.name),
            "vertices": int(len(labels)), "teeth": result.teeth, "review": conf.review,
            "reasons": list(conf.reasons),
            "min_confidence": None if conf.min_confidence is None else round(conf.min_confidence, 4),
            "review_below": conf.rules.review_below,
            # "alternative": the tooth's number under the other reading of the dentition (auto), where it differs
            "confidence": [{"fdi": t.fdi, "confidence": round(t.confidence, 4), "runner_up": t.runner_up,
                            "runner_up_confidence": round(t.runner_up_confidence, 4),
                            **({"alternative": t.alternative} if getattr(t, "alternative", None) else {}),
                            **({"posterior": round(t.posterior, 4)} if getattr(t, "posterior", None) is not None else {})}
                           for t in conf.teeth],
            "chart": dental_chart(result.jaw, conf.teeth),
            "metrics": metrics,
            "thumbnail": thumbnail(picture),
            "palette": palette,
        }
        mesh = {"positions": _b64(positions), "origin": origin, "step": step,
                "faces": _b64(faces.astype("<u2" if small else "<u4")), "index_bytes": 2 if small else 4,
                "labels": _b64(labels.astype(np.uint8)),
                "margin": _b64(margin_uint8(result.probabilities)),
                "reference": None if reference is None else _b64(np.asarray(reference).astype(np.uint8))}
        self._spool_scan(card, mesh)

    def add_failed(self, name: str, reason: str, source: str | None = None) -> None:
        """A scan that could not be segmented: a card naming it and why (``reason``, one line), nothing to view."""
        self._spool_scan({"name": name, "id_patient": None, "jaw": None, "source": source or name, "vertices": None,
                          "teeth": [], "review": True, "failed": reason, "reasons": [], "min_confidence": None,
                          "review_below": None, "confidence": [], "chart": [], "metrics": None, "thumbnail": None,
                          "palette": {}}, None)

    def _spool_scan(self, card: dict[str, Any], mesh: dict[str, Any] | None) -> None:
        """Write one scan's card (what the grid shows) and mesh (None: nothing to view) to the spool."""
        k = len(self._sizes)
        size = 0
        for part, value in (("card", card), ("mesh", mesh)):
            if value is not None:
                text = embed_json(value).encode("ascii")
                (self._spool / f"{k:06d}.{part}.json").write_bytes(text)
                size += len(text)
        self._sizes.append(size)

    def chunks(self) -> list[range]:
        """The scans of each page, in the order added: at most ``PAGE_SCANS`` scans and about
        ``PAGE_BYTES`` bytes each."""
        out: list[range] = []
        start, size = 0, 0
        for k, n in enumerate(self._sizes):
            if k > start and (k - start >= PAGE_SCANS or size + n > PAGE_BYTES):
                out.append(range(start, k))
                start, size = k, 0
            size += n
        if start < len(self._sizes) or not out:
            out.append(range(start, len(self._sizes)))
        return out

    def write(self, path: str | PathLike) -> Path:
        """Write the page (atomically, streamed from the spool) and return its path; above the size bound
        ``path`` is the index and the chunk pages lie beside it (:attr:`written` lists every file)."""
        path = Path(path)
        chunks = self.chunks()
        if len(chunks) == 1:
            self.written = [self._write_page(path, self.title, {"model": self.model, "run": self.run}, chunks[0],
                                             viewer=True)]
            return path
        width = max(2, len(str(len(chunks))))
        names = [f"{path.stem}-{i + 1:0{width}d}{path.suffix}" for i in range(len(chunks))]
        written = []
        for i, (name, chunk) in enumerate(zip(names, chunks)):
            head = {"model": self.model, "run": self.run, "index": path.name, "part": f"page {i + 1} of {len(chunks)}"}
            written.append(self._write_page(path.parent / name, f"{self.title} ({head['part']})", head, chunk,
                                            viewer=True))
        page_of = {k: name for name, chunk in zip(names, chunks) for k in chunk}
        head = {"model": self.model, "run": self.run, "pages": names}
        written.append(self._write_page(path, self.title, head, range(len(self._sizes)), viewer=False,
                                        page_of=page_of))
        self.written = written
        return path

    def _write_page(self, path: Path, title: str, head: dict[str, Any], scans: range, viewer: bool,
                    page_of: dict[int, str] | None = None) -> Path:
        """One HTML file: the template with ``head``'s keys and the ``scans`` streamed into its data block;
        with ``page_of`` (an index) only their cards, without thumbnails, each naming its page."""
        from ..utils.atomic_file import atomic_writer

        parts = {"TITLE": lambda fh: fh.write(_escape(title).encode()),
                 "STYLE": lambda fh: fh.write((HERE / "page.css").read_bytes()),
                 "DATA": lambda fh: self._write_data(fh, head, scans, page_of),
                 "PLOTLY": lambda fh: fh.write(VIEWER.read_bytes() if viewer else b""),
                 "APP": lambda fh: fh.write((HERE / "page.js").read_bytes())}
        # split once, so that nothing inserted is read as a placeholder
        pieces = re.split(r"\{\{(TITLE|STYLE|DATA|PLOTLY|APP)\}\}", (HERE / "page.html").read_text())
        with atomic_writer(path) as fh:
            for i, piece in enumerate(pieces):
                if i % 2:
                    parts[piece](fh)
                else:
                    fh.write(piece.encode())
        return path

    def _write_data(self, fh: BinaryIO, head: dict[str, Any], scans: range,
                    page_of: dict[int, str] | None) -> None:
        """``{...head, "scans": [...]}``, one scan in memory at a time."""
        fh.write(embed_json({**head, "scans": []})[:-2].encode())  # '{...,"scans":[' and the scans follow
        for n, k in enumerate(scans):
            if n:
                fh.write(b",")
            card = (self._spool / f"{k:06d}.card.json").read_bytes()
            if page_of is not None:
                entry = json.loads(card)
                entry.pop("thumbnail", None)
                fh.write(embed_json({**entry, "page": page_of[k]}).encode())
                continue
            mesh = self._spool / f"{k:06d}.mesh.json"
            if not mesh.is_file():
                fh.write(card)
                continue
            fh.write(card[:-1] + b',"mesh":')  # the card's closing brace moved after its mesh
            with open(mesh, "rb") as src:
                shutil.copyfileobj(src, fh)
            fh.write(b"}")
        fh.write(b"]}")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
