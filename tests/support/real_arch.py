"""Real sample arches (data/samples) and their reference labels made into a failure, for the review and
numbering tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pointmamba.data import fdi_to_class, load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.data.mesh import apply_transform
from pointmamba.data.arch import labelled_teeth

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"


def sample_arch(name: str):
    """(scan, aligned vertices, reference FDI labels, the network's probabilities as if it saw every tooth)."""
    scan = load_scan(SAMPLES / name.split("_")[0] / f"{name}.obj")
    aligned = apply_transform(scan.vertices.astype(np.float64), preprocess_scan(scan)["transform"])
    return scan, aligned, scan.labels.astype(np.int64), reading(scan.labels, scan.jaw)


def reading(labels: np.ndarray, jaw: str) -> np.ndarray:
    """(V, 17) probabilities of a network reading FDI ``labels``: 0.9 on each vertex's label, the rest spread."""
    classes = fdi_to_class(labels, jaw, 17)
    probs = np.full((len(classes), 17), 0.1 / 16)
    probs[np.arange(len(classes)), classes] = 0.9
    return probs


def split_tooth(labels: np.ndarray, aligned: np.ndarray, tooth: int, lengthwise: bool = False) -> np.ndarray:
    """``tooth`` cut in two along the arch, its distal half numbered as its distal neighbour, and every tooth
    behind it moved on one number (as a network counting teeth numbers them; an 8th tooth drops out).
    ``lengthwise``: cut along the arch instead, the outer (buccal) half numbered as the distal neighbour:
    two pieces each nearly the tooth's full width."""
    quadrant, position = divmod(tooth, 10)
    out = labels.copy()
    for p in range(8, position, -1):
        out[labels == 10 * quadrant + p] = 10 * quadrant + p + 1 if p < 8 else 0
    teeth, frame = labelled_teeth(aligned, labels)
    me = teeth[tooth]
    if lengthwise:
        _, radius = frame.polar(aligned[me.vertices, :2])
        out[me.vertices[radius > np.median(radius)]] = tooth + 1
        return out
    along = me.along()
    angle, _ = frame.polar(aligned[me.vertices, :2])
    # the distal half lies away from the midline (angle 0); the tangent may point either way along it
    distal = (along - np.median(along)) * np.sign(np.median(angle)) * np.sign(np.corrcoef(along, angle)[0, 1]) > 0
    out[me.vertices[distal]] = tooth + 1
    return out


def away_from(aligned: np.ndarray, tooth: np.ndarray, front: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every vertex's coordinates seen from above (mm) from the centre of the ``tooth`` mask: along the direction
    from the ``front`` mask's centre to it (away from the neighbour in front), and across it (that direction turned
    a quarter counter-clockwise)."""
    xy = aligned[:, :2]
    along = xy[tooth].mean(0) - xy[front].mean(0)
    along /= np.linalg.norm(along)
    rel = xy - xy[tooth].mean(0)
    return rel @ along, rel @ np.array([-along[1], along[0]])


def sample_with_labels(folder: Path, name: str, labels: np.ndarray) -> Path:
    """The real sample arch ``name`` written under ``folder`` in the Teeth3DS layout with ``labels`` as its label
    file (a label file as a data set might hold it), for the data tools; returns ``folder``."""
    import json

    from pointmamba.data import read_mesh, write_obj

    source = SAMPLES / name.split("_")[0] / f"{name}.obj"
    target = folder / name.split("_")[0]
    target.mkdir(parents=True)
    write_obj(target / f"{name}.obj", *read_mesh(source))
    doc = json.loads(source.with_suffix(".json").read_text())
    doc["labels"] = np.asarray(labels).tolist()
    (target / f"{name}.json").write_text(json.dumps(doc))
    return folder
