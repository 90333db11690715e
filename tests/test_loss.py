"""The training loss: plain cross-entropy when unweighted, the weighted mean against a float64 reference,
class-balanced weights, and the trainer path with both."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pointmamba.training.loss import balanced_class_weights, segmentation_loss


def test_unweighted_is_cross_entropy_bit_for_bit() -> None:
    g = torch.Generator().manual_seed(0)
    logits, target = torch.randn(50, 5, generator=g), torch.randint(0, 5, (50,), generator=g)
    target[::7] = -100
    assert torch.equal(segmentation_loss(logits, target, 0.1), F.cross_entropy(logits, target, ignore_index=-100,
                                                                                label_smoothing=0.1))


def test_weighted_mean_matches_float64_reference() -> None:
    g = torch.Generator().manual_seed(1)
    logits, target = torch.randn(40, 4, generator=g), torch.randint(0, 4, (40,), generator=g)
    target[:5] = -100
    cw = torch.tensor([1.0, 2.0, 0.5, 3.0])
    pw = torch.rand(40, generator=g) + 0.1
    got = segmentation_loss(logits, target, 0.0, cw, pw)
    lg = logits.double().log_softmax(1).numpy()
    t = target.numpy()
    keep = t >= 0
    ce = -lg[keep, t[keep]]
    w = cw.double().numpy()[t[keep]] * pw.double().numpy()[keep]
    assert got.item() == pytest.approx(float((ce * w).sum() / w.sum()), rel=1e-6)
    # a point weight of zero removes a scan from the loss
    only_first = pw.clone()
    only_first[20:] = 0
    sub = segmentation_loss(logits[:20], target[:20], 0.0, cw, pw[:20])
    assert segmentation_loss(logits, target, 0.0, cw, only_first).item() == pytest.approx(sub.item(), rel=1e-6)


def test_balanced_weights() -> None:
    counts = np.array([1000, 100, 100, 100, 25, 0])
    w = balanced_class_weights(counts, 0.5)
    assert w[0] == 1.0 and w[5] == 1.0  # gingiva and absent classes are not reweighted
    np.testing.assert_allclose(w[1:4], 1.0)
    assert w[4] == pytest.approx(2.0)  # 4x rarer than the median tooth: sqrt(4)
    assert balanced_class_weights(np.array([10, 1, 100, 10_000]), 1.0)[1:].tolist() == [4.0, 1.0, 0.25]  # clipped
    np.testing.assert_array_equal(balanced_class_weights(counts, 0.0), 1.0)


def test_trainer_uses_the_weights(tmp_path: Path) -> None:
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer
    from tests.support.tiny import tiny_overrides, write_synthetic

    root = write_synthetic(tmp_path / "syn")
    cfg = load_config(None, tiny_overrides(root, tmp_path / "run", epochs=1) + [
        "model.in_channels=6", "train.class_balance=0.5", f"data.position_label_roots=[{root}]",
        "data.position_label_weight=0.5", "train.val_interval=0"])
    trainer = Trainer(cfg)
    try:
        assert trainer.class_weight is not None and trainer.class_weight.shape == (17,)
        assert trainer.weighted_scans
        record = trainer.train()
        assert np.isfinite(record["train_loss"])
    finally:
        trainer.close()
    log = (tmp_path / "run" / "train.log").read_text()
    assert "class weights (train.class_balance=0.5)" in log and "labelled by position" in log
