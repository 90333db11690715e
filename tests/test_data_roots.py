"""Several data roots: scans from both, unique names across them, symlinked folders, training exclusions,
per-source reporting, and the config → dataset → loss path with position-labelled roots."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import ConfigError, load_config
from pointmamba.data import ScanFormatError, Teeth3DSDataset, find_scans
from pointmamba.data.dataset import ItemOptions
from pointmamba.data.synthetic import write_dataset
from pointmamba.training.data_builders import build_dataset, ensure_data


@pytest.fixture(scope="module")
def two_roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    a = tmp_path_factory.mktemp("source_a")
    write_dataset(a, 2, n_vertices=2000, seed=0, progress=False)
    b = tmp_path_factory.mktemp("source_b")
    write_dataset(b, 2, n_vertices=2000, seed=1, progress=False)
    for d in sorted(b.glob("SYN*")):  # other names in the second root
        new = b / d.name.replace("SYN", "OTH")
        d.rename(new)
        for f in sorted(new.iterdir()):
            f.rename(new / f.name.replace("SYN", "OTH"))
    return a, b


def test_scans_from_several_roots(two_roots: tuple[Path, Path]) -> None:
    a, b = two_roots
    ds = Teeth3DSDataset([a, b], split="all", cache_dir=False)
    assert ds.names == ["OTH00000_lower", "OTH00000_upper", "OTH00001_lower", "OTH00001_upper",
                        "SYN00000_lower", "SYN00000_upper", "SYN00001_lower", "SYN00001_upper"]
    assert ds.sources == [b.name] * 4 + [a.name] * 4
    picked = Teeth3DSDataset([a, b], names=["SYN00001", "OTH00000_upper"], cache_dir=False)
    assert picked.names == ["SYN00001_upper", "SYN00001_lower", "OTH00000_upper"]
    assert [p.parent.parent for p in picked.paths] == [a, a, b]


def test_one_scan_name_in_two_roots_is_an_error_naming_both(two_roots: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = two_roots
    copy = tmp_path / "copy"
    shutil.copytree(a / "SYN00000", copy / "SYN00000")
    with pytest.raises(ScanFormatError) as info:
        Teeth3DSDataset([a, copy], split="all", cache_dir=False)
    message = str(info.value)
    assert "two scans named 'SYN00000_" in message and str(a) in message and str(copy) in message


def test_symlinked_folders_are_followed_once(two_roots: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_roots
    assembled = tmp_path / "assembled"
    assembled.mkdir()
    os.symlink(a / "SYN00000", assembled / "SYN00000")  # a user assembling a data set from links
    os.symlink(b, assembled / "other")
    (assembled / "nested").mkdir()
    os.symlink(assembled, assembled / "nested" / "back")  # a loop must not hang or duplicate
    found = find_scans(assembled)
    assert sorted(found) == ["OTH00000_lower", "OTH00000_upper", "OTH00001_lower", "OTH00001_upper",
                             "SYN00000_lower", "SYN00000_upper"]


def test_train_exclude_and_config_path(two_roots: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_roots
    cfg = load_config(None, [f"data.root=[{a}, {b}]", "data.train_split=all", "data.train_exclude=[SYN00001, OTH00000_lower]",
                             "data.val_names=[SYN00001]", f"data.cache_dir={tmp_path / 'cache'}"])
    assert ensure_data(cfg) == [a, b]
    train = build_dataset(cfg, "train", train=True)
    val = build_dataset(cfg, "val", train=False)
    assert not set(train.names) & set(val.names)
    assert "OTH00000_lower" not in train.names and "OTH00000_upper" in train.names and len(train) == 5
    bad = load_config(None, [f"data.root=[{a}, {b}]", "data.train_split=all", "data.train_exclude=[NOPE1]"])
    with pytest.raises(ScanFormatError, match="data.train_exclude.*NOPE1"):
        build_dataset(bad, "train", train=True)


@pytest.mark.parametrize("value", ["[]", "5", "[a, 3]", "''"])
def test_data_root_must_be_folders(value: str) -> None:
    with pytest.raises(ConfigError, match="data.root"):
        load_config(None, [f"data.root={value}"])


def test_missing_root_in_a_list_is_named(two_roots: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = two_roots
    cfg = load_config(None, [f"data.root=[{a}, {tmp_path / 'nowhere'}]"])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        ensure_data(cfg)


def test_position_labelled_roots_weigh_incomplete_arches(two_roots: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_roots
    ds = Teeth3DSDataset([a, b], split="all", cache_dir=tmp_path / "cache", position_label_roots=[b],
                         items=ItemOptions(position_label_weight=0.25, missing_teeth={"p": 1.0}))
    for i, name in enumerate(ds.names):
        labels = ds.preprocessed(i)["labels"]
        jaw = "upper" if name.endswith("upper") else "lower"
        q = (1, 2) if jaw == "upper" else (3, 4)
        complete = all(10 * k + p in set(labels.tolist()) for k in q for p in range(1, 8))
        expected = name.startswith("SYN") or complete
        assert ds.labels_are_identities(i) == expected, name
        item = ds[i]
        assert item["weight"] == (1.0 if expected else 0.25)
        # missing-tooth augmentation only where the labels are identities: others keep every tooth
        kept = set(np.unique(item["vertex_segment"]).tolist())
        all_teeth = set(np.unique(ds.preprocessed(i)["labels"]).tolist())
        if not expected:
            assert len(kept) == len(all_teeth)
    assert 0 < sum(ds.labels_are_identities(i) for i in range(len(ds))) < len(ds)  # both kinds tested
    with pytest.raises(ValueError, match="position_label_roots.*not one of the data roots"):
        Teeth3DSDataset([a], split="all", cache_dir=False, position_label_roots=[b])
