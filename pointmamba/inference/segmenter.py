"""The Python API: load a model once, segment scans from files or arrays.

    from pointmamba import Segmenter

    segmenter = Segmenter()                            # the shipped model; Segmenter("best.pth", device="cuda")
    result = segmenter("scan_lower.obj")               # or segmenter((vertices, faces), jaw="lower", units="mm")
    print(result.teeth, result.review_line())
    result.save_json("scan_lower.json")

``tools/predict.py`` is a thin layer over it: the same checks, the same inference, the same files.
"""
from __future__ import annotations

import threading
import time
import warnings
from os import PathLike
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .confidence import ReviewRules
from .segmentation import Segmentation

# One per process, not per Segmenter: numba's workqueue pool is process-wide and not re-entrant (two
# threads inside it end the process with "Concurrent access has been detected", no exception to catch).
INFERENCE_LOCK = threading.Lock()


class Segmenter:
    """A trained model, loaded once, that segments whole scans at full resolution.

    ``checkpoint``: a checkpoint written by ``tools/train.py`` (default: the shipped model, see
    ``pointmamba/checkpoints/MODEL_CARD.md``); ``device``: ``auto`` | ``cpu`` | ``cuda[:N]`` or a
    ``torch.device``; ``infer``:
    inference switches over the defaults (``pointmamba.config.INFER_DEFAULTS``), e.g.
    ``{"graph_cut": False}``; ``rules``: when a scan is flagged for review; ``dentition``: ``auto`` |
    ``permanent`` | ``mixed``, how a side of canine, one premolar-sized tooth, then molars is numbered
    (``pointmamba/inference/dentition.py``; None: ``infer``'s, default ``auto``), also given per call.

    Thread-safe: several threads may call one ``Segmenter`` (or several) at once. Loading and checking
    scans runs in parallel; the model's inference runs one scan at a time per process, under a lock
    (``INFERENCE_LOCK``), because numba's workqueue thread pool behind the CPU kernels aborts the whole
    process when two threads enter it at once.
    """

    def __init__(self, checkpoint: str | PathLike | None = None, device: Any = "auto",
                 infer: dict[str, Any] | None = None, rules: ReviewRules = ReviewRules(),
                 dentition: str | None = None) -> None:
        from ..config import resolve_infer
        from ..utils.device import resolve_device
        from .pipeline import load_trained
        from ..checkpoints.shipped import resolve_checkpoint

        import torch

        infer = resolve_infer(infer)  # typos and out-of-range values fail before the model loads
        if dentition is not None:
            from .config import check_dentition

            infer["dentition"] = check_dentition(dentition, "Segmenter")
        self.device = device if isinstance(device, torch.device) else resolve_device(device, "device")
        self.checkpoint = resolve_checkpoint(checkpoint)
        self.model, self.config = load_trained(self.checkpoint, self.device)
        # inference switches are a prediction-time choice: the current defaults and the caller's, not
        # whatever the training config held when the checkpoint was written
        self.config["infer"] = infer
        self.rules = rules

    @property
    def num_classes(self) -> int:
        return int(self.config["data"]["num_classes"])

    @property
    def infer(self) -> dict[str, Any]:
        """The inference switches in use."""
        return dict(self.config["infer"])

    def __call__(self, scan: Any, *, jaw: str | None = None, units: str = "auto",
                 name: str | None = None, dentition: str | None = None) -> Segmentation:
        """Segment ``scan``: a mesh file (OBJ / PLY / STL), ``(vertices, faces)`` arrays, an object with
        ``.vertices`` and ``.faces`` (a ``trimesh.Trimesh``) or a :class:`~pointmamba.data.Scan`.

        ``jaw`` ``"upper"`` / ``"lower"`` (default: the file name ``*_upper`` / ``*_lower`` or a label file
        beside it, else told from the teeth: ``result.confidence.jaw`` says how, and a thin margin is flagged
        for review); ``units`` of the coordinates, ``auto`` (from the scan's
        size; a rescale is warned about), ``mm``, ``cm`` or ``m``; ``name`` for messages and output names;
        ``dentition`` this scan's (default: the Segmenter's). Bad input raises ValueError naming the file (or ``name``) and what is wrong.
        """
        from ..data.units import check_fits, grid_reach_mm, infer_units

        source = self.load(scan, jaw, name)
        decision = infer_units(source.vertices, units, source.path or source.name)
        check_fits(decision, grid_reach_mm(self.config["data"].get("grid_size")), source.path or source.name)
        if decision.warning:
            warnings.warn(decision.warning, stacklevel=2)
        return self.segment(source, decision, dentition=dentition)

    def load(self, scan: Any, jaw: str | None = None, name: str | None = None) -> Any:  # -> Scan
        """The checked :class:`~pointmamba.data.Scan` that ``__call__`` segments (see there)."""
        from ..data.integrity import check_jaw_size
        from ..data.mesh import check_mesh, mesh_arrays
        from ..data.preflight import load_predict_scan
        from ..data.scan import Scan, jaw_from_name, patient_from_name
        from ..data.fdi import check_jaw

        check_jaw(jaw, allow_none=True)
        if isinstance(scan, (str, PathLike)):
            out = load_predict_scan(scan, jaw)
        elif isinstance(scan, Scan):
            where = scan.path or name or scan.name
            check_mesh(*mesh_arrays(scan.vertices, scan.faces, where), where)  # a Scan made in code: unchecked
            out = scan if jaw is None or scan.jaw == jaw else Scan(scan.vertices, scan.faces, jaw=jaw,
                                                                   id_patient=scan.id_patient, path=scan.path)
        elif _is_pair(scan) or (hasattr(scan, "vertices") and hasattr(scan, "faces")):  # e.g. a trimesh.Trimesh
            what = name or "scan"
            pair = scan if _is_pair(scan) else (scan.vertices, scan.faces)
            vertices, faces = mesh_arrays(pair[0], pair[1], what)  # strings, complex numbers: refused
            check_mesh(vertices, faces, what)
            jaw = jaw or jaw_from_name(what)
            out = Scan(vertices, faces, jaw=jaw, id_patient=patient_from_name(what))
        else:
            raise TypeError("Segmenter: expected a mesh file path, (vertices, faces), a mesh object with "
                            f".vertices and .faces, or a Scan, got {type(scan).__name__}")
        where = out.path or name or out.name
        check_jaw_size(out.vertices, where)
        if name is not None:
            out.meta = {**out.meta, "name": name}
        return out

    def segment(self, scan: Any, units: Any, progress: Callable[[str], None] | None = None,
                dentition: str | None = None) -> Segmentation:
        """Segment a loaded, checked :class:`~pointmamba.data.Scan` (coordinates as in its file) whose
        units were decided (:class:`~pointmamba.data.units.UnitsDecision`): the path tools take after
        checking every input up front. ``progress`` is told each step as it starts; ``dentition`` this
        scan's (None: the Segmenter's)."""
        from ..data.teeth3ds import instances_from_labels
        from ..data.units import rescaled
        from .confidence import scan_confidence
        from .pipeline import segment_scan

        t0 = time.perf_counter()
        in_mm = rescaled(scan, units.factor)
        config = self.config
        if dentition is not None:  # this scan's: a copy, so other threads' scans keep the Segmenter's
            from .config import check_dentition

            config = {**config, "infer": {**config["infer"], "dentition": check_dentition(dentition, scan.path or scan.name)}}
        with INFERENCE_LOCK:
            pred = segment_scan(self.model, in_mm, config, self.device, progress)
        instances = getattr(pred, "instances", None)  # an instance-level numbering's own, where it has them
        if instances is None:
            instances = instances_from_labels(pred.fdi)
        # given or told from the teeth (17 classes); a 33-class model numbers both jaws: its teeth say which
        jaw = pred.jaw or scan.jaw or _jaw_of(pred.fdi)
        confidence = scan_confidence(pred.probs, pred.classes, instances, jaw, pred.aligned,
                                     getattr(pred, "instance_probs", None), self.rules, faces=scan.faces,
                                     numbering=pred.numbering, jaw_call=pred.jaw_call,
                                     flagged_scale=float(config["infer"]["flagged_confidence_scale"]),
                                     faces_reversed=bool(getattr(pred, "reversed_finding", False)))
        name = scan.meta.get("name") or scan.name
        meta = {}
        base = getattr(pred, "model_base", None)
        if base is not None:
            meta["model_base"] = {"faces": int(base.faces.sum()), "vertices": int(base.vertices.sum()),
                                  "area_mm2": round(base.area_mm2, 1)}
            warnings.warn(f"{scan.path or name}: a model's base (a flat plate of {base.area_mm2:.0f} mm^2 and the walls on "
                          f"it, {meta['model_base']['faces']} faces) was left out of the segmentation, its vertices gingiva "
                          "(infer.model_base)", stacklevel=2)
        rewound = int(getattr(pred, "faces_rewound", 0))
        if getattr(pred, "faces_reversed", False):
            meta["faces_reversed"] = True
            if not rewound:
                warnings.warn(f"{scan.path or name}: the mesh's faces are wound inside out (their normals point into "
                              "the jaw); it was segmented with every face reversed (infer.orient_faces)", stacklevel=2)
        if rewound:
            meta["faces_rewound"] = rewound
            inside = " (most of the mesh's area inside out)" if meta.get("faces_reversed") else ""
            warnings.warn(f"{scan.path or name}: {rewound} of the mesh's {len(scan.faces)} faces were wound against the "
                          f"rest{inside}; it was segmented with every face wound out of the jaw "
                          "(infer.consistent_winding)", stacklevel=2)
        return Segmentation(name=name, id_patient=str(scan.id_patient or name), jaw=jaw,
                            vertices=scan.vertices, faces=scan.faces, aligned=pred.aligned, labels=pred.fdi,
                            classes=pred.classes, instances=np.asarray(instances), probabilities=pred.probs,
                            confidence=confidence, units=units, source=Path(scan.path) if scan.path else None,
                            seconds=time.perf_counter() - t0, meta=meta)


def _is_pair(scan: Any) -> bool:
    return isinstance(scan, (tuple, list)) and len(scan) == 2


def _jaw_of(fdi: np.ndarray) -> str:
    """The jaw most of the predicted tooth vertices belong to (quadrants 1, 2: upper)."""
    teeth = fdi[fdi > 0]
    return "upper" if (teeth < 30).sum() >= (teeth >= 30).sum() else "lower"
