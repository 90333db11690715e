"""A tooth's position (1 central incisor .. 8 third molar) read from its own shape, not from its place.

The per-point network sees the whole arch and learns to count teeth from the midline; where a tooth is
missing and its space closed, it numbers every tooth behind the gap one position off, confidently. A
crown cut out of the arch cannot be counted: here each tooth is cropped on its own, in a frame of its
own (origin at its centroid, x distal along the arch, y buccal, z towards the crown; teeth of the -x
side mirrored onto the +x side), and a small point network (:class:`~pointmamba.models.tooth_shape.ToothShapeNet`)
names its position from the crop alone. The instance numbering takes that as a second, independent
piece of evidence (``infer.shape_weight``). Off unless a model file holds such a network or one is named:
held out it mended counted shifts but broke mixed dentitions, a net loss on one split of two
(``docs/results/tooth_shape/README.md``).

The classifier may also have a "no tooth" output, trained on crops of bare ridge (:func:`ridge_crops`): a
segmentation network that sees a healed ridge where teeth were still draws a few teeth on it, and the
numbering can then call such an instance gingiva (``infer.tooth_weight``), a separate weight from the
positions'.

Crops are area-weighted samples of the tooth's surface (so the mesh's vertex density, which differs from
scanner to scanner, does not matter), in mm (a molar's size is part of what makes it one).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

CROP_POINTS = 256
NUM_POSITIONS = 8  # 1..8 -> 0..7


def tooth_frame(points_xy: np.ndarray, tangent: np.ndarray, arch_centre: np.ndarray, side: int
                ) -> np.ndarray:
    """The 2x2 rows (distal, buccal) of a tooth's frame in the canonical xy plane.

    ``tangent`` runs along the arch from its -x end to its +x end; ``side`` +1 for a tooth on the +x
    side (distal = +tangent), -1 on the -x side (distal = -tangent: the frame is mirrored, so both
    sides' teeth look alike). Buccal points away from ``arch_centre``."""
    t = np.asarray(tangent, dtype=np.float64)[:2]
    t = t / max(float(np.linalg.norm(t)), 1e-12)
    distal = t * (1.0 if side >= 0 else -1.0)
    buccal = np.array([t[1], -t[0]])
    if float((np.asarray(points_xy, dtype=np.float64).mean(0) - arch_centre) @ buccal) < 0:
        buccal = -buccal
    return np.stack([distal, buccal])


def sample_surface(vertices: np.ndarray, faces: np.ndarray, members: np.ndarray, n_points: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n_points`` points and unit normals on the faces whose three corners are all in ``members``,
    area-weighted; where those faces have no area (a piece of loose vertices), the member vertices
    themselves with zero normals."""
    from ..data.mesh import face_normals

    inside = np.zeros(len(vertices), dtype=bool)
    inside[members] = True
    f = faces[inside[faces].all(1)] if len(faces) else np.zeros((0, 3), dtype=np.int64)
    cross = face_normals(vertices, f) if len(f) else np.zeros((0, 3))
    area = np.linalg.norm(cross, axis=1)
    if len(f) == 0 or area.sum() <= 0:
        pick = rng.choice(np.asarray(members), size=n_points, replace=True)
        return vertices[pick].astype(np.float64), np.zeros((n_points, 3))
    which = rng.choice(len(f), size=n_points, p=area / area.sum())
    u, v = rng.random(n_points), rng.random(n_points)
    flip = u + v > 1  # fold the square onto the triangle: uniform barycentric coordinates
    u, v = np.where(flip, 1 - u, u), np.where(flip, 1 - v, v)
    a, b, c = (vertices[f[which, k]] for k in range(3))
    points = a + u[:, None] * (b - a) + v[:, None] * (c - a)
    normals = cross[which] / np.maximum(area[which], 1e-12)[:, None]
    return points, normals


def tooth_transform(aligned: np.ndarray, members: np.ndarray, tangent: np.ndarray, arch_centre: np.ndarray,
                    side: int) -> tuple[np.ndarray, np.ndarray]:
    """(origin (3,), rotation (3, 3)) of a tooth's own frame: ``local = (p - origin) @ rotation.T``; the
    origin is the centroid of its vertices, the rows :func:`tooth_frame`'s and +z (a mirror for -x side
    teeth)."""
    rotation = np.zeros((3, 3))
    rotation[:2, :2] = tooth_frame(aligned[members, :2], tangent, arch_centre, side)
    rotation[2, 2] = 1.0
    return aligned[members].mean(0), rotation


def tooth_crop(aligned: np.ndarray, faces: np.ndarray, members: np.ndarray, tangent: np.ndarray,
               arch_centre: np.ndarray, side: int, rng: np.random.Generator, n_points: int = CROP_POINTS
               ) -> np.ndarray:
    """(n_points, 6) float32: a tooth's surface points and normals in its own frame (:func:`tooth_transform`),
    from canonical-frame vertices ``aligned`` (crowns +z) and the tooth's vertex ids ``members``."""
    members = np.asarray(members)
    if len(members) == 0:
        raise ValueError("tooth_crop: a tooth with no vertices")
    aligned = np.asarray(aligned, dtype=np.float64)
    points, normals = sample_surface(aligned, np.asarray(faces), members, n_points, rng)
    origin, rotation = tooth_transform(aligned, members, tangent, arch_centre, side)
    return np.concatenate([(points - origin) @ rotation.T, normals @ rotation.T], axis=1).astype(np.float32)


def instance_crops(aligned: np.ndarray, faces: np.ndarray, instances: Sequence[Any], arch_centre: np.ndarray,
                   sides: Sequence[int] | int, seed: int = 0, n_points: int = CROP_POINTS) -> np.ndarray:
    """(n, n_points, 6) crops of measured instances (:class:`~pointmamba.evaluation.tooth_numbering.Instance`:
    ``vertices``, ``tangent``), each as a tooth of side ``sides`` (one per instance, or one for all: -1
    the -x side, +1 the +x side), seeded: the same scan gives the same crops."""
    sides = [sides] * len(instances) if isinstance(sides, (int, np.integer)) else list(sides)
    out = []
    for k, (inst, side) in enumerate(zip(instances, sides)):
        # one stream per instance: a tooth's crop does not depend on the teeth measured before it
        rng = np.random.default_rng([seed, k])
        out.append(tooth_crop(aligned, faces, inst.vertices, inst.tangent, arch_centre, int(side), rng, n_points))
    return np.stack(out) if out else np.zeros((0, n_points, 6), dtype=np.float32)


def reference_teeth(labels: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The reference teeth of a labelled scan: vertex ids of each FDI number present and the number."""
    fdi = np.unique(labels[labels > 0])
    return [np.flatnonzero(labels == t) for t in fdi], fdi.astype(np.int64)


def fdi_side(fdi: np.ndarray, jaw: str) -> np.ndarray:
    """-1 for teeth on the -x side of the canonical frame, +1 on the +x side."""
    from ..data.fdi import fdi_to_class
    from .tooth_decoding import side_blocks

    minus = side_blocks(17, jaw)[0]
    return np.where(np.isin(fdi_to_class(np.asarray(fdi), jaw, 17), minus), -1, 1)


def scan_crops(aligned: np.ndarray, faces: np.ndarray, labels: np.ndarray, jaw: str, seed: int = 0,
               n_points: int = CROP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Crops of every reference tooth of a labelled scan, each on its own side, and their positions 1..8,
    measured as inference measures predicted instances (the same arch frame and tangents)."""
    from .tooth_numbering import measure_instances

    members, fdi = reference_teeth(labels)
    if not members:
        return np.zeros((0, n_points, 6), dtype=np.float32), np.zeros(0, dtype=np.int64)
    instances, frame = measure_instances(aligned, members)
    fdi = fdi[[inst.key for inst in instances]]
    return instance_crops(aligned, faces, instances, frame.centre, fdi_side(fdi, jaw), seed, n_points), fdi % 10


def crop_probabilities(model: Any, crops: np.ndarray, jaw: str) -> tuple[np.ndarray, np.ndarray]:
    """((n, 8), (n,)) float64: each crop's probability of each position 1..8 as a tooth, and of being a
    tooth at all, under ``model`` (a :class:`~pointmamba.models.tooth_shape.ToothShapeNet`; one without a
    "no tooth" output calls every crop a tooth)."""
    import torch

    if len(crops) == 0:
        return np.zeros((0, NUM_POSITIONS)), np.zeros(0)
    device = next(model.parameters()).device
    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(crops, dtype=np.float32)).to(device)
        upper = torch.full((len(crops),), 1.0 if jaw == "upper" else 0.0, device=device)
        logits = model(x, upper).double()
    positions = torch.softmax(logits[:, :NUM_POSITIONS], dim=1).cpu().numpy()
    if logits.shape[1] == NUM_POSITIONS:
        return positions, np.ones(len(crops))
    return positions, torch.sigmoid(torch.logsumexp(logits[:, :NUM_POSITIONS], 1) - logits[:, NUM_POSITIONS]).cpu().numpy()


def position_probabilities(model: Any, crops: np.ndarray, jaw: str) -> np.ndarray:
    """(n, 8) float64: each crop's probability of each position 1..8, given that it is a tooth
    (:func:`crop_probabilities`)."""
    return crop_probabilities(model, crops, jaw)[0]


def arch_shape_evidence(minus_side: np.ndarray, plus_side: np.ndarray) -> np.ndarray:
    """(n, 16) per arch index (-x third molar .. -x central, +x central .. +x third molar) from each
    instance's (n, 8) position probabilities cropped as a tooth of the -x side and of the +x side: which
    side a tooth is on is the numbering's to decide, so each side's numbers read the crop made for it."""
    return np.concatenate([np.asarray(minus_side, dtype=np.float64)[:, ::-1],
                           np.asarray(plus_side, dtype=np.float64)], axis=1)


def shape_evidence(model: Any, aligned: np.ndarray, faces: np.ndarray, instances: Sequence[Any],
                   arch_centre: np.ndarray, jaw: str) -> tuple[np.ndarray, np.ndarray]:
    """((n, 16), (n,)): shape evidence of measured instances per arch index (:func:`arch_shape_evidence`),
    and each one's probability of being a tooth at all (1 where the network has no "no tooth" output)."""
    plus = instance_crops(aligned, faces, instances, arch_centre, 1)
    # the -x side's frame differs from the +x side's by the sign of distal alone: mirror, do not resample
    minus = plus * np.array([-1, 1, 1, -1, 1, 1], dtype=plus.dtype)
    (p_minus, t_minus), (p_plus, t_plus) = crop_probabilities(model, minus, jaw), crop_probabilities(model, plus, jaw)
    return arch_shape_evidence(p_minus, p_plus), 0.5 * (t_minus + t_plus)


def ridge_crops(aligned: np.ndarray, faces: np.ndarray, labels: np.ndarray, seed: int = 0,
                n_points: int = CROP_POINTS) -> np.ndarray:
    """(n, n_points, 6) crops of bare ridge: every reference tooth of a labelled scan flattened onto the
    gingiva (as :class:`~pointmamba.data.missing_teeth.MissingTeeth` does, 0-1 mm below it), then one
    patch around each tooth's place (its centre moved up to 2 mm, 3-11 mm across seen from above: the
    sizes of the phantom teeth a segmentation network draws on a bare ridge), cropped as inference crops a
    predicted tooth. Seeded: the same scan and seed give the same crops."""
    from ..data.missing_teeth import MissingTeeth
    from .tooth_numbering import measure_instances

    members, _ = reference_teeth(labels)
    if not members:
        return np.zeros((0, n_points, 6), dtype=np.float32)
    rng = np.random.default_rng([seed, 1])
    aligned = np.asarray(aligned, dtype=np.float64)
    _, frame = measure_instances(aligned, members)
    gone = labels > 0
    flat = aligned.copy()
    flat[gone] = MissingTeeth({"ridge_drop_mm": 1.0})._flattened(aligned, np.zeros_like(aligned), labels, gone, rng)[0]
    patches = []
    for m in members:
        angle, reach = rng.uniform(0, 2 * np.pi), 2.0 * np.sqrt(rng.random())
        centre = aligned[m, :2].mean(0) + reach * np.array([np.cos(angle), np.sin(angle)])
        patch = np.flatnonzero(np.linalg.norm(flat[:, :2] - centre, axis=1) <= rng.uniform(1.5, 5.5))
        if len(patch) >= 20:
            patches.append(patch)
    if not patches:
        return np.zeros((0, n_points, 6), dtype=np.float32)
    instances, _ = measure_instances(flat, patches, frame)
    sides = rng.choice([-1, 1], size=len(instances))
    return instance_crops(flat, faces, instances, frame.centre, sides, seed + 7919, n_points)


SHAPE_FORMAT = "pointmamba-tooth-shape"


def shape_entry(model: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """A tooth-shape network as plain data (float32 tensors, sizes, ``meta``): a file of its own, or the
    ``tooth_shape`` entry of a model file (``tools/export_model.py --tooth-shape``)."""
    return {"format": SHAPE_FORMAT, "width": int(model.width), "n_points": int(model.n_points),
            "no_tooth": bool(model.no_tooth), "state_dict": {k: v.detach().cpu().float() for k, v in model.state_dict().items()}, "meta": dict(meta)}


def save_shape_model(path: str | Path, model: Any, meta: dict[str, Any]) -> None:
    """Write a tooth-shape model file (:func:`shape_entry`), atomically."""
    from ..training.checkpoint import save_checkpoint

    save_checkpoint(shape_entry(model, meta), path)


def read_shape_entry(path: str | Path) -> dict[str, Any]:
    """The tooth-shape entry of ``path``: a file of :func:`save_shape_model`, or a model file holding one
    (read with ``weights_only=True``); anything else is a ValueError naming the file."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: tooth-shape model not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path}: not a tooth-shape model ({type(exc).__name__}: {exc})") from None
    if isinstance(state, dict) and isinstance(state.get("tooth_shape"), dict):
        state = state["tooth_shape"]
    if not isinstance(state, dict) or state.get("format") != SHAPE_FORMAT:
        raise ValueError(f"{path}: not a tooth-shape model, and no model file holding one (train one with "
                         "tools/train_tooth_shape.py)")
    return state


def load_shape_model(path: str | Path, device: Any = "cpu") -> Any:
    """The :class:`~pointmamba.models.tooth_shape.ToothShapeNet` of ``path`` (:func:`read_shape_entry`), in
    eval mode; weights that do not fit, or are not finite, are a ValueError naming the file."""
    return shape_network(read_shape_entry(path), path).to(device).eval()


def shape_network(entry: dict[str, Any], path: str | Path) -> Any:
    """The network of a tooth-shape entry read from ``path`` (named in errors), in eval mode on the CPU."""
    import torch

    from ..models.tooth_shape import ToothShapeNet

    weights = entry.get("state_dict")
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) and torch.isfinite(v).all()
                                                for v in weights.values()):
        raise ValueError(f"{path}: tooth-shape weights must be finite tensors")
    try:
        model = ToothShapeNet(width=int(entry["width"]), n_points=int(entry["n_points"]),
                              no_tooth=bool(entry.get("no_tooth", False)))
        model.load_state_dict({k: v.float() for k, v in weights.items()})
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{path}: tooth-shape weights do not fit the network: {exc}") from None
    return model.eval()


def stored_weight(entry: dict[str, Any], key: str = "weight") -> float | None:
    """A weight stored with a tooth-shape entry (chosen on held-out scans), or None: ``weight`` that of
    the positions, ``tooth_weight`` that of "no tooth"."""
    weight = (entry.get("meta") or {}).get(key)
    return None if weight is None else float(weight)
