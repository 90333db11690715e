"""Missing-tooth augmentation on a real arch: which teeth go, where flattened crowns end up, determinism,
config checks, and that runs without it keep their random stream."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import ConfigError, load_config
from pointmamba.data import Teeth3DSDataset, load_scan
from pointmamba.data.dataset import make_item, preprocess_scan
from pointmamba.data.missing_teeth import MissingTeeth, arch_is_complete

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


@pytest.fixture(scope="module")
def arch() -> dict[str, np.ndarray]:
    return preprocess_scan(load_scan(SAMPLES / "MSN022" / "MSN022_upper.obj"))


def _canonical(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from pointmamba.data.mesh import apply_transform

    t = arrays["transform"]
    coord = apply_transform(arrays["vertices"].astype(np.float64) + arrays["origin"], t)
    normal = apply_transform(arrays["normals"].astype(np.float64), t, direction=True)
    return coord - coord.mean(0), normal, arrays["labels"].astype(np.int64)


def test_flattened_teeth_become_gingiva_at_gum_height(arch: dict[str, np.ndarray]) -> None:
    coord, normal, labels = _canonical(arch)
    aug = MissingTeeth({"p": 1.0, "max_teeth": 3, "flatten": 1.0, "ridge_drop_mm": 0.5})
    out_c, out_n, out_l = aug(coord, normal, labels, np.random.default_rng(3))
    removed = sorted(set(np.unique(labels)) - set(np.unique(out_l)))
    assert 1 <= len(removed) <= 3 and len(out_c) == len(coord)  # flattened: no point dropped
    for t in removed:
        crown = labels == t
        gum_near = (labels == 0) & (np.linalg.norm(coord[:, None, :2] - coord[crown][None, ::7, :2], axis=2).min(1) < 2.0)
        # the crown stood above its gum line; now it lies between the gum line's lowest and highest point
        assert coord[crown, 2].mean() > np.median(coord[gum_near, 2]) + 1.0
        assert np.percentile(coord[gum_near, 2], 1) - 0.6 <= out_c[crown, 2].mean() <= coord[gum_near, 2].max()
        np.testing.assert_allclose(np.linalg.norm(out_n[crown], axis=1), 1.0, atol=1e-6)
        assert (out_n[crown, 2] > 0).all()  # a ridge faces up
    untouched = ~np.isin(labels, removed)
    np.testing.assert_array_equal(out_c[untouched], coord[untouched])
    np.testing.assert_array_equal(out_l[untouched], labels[untouched])


def test_deleted_teeth_lose_their_points(arch: dict[str, np.ndarray]) -> None:
    coord, normal, labels = _canonical(arch)
    out_c, _, out_l = MissingTeeth({"p": 1.0, "max_teeth": 2, "flatten": 0.0})(coord, normal, labels,
                                                                            np.random.default_rng(0))
    removed = sorted(set(np.unique(labels)) - set(np.unique(out_l)))
    assert 1 <= len(removed) <= 2
    assert len(out_c) == int((~np.isin(labels, removed)).sum())
    assert (np.bincount(out_l, minlength=49)[:49] == np.bincount(labels[~np.isin(labels, removed)], minlength=49)[:49]).all()


def test_closed_spaces_lose_their_width_and_keep_every_other_tooth(arch: dict[str, np.ndarray]) -> None:
    from scipy.spatial import cKDTree

    from pointmamba.data.missing_teeth import close_space

    coord, normal, labels = _canonical(arch)

    def gap(c: np.ndarray, lab: np.ndarray, a: int, b: int) -> float:
        return float(cKDTree(c[lab == a]).query(c[lab == b])[0].min())

    for tooth, front, back in ((14, 13, 15), (24, 23, 25), (16, 15, 17), (11, 21, 12)):
        width = gap(coord, labels, front, back)
        half_c, _, half_k = close_space(coord, normal, labels, tooth, 0.5)
        full_c, full_n, full_k = close_space(coord, normal, labels, tooth, 1.0)
        half, full = gap(half_c[half_k], labels[half_k], front, back), gap(full_c[full_k], labels[full_k], front, back)
        assert full < 0.35 * width and 0.35 * width < half < 0.75 * width, (tooth, width, half, full)
        others = (labels > 0) & (labels != tooth)
        assert full_k[others].all() and not full_k[labels == tooth].all()
        np.testing.assert_allclose(np.linalg.norm(full_n, axis=1), np.linalg.norm(normal, axis=1), atol=1e-9)


def test_edentulous_keeps_at_most_three_teeth_and_p0_changes_nothing(arch: dict[str, np.ndarray]) -> None:
    coord, normal, labels = _canonical(arch)
    for seed in range(6):
        _, _, out_l = MissingTeeth({"edentulous": 1.0})(coord, normal, labels, np.random.default_rng(seed))
        assert len(set(np.unique(out_l)) - {0}) <= 3
    same = MissingTeeth({"p": 0.0, "edentulous": 0.0})(coord, normal, labels, np.random.default_rng(0))
    for a, b in zip(same, (coord, normal, labels)):
        np.testing.assert_array_equal(a, b)


def test_same_seed_same_arch(arch: dict[str, np.ndarray]) -> None:
    aug = MissingTeeth({"p": 1.0})
    a = make_item(arch, "x", 17, 0.6, rng=np.random.default_rng(5), missing_teeth=aug)
    b = make_item(arch, "x", 17, 0.6, rng=np.random.default_rng(5), missing_teeth=aug)
    np.testing.assert_array_equal(a["coord"], b["coord"])
    np.testing.assert_array_equal(a["segment"], b["segment"])


def test_config_turns_it_on_for_training_only(tmp_path: Path) -> None:
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(None, [f"data.root={SAMPLES}", "data.train_split=all", "data.val_names=[MSN021]",
                             "data.missing_teeth={p: 1.0, max_teeth: 1}", f"data.cache_dir={tmp_path}"])
    train, val = build_dataset(cfg, "train", train=True), build_dataset(cfg, "val", train=False)
    assert train.missing_teeth is not None and train.missing_teeth.max_teeth == 1 and val.missing_teeth is None
    i = train.names.index("MSN022_upper")
    kept = set(np.unique(train[i]["vertex_segment"]).tolist())
    assert len(set(np.unique(fdi_classes(train, i)).tolist()) - kept) == 1  # exactly one tooth gone
    assert set(np.unique(val[0]["vertex_segment"]).tolist()) == set(np.unique(fdi_classes(val, 0)).tolist())


def fdi_classes(ds: Teeth3DSDataset, i: int) -> np.ndarray:
    from pointmamba.data import fdi_to_class

    d = ds.preprocessed(i)
    return fdi_to_class(d["labels"].astype(np.int64), str(d["jaw"]), 17)


def test_complete_arch_rule() -> None:
    full = np.array([0] + [10 * q + p for q in (1, 2) for p in range(1, 8)])
    assert arch_is_complete(full, "upper") and not arch_is_complete(full, "lower")
    assert not arch_is_complete(full[full != 15], "upper")
    assert arch_is_complete(np.append(full, 18), "upper")


@pytest.mark.parametrize("value, message", [("{p: 2.0}", "probability"), ("{max_teeth: 0}", "max_teeth"),
                                            ("{nope: 1}", "nope"), ("{flatten: 1.5}", "probability"), ("maybe", "true, false or a mapping")])
def test_config_errors_name_the_key(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"data.missing_teeth.*{message}|{message}.*data.missing_teeth"):
        load_config(None, [f"data.missing_teeth={value}"])
