"""``data.augment`` through the path a user takes: config -> dataset -> items; and the jaw input channel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import ConfigError, load_config, resolve_augment
from pointmamba.data import mirror_class
from pointmamba.training.data_builders import build_dataset

from support.tiny import tiny_overrides, write_synthetic


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("aug") / "synth")


def _train_set(synth: Path, tmp_path: Path, *extra: str):
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "w") + ["data.grid_size=0", "data.max_points=null",
                                                                     *extra])
    return build_dataset(cfg, "train", train=True)


def test_default_config_augments_and_epochs_differ(synth: Path, tmp_path: Path) -> None:
    ds = _train_set(synth, tmp_path)
    assert ds.augment is not None
    ds.set_epoch(0)
    a = ds[0]["coord"]
    ds.set_epoch(1)
    b = ds[0]["coord"]
    assert a.shape == b.shape and not np.allclose(a, b, atol=1e-3)


def test_augment_false_is_off_and_reproducible(synth: Path, tmp_path: Path) -> None:
    ds = _train_set(synth, tmp_path, "data.augment=false")
    assert ds.augment is None
    ds.set_epoch(0)
    a = ds[0]["coord"]
    ds.set_epoch(1)
    np.testing.assert_array_equal(a, ds[0]["coord"])


def test_mirror_only_swaps_labels_and_negates_x(synth: Path, tmp_path: Path) -> None:
    plain = _train_set(synth, tmp_path, "data.augment=false")[0]
    mirrored = _train_set(synth, tmp_path, "data.augment={mirror: 1.0, rotate: null, scale: null, jitter: 0.0}")[0]
    np.testing.assert_allclose(mirrored["coord"][:, 0], -plain["coord"][:, 0], atol=1e-5)
    np.testing.assert_allclose(mirrored["coord"][:, 1:], plain["coord"][:, 1:], atol=1e-5)
    np.testing.assert_array_equal(mirrored["segment"], mirror_class(plain["segment"], 17))
    assert (plain["segment"] != mirrored["segment"]).any()  # the synthetic jaw has teeth on both sides


def test_partial_mapping_keeps_other_defaults() -> None:
    out = resolve_augment({"mirror": 0.0})
    assert out["mirror"] == 0.0 and out["rotate"] == "z" and out["scale"] == [0.9, 1.1]
    assert resolve_augment(True)["mirror"] == 0.5 and resolve_augment(False) is None


@pytest.mark.parametrize("value, words", [
    ("{mirrror: 0.5}", "mirrror"),
    ("{mirror: 2.0}", "mirror"),
    ("{rotate: sideways}", "rotate"),
    ("{scale: [1.2, 0.9]}", "scale"),
    ("maybe", "data.augment"),
])
def test_bad_augment_values_name_the_key(value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(None, [f"data.augment={value}"])


def test_jaw_feature_channel_and_config_check(synth: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="in_channels must be 7"):
        load_config(None, ["data.jaw_feature=true"])
    ds = _train_set(synth, tmp_path, "data.jaw_feature=true", "model.in_channels=7")
    for i in range(len(ds)):
        item = ds[i]
        assert item["feat"].shape[1] == 7
        np.testing.assert_array_equal(item["feat"][:, 6], 1.0 if item["jaw"] == "upper" else -1.0)


def test_coord_feature_off_leaves_normals_and_jaw_and_the_model_runs(synth: Path, tmp_path: Path) -> None:
    """``data.coord_feature=false``: the features lose the 3 coordinate channels (normals, then the jaw),
    ``coord`` keeps the points, the config demands 4 input channels, and the network takes the items."""
    import torch

    from pointmamba import build_model
    from pointmamba.data.dataset import collate

    with pytest.raises(ConfigError, match="in_channels must be 4 with data.coord_feature=false"):
        load_config(None, ["data.coord_feature=false", "data.jaw_feature=true"])
    on = _train_set(synth, tmp_path, "data.jaw_feature=true", "model.in_channels=7", "data.augment=false")
    off = _train_set(synth, tmp_path, "data.jaw_feature=true", "model.in_channels=4", "data.augment=false",
                     "data.coord_feature=false")
    a, b = on[0], off[0]
    assert b["feat"].shape[1] == 4
    np.testing.assert_array_equal(a["coord"], b["coord"])
    np.testing.assert_array_equal(a["feat"][:, 3:], b["feat"])
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "m") + ["data.coord_feature=false",
                                                                      "data.jaw_feature=true", "model.in_channels=4"])
    ds = build_dataset(cfg, "train", train=True)
    torch.manual_seed(0)
    logits = build_model(cfg).eval()(collate([ds[0], ds[1]]))
    assert logits.shape == (len(ds[0]["coord"]) + len(ds[1]["coord"]), cfg["model"]["num_classes"])
    assert torch.isfinite(logits).all()


def test_loader_workers_see_each_epochs_augmentation(synth: Path, tmp_path: Path) -> None:
    """With ``data.num_workers`` > 0 (the GPU runs) every epoch's batches are those of the in-process loader:
    workers pick up ``set_epoch``, so augmentation changes per epoch and runs stay reproducible."""
    import torch

    from pointmamba.training.data_builders import build_loader
    from pointmamba.training.distributed import DistInfo

    def coords(workers: int) -> list[torch.Tensor]:
        cfg = load_config(None, tiny_overrides(synth, tmp_path / "w") + [f"data.num_workers={workers}"])
        ds = build_dataset(cfg, "train", train=True)
        loader = build_loader(ds, cfg, train=True, dist=DistInfo())
        out = []
        for epoch in (0, 1):
            loader.sampler.set_epoch(epoch)
            ds.set_epoch(epoch)
            out.append(next(iter(loader)).coord)
        return out

    inline, workers = coords(0), coords(1)
    assert not torch.equal(inline[0], inline[1])
    for a, b in zip(inline, workers):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
