"""Segmentation metrics, the 3DTeethSeg'22 challenge metrics and the confusion-matrix plot."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from pointmamba.evaluation.confusion_plot import plot_confusion
from pointmamba.evaluation.metrics import ConfusionMatrix
from pointmamba.evaluation.teeth_metrics import aggregate_teeth_metrics, instances_from_labels, teeth_metrics

# ------------------------------------------------------------------ ConfusionMatrix

# 3-class example with one ignored point. By hand (rows = target, cols = prediction):
#   t=0: preds 0,1,0   -> [2, 1, 0]
#   t=1: preds 1,2     -> [0, 1, 1]
#   t=2: preds 2,2,0,2 -> [1, 0, 3]
TARGET = [0, 0, 0, 1, 1, 2, 2, 2, 2, -100]
PRED = [0, 1, 0, 1, 2, 2, 2, 0, 2, 1]
HAND_MATRIX = [[2, 1, 0], [0, 1, 1], [1, 0, 3]]
# tp/fp/fn: c0 2/1/1, c1 1/1/1, c2 3/1/1
HAND_IOU = [2 / 4, 1 / 3, 3 / 5]
HAND_DICE = [4 / 6, 2 / 4, 6 / 8]


def test_confusion_matrix_hand_computed_three_classes():
    cm = ConfusionMatrix(3).update(torch.tensor(PRED), torch.tensor(TARGET))
    assert cm.matrix.dtype == torch.int64
    assert cm.matrix.tolist() == HAND_MATRIX
    assert cm.total == 9  # the ignore_index point is not counted
    assert cm.accuracy() == pytest.approx(6 / 9)
    np.testing.assert_allclose(cm.iou(), HAND_IOU, rtol=0, atol=1e-15)
    np.testing.assert_allclose(cm.dice(), HAND_DICE, rtol=0, atol=1e-15)
    assert cm.miou() == pytest.approx(sum(HAND_IOU) / 3)
    assert cm.mean_dice() == pytest.approx(sum(HAND_DICE) / 3)


def test_confusion_matrix_numpy_input_and_batches_match_one_update():
    one = ConfusionMatrix(3).update(np.array(PRED), np.array(TARGET))
    a, b = ConfusionMatrix(3), ConfusionMatrix(3)
    a.update(np.array(PRED[:4]), np.array(TARGET[:4]))
    b.update(torch.tensor(PRED[4:]).reshape(2, 3), torch.tensor(TARGET[4:]).reshape(2, 3))
    assert torch.equal(a.merge(b).matrix, one.matrix)


def test_confusion_matrix_ignore_index_custom_value_ignores_whatever_prediction():
    cm = ConfusionMatrix(2, ignore_index=255)
    # the ignored points carry out-of-range predictions: they must neither count nor raise
    cm.update(torch.tensor([0, 1, 7, 9]), torch.tensor([0, 1, 255, 255]))
    assert cm.matrix.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match="target has labels outside"):
        ConfusionMatrix(2).update(torch.tensor([0, 1]), torch.tensor([0, 255]))  # default ignore is -100


def test_confusion_matrix_absent_classes_are_nan_and_excluded_from_means():
    cm = ConfusionMatrix(4).update(torch.tensor([0, 1, 0]), torch.tensor([0, 0, 0]))
    iou = cm.iou()
    # class 0: tp 2, fn 1 -> 2/3; class 1 only predicted -> IoU 0 counts; classes 2, 3 absent -> NaN
    assert iou[0] == pytest.approx(2 / 3) and iou[1] == 0.0
    assert np.isnan(iou[2]) and np.isnan(iou[3])
    assert cm.miou() == pytest.approx((2 / 3 + 0.0) / 2)
    assert cm.mean_dice() == pytest.approx((4 / 5 + 0.0) / 2)
    empty = ConfusionMatrix(3)
    assert math.isnan(empty.accuracy()) and math.isnan(empty.miou()) and math.isnan(empty.mean_dice())


def test_confusion_matrix_perfect_prediction_scores_one():
    t = torch.randint(0, 5, (1000,), generator=torch.Generator().manual_seed(0))
    cm = ConfusionMatrix(6).update(t, t)  # class 5 never occurs: excluded, not NaN-poisoning
    assert cm.accuracy() == 1.0 and cm.miou() == 1.0 and cm.mean_dice() == 1.0


def test_confusion_matrix_bad_input_errors():
    cm = ConfusionMatrix(3)
    with pytest.raises(ValueError, match="pred has labels outside"):
        cm.update(torch.tensor([0, 3]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="elements"):
        cm.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        cm.update(torch.tensor([0.0, 1.0]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="num_classes differ"):
        cm.merge(ConfusionMatrix(4))


def test_confusion_matrix_state_dict_round_trip_and_reset():
    cm = ConfusionMatrix(3).update(torch.tensor(PRED), torch.tensor(TARGET))
    state = cm.state_dict()
    fresh = ConfusionMatrix(3)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.matrix, cm.matrix) and fresh.miou() == cm.miou()
    state["matrix"][0, 0] += 100  # the state is a copy, not a view
    assert cm.matrix[0, 0] == 2
    with pytest.raises(ValueError, match="num_classes"):
        ConfusionMatrix(4).load_state_dict(cm.state_dict())
    cm.reset()
    assert cm.total == 0


def _all_reduce_worker(rank: int, world: int, init_file: str, results: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        cm = ConfusionMatrix(3)
        half = slice(0, 4) if rank == 0 else slice(4, None)
        cm.update(torch.tensor(PRED[half]), torch.tensor(TARGET[half]))
        cm.all_reduce()
        torch.save(cm.matrix, os.path.join(results, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_confusion_matrix_all_reduce_without_process_group_is_a_no_op():
    assert not dist.is_initialized()
    local = ConfusionMatrix(3).update(torch.tensor(PRED[:4]), torch.tensor(TARGET[:4]))
    before = local.matrix.clone()
    assert torch.equal(local.all_reduce().matrix, before)


@pytest.mark.slow  # spawns two interpreters that each import torch: 5-10 s on the 2-core machines
def test_confusion_matrix_all_reduce_sums_over_two_gloo_ranks(tmp_path):
    mp.spawn(_all_reduce_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        assert torch.load(tmp_path / f"rank{rank}.pt", weights_only=True).tolist() == HAND_MATRIX


# ------------------------------------------------------------------ 3DTeethSeg'22 metrics

TOOTH_LABELS = [11, 12, 13, 21, 22, 23]


def synthetic_jaw(seed: int = 0, per_tooth: int = 200, gingiva: int = 800):
    """Six 'teeth' as Gaussian clusters on an arch of radius 20 plus a wider, lower 'gingiva' band."""
    rng = np.random.default_rng(seed)
    angles = np.linspace(0.25 * np.pi, 0.75 * np.pi, len(TOOTH_LABELS))
    centres = np.stack([20 * np.cos(angles), 20 * np.sin(angles), np.zeros_like(angles)], axis=1)
    verts, labels = [], []
    for lab, c in zip(TOOTH_LABELS, centres):
        verts.append(c + rng.normal(scale=1.5, size=(per_tooth, 3)))
        labels.append(np.full(per_tooth, lab))
    a = rng.uniform(0.1 * np.pi, 0.9 * np.pi, gingiva)
    r = rng.uniform(14, 26, gingiva)
    verts.append(np.stack([r * np.cos(a), r * np.sin(a), rng.uniform(-8, -4, gingiva)], axis=1))
    labels.append(np.zeros(gingiva, dtype=np.int64))
    return np.concatenate(verts), np.concatenate(labels).astype(np.int64)


def test_teeth_metrics_perfect_prediction_is_one():
    v, lab = synthetic_jaw()
    r = teeth_metrics(v, lab, lab.copy())
    assert r["TSA"] == 1.0 and r["TLA"] == 1.0 and r["TIR"] == 1.0 and r["score"] == 1.0
    assert r["tooth_f1"] == 1.0 and r["num_gt_teeth"] == 6 == r["num_identified"]
    # torch inputs and explicit instance arrays give the same answer
    rt = teeth_metrics(torch.from_numpy(v), torch.from_numpy(lab), torch.from_numpy(lab),
                       gt_instances=instances_from_labels(lab) * 7)
    assert rt["score"] == 1.0


def test_teeth_metrics_swapped_labels_lower_tir_only():
    v, lab = synthetic_jaw()
    pred = lab.copy()
    pred[lab == 11], pred[lab == 12] = 12, 11  # same geometry, identities swapped
    r = teeth_metrics(v, lab, pred)
    assert r["TSA"] == 1.0 and r["TLA"] == 1.0
    assert r["TIR"] == pytest.approx(4 / 6)
    assert r["score"] == pytest.approx((1 + 1 + 4 / 6) / 3)


def test_teeth_metrics_far_shifted_tooth_lowers_tla():
    v, lab = synthetic_jaw()
    pred = lab.copy()
    c13 = v[lab == 13].mean(axis=0)
    pred[lab == 13] = 0
    ging = np.flatnonzero(lab == 0)
    far = ging[np.argsort(-np.linalg.norm(v[ging] - c13, axis=1))[:200]]  # gingiva far from tooth 13
    pred[far] = 13
    r = teeth_metrics(v, lab, pred)
    moved = next(t for t in r["per_tooth"] if t["gt_label"] == 13)
    # the official size sums (not averages) squared deviations, so with 200 vertices per tooth a ~20 mm
    # shift is a normalised distance of only ~0.7: TLA drops, but far less than the raw shift suggests
    assert moved["pred_label"] == 13 and moved["distance"] > 0.5 and not moved["identified"]
    assert r["TLA"] == pytest.approx(math.exp(-moved["distance"] / 6)) and r["TLA"] < 0.9
    assert r["TIR"] == pytest.approx(5 / 6)  # still labelled 13 but too far away
    assert r["TSA"] < 1.0


def test_teeth_metrics_missed_tooth_lowers_tsa_and_tir():
    v, lab = synthetic_jaw()
    pred = lab.copy()
    pred[lab == 22] = 0
    r = teeth_metrics(v, lab, pred)
    n_teeth = np.count_nonzero(lab)
    assert r["TSA"] == pytest.approx(1 - 200 / len(lab))
    assert r["tooth_f1"] == pytest.approx(2 * (n_teeth - 200) / (2 * (n_teeth - 200) + 200))
    assert r["TIR"] == pytest.approx(5 / 6)
    assert r["TLA"] == pytest.approx(math.exp(-5 / 6))  # penalty 5 for the missed tooth, 0 for the others
    assert r["num_matched"] == 5
    # the official code divides TIR by matched pairs: a missed tooth leaves it at 1
    assert teeth_metrics(v, lab, pred, strict_official=True)["TIR"] == 1.0


def two_tooth_example():
    """Tooth 11: the 6 points (+-1,0,0),(0,+-1,0),(0,0,+-1) around the origin; tooth 21: the same
    around (10,0,0); gingiva: 3 points. Official size per axis = sqrt(1 + 1) = sqrt(2)."""
    star = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float)
    ging = np.array([[7.0, 0, 0], [5, 5, 0], [5, -5, 0]])
    v = np.concatenate([star, star + [10, 0, 0], ging])
    lab = np.array([11] * 6 + [21] * 6 + [0] * 3)
    return v, lab


def test_teeth_metrics_hand_computed_tla_two_teeth():
    v, lab = two_tooth_example()
    pred = lab.copy()
    pred[12] = 11  # gingiva point (7,0,0) joins tooth 11: predicted centroid (7/7, 0, 0) = (1, 0, 0)
    r = teeth_metrics(v, lab, pred)
    d11 = math.sqrt((1 / math.sqrt(2)) ** 2)  # ||(1,0,0) / (sqrt2, sqrt2, sqrt2)|| = 1/sqrt(2)
    assert r["per_tooth"][0]["distance"] == pytest.approx(d11)
    assert r["per_tooth"][1]["distance"] == 0.0
    assert r["tla_distance"] == pytest.approx(d11 / 2)
    assert r["TLA"] == pytest.approx(math.exp(-1 / (2 * math.sqrt(2))))
    assert r["TIR"] == 0.5  # 0.707 >= 0.5: tooth 11 is not identified
    assert r["TSA"] == pytest.approx(14 / 15)
    assert r["tooth_f1"] == pytest.approx(2 * 12 / (2 * 12 + 1))

    missed = lab.copy()
    missed[:6] = 0
    assert teeth_metrics(v, lab, missed)["TLA"] == pytest.approx(math.exp(-(5 + 0) / 2))
    # official code: penalty 5 * ||size|| = 5 * sqrt(6)
    strict = teeth_metrics(v, lab, missed, strict_official=True)
    assert strict["TLA"] == pytest.approx(math.exp(-(5 * math.sqrt(6)) / 2))


def test_teeth_metrics_official_instance_rules():
    v, lab = two_tooth_example()
    # a predicted instance spanning two labels is sent to gingiva (for TSA too)
    pred_inst = np.array([1] * 12 + [0] * 3)
    r = teeth_metrics(v, lab, lab.copy(), pred_instances=pred_inst)
    assert r["num_dropped_pred_instances"] == 1 and r["num_pred_teeth"] == 0
    assert r["TSA"] == pytest.approx(3 / 15) and r["TIR"] == 0.0
    assert r["TLA"] == pytest.approx(math.exp(-5))
    bad_gt_inst = pred_inst
    with pytest.raises(ValueError, match="ground-truth instance 1 carries 2 labels"):
        teeth_metrics(v, lab, lab, gt_instances=bad_gt_inst)
    with pytest.raises(ValueError, match="pred_labels must have shape"):
        teeth_metrics(v, lab, lab[:-1])
    no_teeth = teeth_metrics(v, np.zeros_like(lab), np.zeros_like(lab))
    assert no_teeth["TSA"] == 1.0 and math.isnan(no_teeth["TLA"]) and math.isnan(no_teeth["score"])


def test_instances_from_labels_and_aggregate():
    assert instances_from_labels([0, 21, 11, 21, 0, 48]).tolist() == [0, 2, 1, 2, 0, 3]
    agg = aggregate_teeth_metrics([
        {"TSA": 1.0, "TLA": 0.5, "TIR": 1.0, "tooth_f1": 1.0},
        {"TSA": 0.8, "TLA": 1.0, "TIR": 0.5, "tooth_f1": 0.9},
    ])
    assert agg["TSA"] == pytest.approx(0.9) and agg["TLA"] == 0.75 and agg["TIR"] == 0.75
    assert agg["score"] == pytest.approx((0.9 + 0.75 + 0.75) / 3)


def test_teeth_metrics_on_real_teeth3ds_labels(teeth3ds_labels_dir):
    # The label files carry no vertices: random vertices are used only to exercise the instance handling
    # (one instance per tooth, centroids, matching) on real label/instance arrays.
    files = sorted(p for p in teeth3ds_labels_dir.glob("*.json") if not p.name.endswith("__kpt.json"))
    if not files:
        pytest.skip(f"no Teeth3DS label files in {teeth3ds_labels_dir}")
    data = json.loads(files[0].read_text())
    lab = np.asarray(data["labels"], dtype=np.int64)
    inst = np.asarray(data["instances"], dtype=np.int64)
    v = np.random.default_rng(0).uniform(-40, 40, size=(len(lab), 3))
    r = teeth_metrics(v, lab, lab, gt_instances=inst, pred_instances=inst)
    n = len(np.unique(lab[lab != 0]))
    assert r["num_gt_teeth"] == n and r["num_identified"] == n
    assert r["TSA"] == 1.0 and r["TLA"] == 1.0 and r["TIR"] == 1.0 and r["score"] == 1.0
    # instances derived from labels match the file's own instances here
    assert teeth_metrics(v, lab, lab)["score"] == 1.0
    teeth = np.unique(lab[lab != 0])
    pred = lab.copy()
    pred[lab == teeth[0]], pred[lab == teeth[1]] = teeth[1], teeth[0]
    swapped = teeth_metrics(v, lab, pred, gt_instances=inst)
    assert swapped["TSA"] == 1.0 and swapped["TLA"] == 1.0
    assert swapped["TIR"] == pytest.approx((n - 2) / n)


# ------------------------------------------------------------------ confusion plot


def test_plot_confusion_writes_png(tmp_path):
    cm = ConfusionMatrix(3).update(torch.tensor(PRED), torch.tensor(TARGET))
    out = plot_confusion(cm.matrix, ["gingiva", "11", "21"], tmp_path / "plots" / "cm.png")
    data = out.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    raw = plot_confusion(np.zeros((33, 33)), [str(i) for i in range(33)], tmp_path / "raw.png", normalize=False)
    assert raw.stat().st_size > 1000
    with pytest.raises(ValueError, match="class names"):
        plot_confusion(cm, ["a", "b"], tmp_path / "x.png")
