"""Segmenting whole scans with a trained checkpoint: load, preprocess like the eval set, predict every vertex."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from ..config import ConfigError, input_columns, input_features
from .config import infer_options
from ..utils.device import autocast
from ..point.batch import PointBatch
from ..utils.timing import step as timed
from ..checkpoints.checkpoint import check_model_config, checkpoint_config, load_checkpoint, load_model_weights


@dataclass
class Prediction:
    """Per-vertex result for one scan: class ids, FDI labels, class probabilities, the aligned vertices;
    with instance numbering also the tooth instances and their numbering (posteriors per instance)."""

    classes: np.ndarray
    fdi: np.ndarray
    probs: np.ndarray
    aligned: np.ndarray
    numbering: Any = None  # tooth_numbering.Numbering when infer.instance_numbering is on
    instances: np.ndarray | None = None  # (V,) 0 gingiva, 1..k one per numbered tooth (with the numbering)
    instance_probs: dict[int, np.ndarray] | None = None  # instance id -> (C,) posterior of its number
    jaw: str | None = None  # the jaw the labels are numbered for: the scan's, else told from the teeth
    jaw_call: Any = None  # jaw_from_teeth.JawCall: what the teeth say (None where the options cannot tell)
    model_base: Any = None  # data.model_base.ModelBase: the model's base left out (infer.model_base; None: none)
    faces_reversed: bool = False  # the mesh was wound inside out and segmented with its faces reversed (infer.orient_faces)
    faces_rewound: int = 0  # faces wound against the rest of the mesh, reversed to segment it (infer.consistent_winding)
    reversed_finding: bool = False  # the review's ``reversed``: at least 3/4 of the mesh wound inside out


def load_trained(checkpoint: str | Path, device: torch.device, config: dict[str, Any] | None = None,
                 average_with: Sequence[str | Path] = (), state: dict[str, Any] | None = None
                 ) -> tuple[nn.Module, dict[str, Any]]:
    """The trained network in eval mode, with RelPos in its trained warm-up state (buffers in the weights), and its config.

    ``config`` None builds the model from the config stored in the checkpoint; a resolved config (e.g.
    the one ``tools/test.py --config`` names) is used instead when given. A model file that holds more
    networks (``average_with``, see :mod:`.averaged_networks`), or checkpoints named in ``average_with``,
    give an :class:`~.averaged_networks.AveragedNetworks`: the first network is this checkpoint's (built
    from ``config``), each other is built from its own stored config. ``state``: the checkpoint as
    :func:`~pointmamba.checkpoints.checkpoint.load_checkpoint` read it already (None: read it here).
    """
    from .averaged_networks import AveragedNetworks, check_one_network

    state = load_checkpoint(checkpoint, map_location="cpu") if state is None else state
    if config is None:  # checked as a config file is: a crafted one fails here, in one line, allocating nothing
        config = checkpoint_config(state, checkpoint)
    model = _build_network(state, config, checkpoint)
    stored = state.get("average_with") or []
    networks = [(m, f"{checkpoint} (network {k} of {len(stored) + 1})") for k, m in enumerate(stored, 2)]
    for path in average_with:
        other = load_checkpoint(path, map_location="cpu")
        check_one_network(other, path)
        networks.append((other, str(path)))
    others = []
    for member, where in networks:
        member_cfg = checkpoint_config(member, where)
        others.append((_build_network(member, member_cfg, where), member_cfg))
    if others:
        model = AveragedNetworks(model, config, others, str(checkpoint))
    return model.to(device).eval(), config


def _build_network(state: dict[str, Any], config: dict[str, Any], path: str | Path) -> nn.Module:
    """The network of checkpoint ``state`` built from ``config``, its weights loaded (CPU, train mode)."""
    from .. import build_model

    check_model_config(state, config, path)  # one line naming the keys, not torch's size-mismatch dump
    try:
        model = build_model(config)
    except ValueError as exc:
        raise ConfigError(f"{path}: config does not build a model: {exc}") from None
    load_model_weights(model, state["model"], path)
    return model


def _jaw_classes(num_classes: int, jaw: str | None) -> np.ndarray | None:
    """Class ids a scan of ``jaw`` may take (None: all): the 33-class scheme holds both jaws."""
    if num_classes != 33 or jaw is None:
        return None
    teeth = np.arange(1, 17) if jaw == "upper" else np.arange(17, 33)
    return np.concatenate([[0], teeth])


class TestView:
    """One test-time view in the canonical frame: optional mirror (x -> -x), then a rotation of
    ``angle_deg`` about the occlusal axis. Called like an :class:`~pointmamba.data.Augment`."""

    def __init__(self, mirror: bool = False, angle_deg: float = 0.0) -> None:
        self.mirror, self.angle_deg = bool(mirror), float(angle_deg)

    def __call__(self, coord: np.ndarray, normal: np.ndarray | None, labels: np.ndarray | None,
                 rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        from ..data.augment import mirror, rotation_about
        from ..data.mesh import rotate

        if self.mirror:
            coord, normal, labels = mirror(coord, normal, labels)
        if self.angle_deg:
            rot = rotation_about([0.0, 0.0, 1.0], np.radians(self.angle_deg))
            coord = rotate(coord, rot)
            normal = None if normal is None else rotate(normal, rot)
        return coord, normal, labels


@torch.no_grad()
def predict_batch(model: nn.Module, batch: PointBatch, device: torch.device,
                  amp: bool = False) -> tuple[PointBatch, torch.Tensor]:
    """(the batch on ``device``, per-row float32 logits): the one forward pass of validation, testing and
    prediction (mixed precision on CUDA when ``amp``)."""
    batch = batch.to(device)
    with autocast(device, amp):
        logits = model(batch)
    return batch, logits.float()


@torch.no_grad()
def vertex_probabilities(model: nn.Module, arrays: dict[str, np.ndarray], name: str, cfg: dict[str, Any],
                         device: torch.device, mirror_tta: bool = False,
                         angles: tuple[float, ...] = (0.0,)) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities (V, C) of every vertex of preprocessed ``arrays`` and the 4x4 transform to the
    canonical frame, averaged over test-time views: each rotation in ``angles`` (degrees about the
    occlusal axis) and, with ``mirror_tta``, each also mirrored across the sagittal plane with the
    left/right classes swapped back."""
    views = [TestView(m, a) for m in ((False, True) if mirror_tta else (False,)) for a in angles]
    total, transform = summed_view_probabilities(model, arrays, name, cfg, device, views)
    return total / len(views), transform


