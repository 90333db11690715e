"""The result of segmenting one scan (:class:`Segmentation`): per-vertex FDI labels, tooth instances,
per-tooth confidence, the aligned vertices, and the files a user keeps (Teeth3DS JSON, coloured PLY,
picture, one STL per tooth).

The save methods write atomically and refuse to write over the scan's own file; where a tool also has
to protect label files and earlier results, it plans its outputs first (``pointmamba/cli/output_files.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..data.units import UnitsDecision
from .confidence import ScanConfidence


@dataclass
class Segmentation:
    """One segmented scan.

    ``vertices`` (V, 3) and ``faces`` (F, 3) as given (file units); ``aligned`` (V, 3) the vertices in mm
    in the canonical frame (crowns +z, incisors +y) the model worked in; ``labels`` (V,) FDI numbers
    (0 = gingiva); ``classes`` (V,) the model's class ids; ``instances`` (V,) 0 = gingiva, 1..k one per
    tooth; ``probabilities`` (V, C) per-vertex class probabilities; ``confidence`` per tooth and scan.
    """

    name: str
    id_patient: str
    jaw: str
    vertices: np.ndarray
    faces: np.ndarray
    aligned: np.ndarray
    labels: np.ndarray
    classes: np.ndarray
    instances: np.ndarray
    probabilities: np.ndarray
    confidence: ScanConfidence
    units: UnitsDecision
    source: Path | None = None
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return int(self.probabilities.shape[1])

    @property
    def teeth(self) -> list[int]:
        """The FDI numbers found, in increasing order."""
        return sorted(int(t) for t in np.unique(self.labels) if t > 0)

    @property
    def review(self) -> bool:
        """True when a person should look at this scan (``confidence.reasons`` says why)."""
        return self.confidence.review

    def review_line(self) -> str | None:
        """``"MSN023_lower: review tooth 35 (0.52; 34: 0.41)"``, or None."""
        return self.confidence.review_line(self.name)

    def __repr__(self) -> str:
        """One line (the arrays are attributes, not part of it): ``Segmentation('MSN001_lower', jaw=lower,
        5321 vertices, teeth [31, 32, ...], review: yes)``."""
        return (f"Segmentation({self.name!r}, jaw={self.jaw}, {len(self.labels)} vertices, teeth {self.teeth}, "
                f"review: {'yes' if self.review else 'no'})")

    def to_trimesh(self) -> Any:
        """The scan as a ``trimesh.Trimesh`` (file units and vertex order, nothing merged or dropped), coloured
        by tooth, with per-vertex ``label`` (FDI) and ``instance`` in ``vertex_attributes``. Needs trimesh
        (``pip install trimesh``), which pointmamba itself does not."""
        try:
            import trimesh
        except ImportError:
            raise ImportError("Segmentation.to_trimesh needs trimesh: pip install trimesh") from None
        from ..data import class_colors

        rgb = class_colors(self.num_classes)[self.classes]
        rgba = np.concatenate([rgb, np.full((len(rgb), 1), 255, dtype=np.uint8)], axis=1)
        mesh = trimesh.Trimesh(vertices=np.asarray(self.vertices, dtype=np.float64), faces=np.asarray(self.faces),
                               vertex_colors=rgba, process=False)
        mesh.vertex_attributes["label"] = np.asarray(self.labels, dtype=np.int64)
        mesh.vertex_attributes["instance"] = np.asarray(self.instances, dtype=np.int64)
        mesh.metadata.update({"name": self.name, "jaw": self.jaw, "teeth": self.teeth})
        return mesh

    # ----------------------------------------------------------------------------------- outputs
    def _target(self, path: str | PathLike) -> Path:
        path = Path(path)
        if self.source is not None and path.resolve() == self.source.resolve():
            raise ValueError(f"{path}: is the scan being segmented; choose another file name")
        return path

    def to_json(self) -> dict[str, Any]:
        """The Teeth3DS document (``id_patient``, ``jaw``, ``labels``, ``instances``) plus ``confidence``."""
        return {"id_patient": self.id_patient, "jaw": self.jaw, "labels": self.labels.astype(int).tolist(),
                "instances": self.instances.astype(int).tolist(), "confidence": self.confidence.to_json()}

    def save_json(self, path: str | PathLike) -> Path:
        """Teeth3DS JSON (labels per vertex in file order), with the confidence as an extra key."""
        from ..data.teeth3ds import save_labels

        extra = {"confidence": self.confidence.to_json()}
        for key in ("model_base", "faces_reversed", "faces_rewound"):  # the base left out; faces reversed; rewound
            if key in self.meta:
                extra[key] = self.meta[key]
        return save_labels(self._target(path), self.labels, self.jaw, self.id_patient, self.instances, extra=extra)

    def save_ply(self, path: str | PathLike) -> Path:
        """Binary PLY of the scan (file units) coloured by tooth, with an FDI ``label`` vertex property."""
        from ..data import class_colors, write_ply
        from ..data.scan_files import PLY_MARKER

        colors = class_colors(self.num_classes)[self.classes]  # the marker: a folder walk skips this file
        return write_ply(self._target(path), self.vertices, self.faces, colors=colors, labels=self.labels,
                         comment=PLY_MARKER)

    def save_png(self, path: str | PathLike, reference: Any = None) -> Path:
        """Picture of the segmented scan, FDI numbers on the teeth; with ``reference`` (FDI labels per
        vertex, a Teeth3DS JSON or its path) the reference beside it and the wrong vertices marked."""
        from ..data import class_colors, fdi_to_class
        from .render import render_segmentation
        from ..utils.printable import printable

        ref = None if reference is None else self._reference_labels(reference)
        return render_segmentation(self._target(path), self.aligned, self.faces, self.labels,
                                   class_colors(self.num_classes), self.classes, f"{printable(self.name)} ({self.jaw})",
                                   ref, None if ref is None else fdi_to_class(ref, self.jaw, self.num_classes))

    def save_teeth(self, folder: str | PathLike, stem: str | None = None) -> list[Path]:
        """One binary STL per tooth (``<stem>_<FDI>.stl``) and the gingiva (``<stem>_gingiva.stl``), in the
        scan's own coordinates and units; every face of the scan is in exactly one of them (see
        :mod:`pointmamba.data.tooth_meshes` for the cut)."""
        from ..data.tooth_meshes import piece_name, split_by_label
        from ..data import write_stl
        from ..data.scan_files import TOOTH_STL_HEADER

        stem = stem or self.name
        return [write_stl(self._target(Path(folder) / piece_name(stem, label)), v, f, header=TOOTH_STL_HEADER)
                for label, (v, f) in split_by_label(self.vertices, self.faces, self.labels).items()]

    # -------------------------------------------------------------------------------- reference
    def _reference_labels(self, reference: Any) -> np.ndarray:
        from ..data.teeth3ds import LabelFile, read_labels

        if isinstance(reference, (str, PathLike)):
            reference = read_labels(reference, len(self.labels))
        labels = reference.labels if isinstance(reference, LabelFile) else np.asarray(reference)
        if labels.shape != self.labels.shape:
            raise ValueError(f"reference: {labels.shape[0]} labels but the scan has {len(self.labels)} vertices")
        return labels.astype(np.int64)

    def compare(self, reference: Any) -> dict[str, Any]:
        """Metrics against reference labels (FDI per vertex, a Teeth3DS JSON or its path): vertex accuracy,
        mIoU, the 3DTeethSeg'22 TSA / TLA / TIR, and the teeth whose number is wrong (``wrong_teeth``:
        predicted number -> the reference's most common label on that tooth)."""
        from ..data import fdi_to_class
        from ..data.teeth3ds import LabelFile
        from .confidence import tooth_truth
        from ..evaluation.metrics import ConfusionMatrix
        from ..evaluation.teeth_metrics import teeth_metrics

        ref = self._reference_labels(reference)
        ref_instances = reference.instances if isinstance(reference, LabelFile) else None
        target = fdi_to_class(ref, self.jaw, self.num_classes)
        miou = ConfusionMatrix(self.num_classes).update(self.classes, target).miou()
        m = teeth_metrics(self.vertices * self.units.factor, ref, self.labels, gt_instances=ref_instances)
        truth = tooth_truth(self.instances, ref)
        numbers = {t.instance: t.fdi for t in self.confidence.teeth}
        wrong = {numbers[i]: truth[i] for i in sorted(numbers, key=numbers.get) if truth[i] != numbers[i]}
        return {"accuracy": float((ref == self.labels).mean()), "miou": float(miou), "TSA": float(m["TSA"]),
                "TLA": float(m["TLA"]), "TIR": float(m["TIR"]), "wrong_teeth": wrong}
