"""The 3DTeethSeg'22 challenge metrics for one jaw: TSA, TLA, TIR and their mean (the challenge score).

Written from the definitions in the challenge's public evaluation script
(github.com/abenhamadou/3DTeethSeg22_challenge, ``evaluation/evaluation.py``); this is our own code.
What is followed, per step, and where we deviate:

Followed from the official script
  * Teeth are *instances* (vertex instance id != 0); instance 0 is gingiva. Without instance arrays we
    derive one instance per distinct non-zero FDI label (``instances_from_labels``).
  * A predicted instance whose vertices carry more than one label is dropped: its vertices become
    gingiva (label 0, instance 0) for every metric, TSA included.
  * A ground-truth instance must carry exactly one label (the script asserts it; we raise ValueError).
  * Centroid = mean of the instance's vertices. Tooth size = per-axis vector
    ``sqrt(sum_v (x_v - centroid)**2)`` over the GT tooth's vertices (summed, NOT averaged: it grows
    with the square root of the vertex count, so the normalised distances depend on mesh resolution:
    evaluate on full-resolution vertices to reproduce challenge numbers).
  * Normalised distance between a GT tooth and a predicted instance = ``|| (c_gt - c_pred) / size ||``
    (element-wise division by the 3-vector size, then the Euclidean norm).
  * Matching: Hungarian assignment (``scipy.optimize.linear_sum_assignment``) on the plain Euclidean
    distances between GT and predicted centroids; at most min(#GT, #pred) pairs, extra predictions
    are not penalised in TLA/TIR (only through TSA).
  * TLA per jaw = ``exp(-mean over GT teeth of the normalised distance)``, unmatched GT teeth
    contributing a penalty.
  * TIR: a GT tooth counts as identified when its matched prediction has the same label AND a
    normalised distance strictly below 0.5.
  * TSA = ``sklearn.metrics.f1_score(gt_instances != 0, pred_instances != 0, average="micro")``. With
    ``average="micro"`` over the two classes {gingiva, tooth} this equals the binary vertex accuracy
    (micro precision = micro recall = correct / all), so that is what we compute. The F1/Dice of the
    tooth class alone is also returned as ``tooth_f1`` (it is not part of the score).
  * Score = ``(TSA + TLA + TIR) / 3``; over a data set the script averages each metric per jaw first
    (``aggregate_teeth_metrics``).

Deviations (default; ``strict_official=True`` restores the script's exact behaviour)
  * Unmatched-GT penalty: the script's docstring promises "a nominal penalty of 5 per GT tooth ... a
    distance 5 times the actual GT tooth size", i.e. a normalised distance of 5; its code adds
    ``5 * ||tooth_size||`` (a length in mesh units times sqrt(#vertices), which drives TLA to ~0 for one
    missed tooth). We use the documented 5 (``unmatched_penalty``).
  * TIR denominator: the docstring says "relatively to all GT teeth"; the code divides by the number of
    matched pairs, so a missed tooth does not lower TIR when there are fewer predicted than GT teeth. We
    divide by the number of GT teeth.
  * Degenerate cases the script does not handle: a jaw without GT teeth gives NaN for TLA/TIR/score
    (the script would crash); no predicted teeth gives every GT tooth the penalty; a zero tooth-size
    axis (flat or one-vertex tooth) yields a normalised component of 0 when the centroids agree on that
    axis and inf otherwise.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from ..data.teeth3ds import instances_from_labels as _instances_from_fdi

OFFICIAL_UNMATCHED_PENALTY = 5.0
OFFICIAL_TIR_THRESHOLD = 0.5


def _to_numpy(x: Any, name: str, dtype: type) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor, on any device
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if dtype is np.int64 and a.size and not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.mod(a, 1) == 0):
            raise TypeError(f"teeth_metrics: {name} must hold integer labels, got dtype {a.dtype}")
    return a.astype(dtype, copy=True)


def instances_from_labels(labels: Any) -> np.ndarray:
    """One instance per distinct tooth label: ids 1..K in ascending label order, 0 for gingiva (the data
    pipeline's rule, :func:`pointmamba.data.instances_from_labels`, on numpy or torch input)."""
    return _instances_from_fdi(_to_numpy(labels, "labels", np.int64).reshape(-1))


def _tooth_size(points: np.ndarray, centroid: np.ndarray) -> np.ndarray:
    """Official per-axis size: sqrt of the summed (not mean) squared deviations, shape (3,)."""
    return np.sqrt(np.sum((points - centroid) ** 2, axis=0))


def _normalised_distance(c_gt: np.ndarray, c_pred: np.ndarray, size: np.ndarray) -> float:
    diff = c_gt - c_pred
    q = np.divide(diff, size, out=np.where(diff == 0, 0.0, np.inf), where=size > 0)
    return float(np.linalg.norm(q))


def teeth_metrics(
    vertices: Any,
    gt_labels: Any,
    pred_labels: Any,
    gt_instances: Any | None = None,
    pred_instances: Any | None = None,
    *,
    threshold: float = OFFICIAL_TIR_THRESHOLD,
    unmatched_penalty: float = OFFICIAL_UNMATCHED_PENALTY,
    strict_official: bool = False,
) -> dict[str, Any]:
    """3DTeethSeg'22 metrics of one jaw (see the module docstring for the exact definitions).

    Args:
        vertices: (V, 3) vertex coordinates (numpy or torch).
        gt_labels, pred_labels: (V,) FDI labels, 0 = gingiva.
        gt_instances, pred_instances: (V,) instance ids, 0 = gingiva; derived from the labels when None.
        threshold: normalised-distance threshold for TIR (official 0.5, strict ``<``).
        unmatched_penalty: normalised distance charged to an unmatched GT tooth in TLA.
        strict_official: reproduce the official code's quirks (penalty ``5 * ||tooth_size||``, TIR over
            matched pairs) instead of its documented definitions.

    Returns a dict: ``TSA``, ``TLA``, ``TIR``, ``score`` (floats), ``tooth_f1``, ``tla_distance`` (mean
    normalised distance before ``exp(-.)``), counts ``num_gt_teeth``, ``num_pred_teeth``, ``num_matched``,
    ``num_identified``, ``num_dropped_pred_instances``, and ``per_tooth``: one dict per GT tooth with
    ``gt_instance``, ``gt_label``, ``pred_instance``, ``pred_label`` (None when unmatched),
    ``distance`` (normalised; None when unmatched) and ``identified``.
    """
    verts = _to_numpy(vertices, "vertices", np.float64)
    if verts.ndim != 2 or verts.shape[1] != 3:
        raise ValueError(f"teeth_metrics: vertices must have shape (V, 3), got {verts.shape}")
    if not np.all(np.isfinite(verts)):
        raise ValueError("teeth_metrics: vertices contain NaN or inf")
    V = verts.shape[0]
    arrays = {"gt_labels": gt_labels, "pred_labels": pred_labels, "gt_instances": gt_instances,
              "pred_instances": pred_instances}
    out: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        if a is None:
            continue
        arr = _to_numpy(a, name, np.int64)
        if arr.shape != (V,):
            raise ValueError(f"teeth_metrics: {name} must have shape ({V},) like vertices, got {arr.shape}")
        out[name] = arr
    gt_lab, pred_lab = out["gt_labels"], out["pred_labels"]
    gt_inst = out["gt_instances"] if gt_instances is not None else instances_from_labels(gt_lab)
    pred_inst = out["pred_instances"] if pred_instances is not None else instances_from_labels(pred_lab)

    # Predicted instances: keep those with a single label, send the others to gingiva (official rule).
    pred_ids, pred_labs, pred_cents = [], [], []
    dropped = 0
    for k in np.unique(pred_inst[pred_inst != 0]):
        m = pred_inst == k
        labs = np.unique(pred_lab[m])
        if len(labs) == 1:
            pred_ids.append(int(k))
            pred_labs.append(int(labs[0]))
            pred_cents.append(verts[m].mean(axis=0))
        else:
            pred_lab[m] = 0
            pred_inst[m] = 0
            dropped += 1

    gt_ids, gt_labs, gt_cents, gt_sizes = [], [], [], []
    for k in np.unique(gt_inst[gt_inst != 0]):
        m = gt_inst == k
        labs = np.unique(gt_lab[m])
        if len(labs) != 1:
            raise ValueError(
                f"teeth_metrics: ground-truth instance {int(k)} carries {len(labs)} labels "
                f"{labs[:6].tolist()}; each GT instance must have exactly one label"
            )
        c = verts[m].mean(axis=0)
        gt_ids.append(int(k))
        gt_labs.append(int(labs[0]))
        gt_cents.append(c)
        gt_sizes.append(_tooth_size(verts[m], c))

    n_gt, n_pred = len(gt_ids), len(pred_ids)
    match: dict[int, int] = {}  # GT index -> prediction index
    if n_gt and n_pred:
        rows, cols = linear_sum_assignment(cdist(np.stack(gt_cents), np.stack(pred_cents)))
        match = {int(i): int(j) for i, j in zip(rows, cols)}

    per_tooth: list[dict[str, Any]] = []
    penalties = []
    identified = 0
    for i in range(n_gt):
        rec: dict[str, Any] = {"gt_instance": gt_ids[i], "gt_label": gt_labs[i], "pred_instance": None,
                               "pred_label": None, "distance": None, "identified": False}
        if i in match:
            j = match[i]
            d = _normalised_distance(gt_cents[i], pred_cents[j], gt_sizes[i])
            ok = d < threshold and gt_labs[i] == pred_labs[j]
            identified += int(ok)
            rec.update(pred_instance=pred_ids[j], pred_label=pred_labs[j], distance=d, identified=ok)
            penalties.append(d)
        else:
            penalties.append(
                OFFICIAL_UNMATCHED_PENALTY * float(np.linalg.norm(gt_sizes[i])) if strict_official
                else float(unmatched_penalty)
            )
        per_tooth.append(rec)

    nan = float("nan")
    tla_distance = float(np.mean(penalties)) if n_gt else nan
    tla = float(np.exp(-tla_distance)) if n_gt else nan
    if strict_official:
        tir = identified / len(match) if match else (0.0 if n_gt else nan)
    else:
        tir = identified / n_gt if n_gt else nan

    g, p = gt_inst != 0, pred_inst != 0
    tsa = float(np.mean(g == p)) if V else nan  # == micro-averaged F1 over {gingiva, tooth}
    tp, fp, fn = int(np.sum(g & p)), int(np.sum(~g & p)), int(np.sum(g & ~p))
    tooth_f1 = 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else nan

    return {
        "TSA": tsa,
        "TLA": tla,
        "TIR": float(tir),
        "score": (tsa + tla + float(tir)) / 3.0,
        "tooth_f1": float(tooth_f1),
        "tla_distance": tla_distance,
        "num_gt_teeth": n_gt,
        "num_pred_teeth": n_pred,
        "num_matched": len(match),
        "num_identified": identified,
        "num_dropped_pred_instances": dropped,
        "per_tooth": per_tooth,
    }


def aggregate_teeth_metrics(results: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Data-set metrics as the official script reports them: mean over jaws of TSA, TLA (already
    ``exp(-.)`` per jaw) and TIR, and ``score = (mean TSA + mean TLA + mean TIR) / 3``.
    Jaws with NaN metrics (no GT teeth) are left out of that metric's mean."""
    rows = list(results)
    if not rows:
        raise ValueError("aggregate_teeth_metrics: no per-jaw results given")
    agg: dict[str, float] = {"num_jaws": float(len(rows))}
    for key in ("TSA", "TLA", "TIR", "tooth_f1"):
        vals = np.array([float(r[key]) for r in rows], dtype=np.float64)
        vals = vals[~np.isnan(vals)]
        agg[key] = float(vals.mean()) if vals.size else float("nan")
    agg["score"] = (agg["TSA"] + agg["TLA"] + agg["TIR"]) / 3.0
    return agg