_VIEWS_PER_BATCH = 4  # test-time views run as one batch (bounded: a batch's activations grow with it)


@torch.no_grad()
def summed_view_probabilities(model: nn.Module, arrays: dict[str, np.ndarray], name: str, cfg: dict[str, Any],
                              device: torch.device, views: list[TestView],
                              start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-vertex probabilities of ``views`` added up in order onto ``start`` (a running sum of
    earlier views, so a caller can extend it without repeating their forward passes), and the transform.

    Views go through the network together, as one batch (up to four at a time): the mirrored view beside
    the plain one costs one forward pass, not two (the network keeps samples apart, so each view's
    probabilities are those it gets alone). For an :class:`~.averaged_networks.AveragedNetworks` each view's
    probabilities are the mean of its networks' (each fed its own input layout)."""
    from .averaged_networks import inference_members

    members = inference_members(model, cfg)
    totals, transform = _summed_networks(members, arrays, name, device, views)
    total = totals[0]
    for part in totals[1:]:
        total = total + part
    if len(members) > 1:
        total /= len(members)
    return (total if start is None else start + total), transform


def _summed_networks(members: list[tuple[nn.Module, dict[str, Any]]], arrays: dict[str, np.ndarray], name: str,
                     device: torch.device, views: list[TestView]) -> tuple[list[np.ndarray], np.ndarray]:
    """Each network's probabilities summed over ``views``, and the transform to the canonical frame.

    The networks of an average see the same points (one grid, one pose): each chunk of views is prepared
    and batched once, with every input channel any of them takes, and each network gets its own columns of
    it. The batch's neighbour maps and curve routes, built by the first network, serve the others (half
    the preparation of two networks; the probabilities are those of separate batches, bit for bit)."""
    from ..data import collate, mirror_class
    from ..data.dataset import make_item

    grids = {float(c["data"]["grid_size"]) for _, c in members}
    if len(grids) > 1:  # different points: nothing to share
        parts = [_summed_networks([m], arrays, name, device, views) for m in members]
        frames = [frame for _, frame in parts]
        if any(not np.allclose(f, frames[0], atol=1e-6) for f in frames[1:]):
            raise ValueError(f"{name}: the averaged networks put the scan in different frames (data sections "
                             "differ in pose alignment): their probabilities cannot be added")
        return [total for (total,), _ in parts], frames[0]
    d = members[0][1]["data"]
    union = {key: any(input_features(c["data"])[key] for _, c in members) for key in ("coord_feature", "jaw_feature")}
    takes = [input_columns(union, c["data"]) for _, c in members]
    totals: list[np.ndarray | None] = [None] * len(members)
    transform = None
    for first in range(0, len(views), _VIEWS_PER_BATCH):
        chunk = views[first:first + _VIEWS_PER_BATCH]
        with timed("preprocess"):
            items = [make_item(arrays, name=name, num_classes=d["num_classes"], grid_size=d["grid_size"],
                               align=d["align"], mode="test", rng=np.random.default_rng(0), augment=view,
                               **union) for view in chunk]
            batch = collate(items).to(device)
        full = batch.feat
        for k, (net, net_cfg) in enumerate(members):
            with timed("network"):
                batch.feat = full if takes[k] == list(range(full.shape[1])) else full[:, takes[k]].contiguous()
                _, logits = predict_batch(net, batch, device, bool(net_cfg["train"]["amp"]))
                rows = batch.extra["vertex_row"]
                per_view = torch.softmax(logits, 1)[rows].cpu().numpy().astype(np.float64).reshape(
                    len(chunk), -1, logits.shape[1])
            for view, item, probs in zip(chunk, items, per_view):
                if view.mirror:
                    probs = probs[:, mirror_class(np.arange(probs.shape[1]), d["num_classes"])]
                transform = np.asarray(item["transform"])  # the frame before the view's own transform
                totals[k] = probs if totals[k] is None else totals[k] + probs
        batch.feat = full
    assert transform is not None and all(t is not None for t in totals)
    return totals, transform


def refine(probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, normals: np.ndarray, jaw: str | None,
           num_classes: int, options: dict[str, Any]) -> np.ndarray:
    """Per-vertex class ids from probabilities: restrict to the jaw's classes, graph cut and tooth
    numbering as ``options`` (the ``infer`` config section) switch them."""
    return refine_numbered(probs, aligned, faces, normals, jaw, num_classes, options)[0]


def jaw_probabilities(probs: np.ndarray, num_classes: int, jaw: str | None) -> np.ndarray:
    """``probs`` (V, C) restricted to ``jaw``'s classes and renormalized, as :func:`refine_numbered` cuts and
    numbers them; unchanged where the jaw is unknown or the classes are one jaw's already."""
    keep = _jaw_classes(num_classes, jaw)
    if keep is None:
        return probs
    masked = np.zeros_like(probs)
    masked[:, keep] = probs[:, keep]
    return masked / np.maximum(masked.sum(1, keepdims=True), 1e-12)


def refine_numbered(probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, normals: np.ndarray,
                    jaw: str | None, num_classes: int, options: dict[str, Any],
                    progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, Any]:
    """:func:`refine` and the instance numbering it made (None where ``infer.instance_numbering`` is off
    or the jaw is unknown: the cut's labels as they are); ``progress`` is told each step as it starts."""
    options = infer_options({"infer": options})  # a key left out means its documented default, never "off"
    step = progress or (lambda name: None)
    probs = jaw_probabilities(probs, num_classes, jaw)
    labels = _cut(probs, aligned, faces, normals, options, step)
    numbering = None
    if jaw is not None and options["instance_numbering"]:
        step("numbering teeth")
        labels, numbering = _number(labels, probs, aligned, faces, jaw, num_classes, options)
    return labels, numbering


def refine_either_jaw(probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, normals: np.ndarray,
                      given: str | None, num_classes: int, options: dict[str, Any],
                      progress: Callable[[str], None] | None = None,
                      cut: np.ndarray | None = None) -> tuple[np.ndarray, Any, Any]:
    """:func:`refine_numbered` that also tells the jaw from the teeth (:mod:`.jaw_from_teeth`): the graph cut
    once, the numbering under both jaws' priors; the jaw is ``given`` where a name said it, else the one
    whose numbering has the larger log partition function. Returns (labels, numbering, :class:`~.jaw_from_teeth.JawCall`); the call is None
    where the options leave the labels without a jaw's numbering (33 classes, no instance numbering), which
    then needs ``given``. ``cut``: the graph cut's labels of these probabilities where the caller has them
    (a replay of the numbering alone, :mod:`pointmamba.research.numbering_replay`)."""
    from .jaw_from_teeth import call_jaw

    options = infer_options({"infer": options})
    if num_classes != 17 or not options["instance_numbering"]:
        if given is None and num_classes == 17:
            raise ValueError("jaw unknown, and these inference options cannot tell it from the teeth (that needs "
                             "infer.instance_numbering on): pass --jaw upper|lower")
        labels, numbering = refine_numbered(probs, aligned, faces, normals, given, num_classes, options, progress)
        return labels, numbering, None
    from ..data.mesh import mesh_edges, vertex_areas
    from .tooth_numbering import cut_pieces, measured_pieces

    step = progress or (lambda name: None)
    edges = mesh_edges(faces, len(probs)) if len(faces) else None  # one list for the cut and the pieces
    if cut is None:
        cut = _cut(probs, aligned, faces, normals, options, step, edges)
    step("numbering teeth")  # under both jaws' priors; what does not depend on the jaw is made once
    shared = {"areas": vertex_areas(aligned, faces) if len(faces) else None,
              "pieces": cut_pieces(cut, aligned, faces, edges=edges) if len(faces) else None}
    if shared["pieces"] is not None:  # the teeth, their places and mean probabilities: one measurement
        shared["measured"] = measured_pieces(shared["pieces"], aligned, probs, shared["areas"])
    numbered = {jaw: _number(cut, probs, aligned, faces, jaw, num_classes, options, **shared)
                for jaw in ("upper", "lower")}
    call = call_jaw({jaw: -numbering.cut_log_z for jaw, (_, numbering) in numbered.items()}, given)
    labels, numbering = numbered[call.used]
    return labels, numbering, call


def _cut(probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, normals: np.ndarray, options: dict[str, Any],
         step: Callable[[str], None], edges: np.ndarray | None = None) -> np.ndarray:
    """Per-vertex classes: the graph cut of ``probs`` where on (and the mesh has faces), else the argmax.
    ``edges``: the mesh's edges where the caller has them."""
    from .graph_cut import graph_cut

    if not (options["graph_cut"] and len(faces)):
        return probs.argmax(1)
    step("graph cut")
    return graph_cut(probs, aligned, faces, normals, smoothing=options["graph_cut_smoothing"],
                     density_power=float(options["graph_cut_density_power"] or 0.0),
                     coarse_first=bool(options["graph_cut_coarse_first"]),
                     fine_cycles=int(options["graph_cut_fine_cycles"]),
                     tooth_pair_cost=options["graph_cut_tooth_pair_cost"], edges=edges)


def _number(labels: np.ndarray, probs: np.ndarray, aligned: np.ndarray, faces: np.ndarray, jaw: str,
            num_classes: int, options: dict[str, Any], areas: np.ndarray | None = None,
            pieces: list[np.ndarray] | None = None, measured: Any = None) -> tuple[np.ndarray, Any]:
    """The instance numbering of cut ``labels`` under ``jaw``'s priors: (labels, Numbering). ``areas`` and
    ``pieces`` (the vertex areas and the cut's tooth pieces) where the caller has made them already."""
    from ..data.mesh import vertex_areas
    from .arch_priors import child_priors, class_prior_scale, default_priors
    from .tooth_numbering import number_teeth

    priors = replace(default_priors(jaw), fragment_cost=float(options["numbering_fragment_cost"]),
                     evidence_weight=float(options["numbering_evidence_weight"]),
                     touching_nu=float(options["numbering_touching_nu"]),
                     evidence_scale=class_prior_scale(jaw, float(options["numbering_class_prior"])))
    if areas is None and len(faces):
        areas = vertex_areas(aligned, faces)

    def numbered(arch_priors: Any) -> tuple[np.ndarray, Any]:
        return number_teeth(labels, probs, aligned, faces, jaw, num_classes, priors=arch_priors, areas=areas,
                            dentition=str(options["dentition"]), pieces=pieces, measured=measured,
                            mend_dropped=bool(options["mend_dropped"]), merge_packed=bool(options["merge_packed"]),
                            mend_unnumbered=float(options["mend_unnumbered"] or 0.0),
                            mend_unnumbered_width=float(options["mend_unnumbered_width"] or 0.0),
                            mend_unnumbered_area=float(options["mend_unnumbered_area"] or 0.0),
                            mend_unnumbered_touching=bool(options["mend_unnumbered_touching"]),
                            merge_area_limit=float(options["merge_area_limit"] or 0.0))

    adult = numbered(priors)
    # only an arch that shows the pattern as numbered: elsewhere a child's priors make a pattern of their own
    # (IOS068_upper, its 7s dropped: docs/results/review_flag/log.md)
    if options["dentition"] == "mixed" and options["child_priors"] and adult[1].dentition.sides:
        child = numbered(child_priors(priors, jaw))
        if child[1].dentition.sides:
            return child
    return adult


def scan_probabilities(model: nn.Module, scan: Any, cfg: dict[str, Any], device: torch.device,
                       progress: Callable[[str], None] | None = None
                       ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """The network part of :func:`segment_scan`: (infer options, probabilities (V, C), vertices and
    normals in the canonical frame); :func:`refine_numbered` makes labels of them (checks that try
    several ``infer`` settings on one scan run the network once)."""
    from ..data.dataset import preprocess_scan
    from ..data.mesh import apply_transform
    from .averaged_networks import inference_members

    d = cfg["data"]
    options = infer_options(cfg)
    step = progress or (lambda name: None)
    step("preprocessing")
    with timed("preprocess"):
        arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
    views = len(options["tta_angles"]) * (2 if options["mirror_tta"] else 1)
    networks = len(inference_members(model, cfg))
    step(f"network, {views} view{'s' if views > 1 else ''}" + (f" x {networks} networks" if networks > 1 else ""))
    probs, transform = vertex_probabilities(model, arrays, scan.name, cfg, device, options["mirror_tta"],
                                            tuple(options["tta_angles"]))
    aligned = apply_transform(scan.vertices.astype(np.float64), transform)
    normals = apply_transform(arrays["normals"].astype(np.float64), transform, direction=True)
    return options, probs, aligned, normals


def segment_scan(model: nn.Module, scan: Any, cfg: dict[str, Any], device: torch.device,
                 progress: Callable[[str], None] | None = None) -> Prediction:
    """Predict every vertex of ``scan`` (a ``pointmamba.data.Scan``) at full resolution.

    The scan is preprocessed exactly as the eval split is (canonical pose, centring, normals, grid
    sampling in test mode); every vertex takes its voxel representative's probabilities, then the
    ``infer`` options (mirror test-time augmentation, graph cut, tooth numbering) apply. ``progress`` is
    told each step as it starts (minutes each on a scan of millions of vertices). A model's base (its flat
    plate and the walls on it; ``infer.model_base``, :mod:`pointmamba.data.model_base`) is left out, its own
    vertices gingiva. A mesh wound inside out (``infer.orient_faces``, :mod:`pointmamba.data.face_winding`) is
    segmented with its faces reversed, and one wound part one way, part the other (``infer.consistent_winding``)
    with each part's faces wound as its larger area is.
    """
    options = infer_options(cfg)
    # a mesh wound part one way, part the other (merged or edited): each part wound one way first, as its larger
    # area is (docs/results/face_winding, pre-registration 4); then a mesh wound inside out (every normal into the
    # jaw) is segmented with its faces reversed: the network reads the normals, and such a mesh had no tooth found
    against = None
    if options["consistent_winding"] and len(scan.faces):
        from ..data.face_winding import inconsistent_faces

        against = inconsistent_faces(scan.vertices, scan.faces)
        if against.any():
            faces = np.array(scan.faces, copy=True)
            faces[against] = faces[against][:, ::-1]
            scan = replace(scan, faces=faces)
    reverse = False
    if options["orient_faces"] and len(scan.faces):
        from ..data.face_winding import inside_out

        reverse = inside_out(scan.vertices, scan.faces)
        if reverse:
            scan = replace(scan, faces=np.ascontiguousarray(np.asarray(scan.faces)[:, ::-1]))
    winding = _winding_report(scan, against, reverse)
    # a model's base (its flat plate closes the scan's rim and turned the pose upside down; its walls moved the
    # pose's centre) is no scanned surface: left out, the rest is segmented, the base's own vertices are gingiva
    # (docs/results/model_base)
    base = None
    if options["model_base"] and len(scan.faces):
        from ..data.model_base import find_model_base

        base = find_model_base(scan.vertices, scan.faces)
    if base is None:
        pred = _segment_scan(model, scan, cfg, device, progress)
    else:
        kept = np.flatnonzero(~base.vertices)
        local = np.full(scan.num_vertices, -1, dtype=np.int64)
        local[kept] = np.arange(len(kept))
        rest = replace(scan, vertices=scan.vertices[kept], faces=local[scan.faces[~base.faces]],
                       labels=None if scan.labels is None else scan.labels[kept],
                       instances=None if scan.instances is None else scan.instances[kept])
        pred = _left_out(_segment_scan(model, rest, cfg, device, progress), scan, kept, base.vertices)
    pred.model_base = base
    pred.faces_reversed, pred.faces_rewound, pred.reversed_finding = winding
    return pred


def _winding_report(scan: Any, against: np.ndarray | None, reverse: bool) -> tuple[bool, int, bool]:
    """(the mesh as a whole, by area, was wound inside out; how many faces were wound against that whole; the
    ``reversed`` finding is due) given the faces wound back to their part's way (``against``; None: not looked for)
    and the whole mesh reversed after. A mesh wound half one way is no evidence of a mirror image: the finding asks
    that at least 3/4 of the area was inside out in the file (all of it where no face was wound back)."""
    if against is None or not against.any():
        return reverse, 0, reverse
    from ..data.mesh import face_areas

    changed = against ^ reverse  # segmented wound against the file
    area = face_areas(scan.vertices, np.asarray(scan.faces))
    share = float(area[changed].sum() / max(float(area.sum()), 1e-300))
    whole = share > 0.5
    return whole, int((changed != whole).sum()), share >= 0.75


def _segment_scan(model: nn.Module, scan: Any, cfg: dict[str, Any], device: torch.device,
                  progress: Callable[[str], None] | None = None) -> Prediction:
    """:func:`segment_scan` of the whole mesh as given."""
    d = cfg["data"]
    # a model that takes the jaw as an input is told "upper" until the teeth tell (its numbering under both
    # jaws' priors tells them apart all the same: docs/results/jaw_from_teeth), then asked again if lower
    takes_jaw = bool(input_features(d).get("jaw_feature")) and d["num_classes"] == 17
    shown = scan if scan.jaw is not None or not takes_jaw else replace(scan, jaw="upper")
    options, probs, aligned, normals = scan_probabilities(model, shown, cfg, device, progress)
    with timed("refine"):
        try:
            classes, numbering, call = refine_either_jaw(probs, aligned, scan.faces, normals, scan.jaw,
                                                         d["num_classes"], options, progress)
        except ValueError as exc:
            raise ValueError(f"{scan.path or scan.name}: {exc}") from None
    if call is not None and shown.jaw is not None and call.used != shown.jaw:
        options, probs, aligned, normals = scan_probabilities(model, replace(scan, jaw=call.used), cfg, device,
                                                              progress)
        with timed("refine"):
            classes, numbering = refine_numbered(probs, aligned, scan.faces, normals, call.used, d["num_classes"],
                                                 options, progress)
    jaw = call.used if call is not None else scan.jaw
    return refined_prediction(classes, numbering, call, probs, aligned, jaw, d["num_classes"])


def _left_out(pred: Prediction, scan: Any, kept: np.ndarray, left: np.ndarray) -> Prediction:
    """``pred`` of the vertices ``kept`` of ``scan`` over all of its vertices: the ``left`` out ones gingiva (their
    probability of it 1), in the same canonical frame; the numbering's pieces named by the scan's vertex ids."""
    n = scan.num_vertices

    def full(values: np.ndarray, fill: Any = 0) -> np.ndarray:
        out = np.full((n, *values.shape[1:]), fill, dtype=values.dtype)
        out[kept] = values
        return out

    probs = full(pred.probs, 0.0)
    probs[left, 0] = 1.0
    # the same rigid transform for the left-out vertices: fitted to the kept ones (exact to rounding)
    points = np.c_[scan.vertices[kept].astype(np.float64), np.ones(len(kept))]
    rigid = np.linalg.lstsq(points, pred.aligned.astype(np.float64), rcond=None)[0]
    aligned = full(pred.aligned)
    aligned[left] = np.c_[scan.vertices[left].astype(np.float64), np.ones(int(left.sum()))] @ rigid
    numbering = pred.numbering
    if numbering is not None:  # its per-vertex parts: the pieces' vertex ids, the dentition's other reading
        reading = numbering.dentition
        if reading is not None and reading.alternative is not None:
            reading = replace(reading, alternative=full(reading.alternative))
        numbering = replace(numbering, instances=[replace(inst, vertices=kept[inst.vertices])
                                                  for inst in numbering.instances], dentition=reading)
    return replace(pred, classes=full(pred.classes), fdi=full(pred.fdi), probs=probs, aligned=aligned,
                   numbering=numbering, instances=None if pred.instances is None else full(pred.instances))


def refined_prediction(classes: np.ndarray, numbering: Any, call: Any, probs: np.ndarray, aligned: np.ndarray,
                       jaw: str | None, num_classes: int) -> Prediction:
    """The :class:`Prediction` of refined ``classes`` and their ``numbering`` (None: none) for ``jaw``, with
    the jaw ``call`` (see :func:`refine_either_jaw`): FDI labels, and each numbered tooth's instance and
    posterior."""
    from ..data import class_to_fdi

    instances, instance_probs = None, None
    if numbering is not None:
        from .tooth_numbering import numbered_instances

        instances, instance_probs = numbered_instances(numbering, classes, num_classes, jaw)
    return Prediction(classes=classes, fdi=class_to_fdi(classes, jaw, num_classes), probs=probs, aligned=aligned,
                      numbering=numbering, instances=instances, instance_probs=instance_probs, jaw=jaw,
                      jaw_call=call)
