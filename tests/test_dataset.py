"""Teeth3DSDataset: split selection, items, cache, epoch-seeded randomness, and collate into a PointBatch."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.data import (DEFAULT_AUGMENT, IGNORE_INDEX, ScanFormatError, Teeth3DSDataset, apply_transform,
                             collate, fdi_to_class, load_scan, vertex_normals)
from pointmamba.data import dataset as dataset_module
from pointmamba.data.dataset import ItemOptions
from pointmamba.data.synthetic import write_dataset
from pointmamba.point.batch import PointBatch


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("syn")
    write_dataset(out, 4, n_vertices=3000, seed=0, progress=False)
    return out


def test_scan_selection(root: Path, tmp_path: Path) -> None:
    train = (root / "train.txt").read_text().split()
    ds = Teeth3DSDataset(root, split="train", cache_dir=False)
    assert ds.names == [f"{i}_{j}" for i in train for j in ("upper", "lower")]
    assert len(Teeth3DSDataset(root, split="all", cache_dir=False)) == 8
    assert len(Teeth3DSDataset(root, split=None, jaw="lower", cache_dir=False)) == 4
    ds = Teeth3DSDataset(root, names=["SYN00001_upper", "SYN00002"], cache_dir=False)
    assert ds.names == ["SYN00001_upper", "SYN00002_upper", "SYN00002_lower"]
    split = tmp_path / "mine.txt"
    split.write_text("# a comment\nSYN00003_lower\n\nSYN00000  # trailing comment\n")
    ds = Teeth3DSDataset(root, split_file=split, jaw="upper", cache_dir=False)
    assert ds.names == ["SYN00000_upper"]
    assert ds.mode == "test" and Teeth3DSDataset(root, split="train", cache_dir=False).mode == "train"


def test_selection_errors_name_the_source(root: Path, tmp_path: Path) -> None:
    split = tmp_path / "bad.txt"
    split.write_text("SYN00000\nSYN99999\n")
    with pytest.raises(ScanFormatError) as info:
        Teeth3DSDataset(root, split_file=split, cache_dir=False)
    assert str(split) in str(info.value) and "SYN99999" in str(info.value)
    split.write_text("SYN00000_upper\nSYN00000\n")
    with pytest.raises(ScanFormatError, match="listed twice"):
        Teeth3DSDataset(root, split_file=split, cache_dir=False)
    with pytest.raises(FileNotFoundError, match="nosuch.txt"):
        Teeth3DSDataset(root, split="nosuch", cache_dir=False)
    with pytest.raises(ValueError, match="num_classes"):
        Teeth3DSDataset(root, split="all", items=ItemOptions(num_classes=16), cache_dir=False)
    with pytest.raises(ValueError, match="unknown jaw"):
        Teeth3DSDataset(root, split="all", jaw="both", cache_dir=False)


def test_item_contents(root: Path) -> None:
    ds = Teeth3DSDataset(root, names=["SYN00001_lower"], items=ItemOptions(grid_size=0.3), cache_dir=False)
    item = ds[0]
    scan = load_scan(ds.paths[0])
    n, v = len(item["coord"]), scan.num_vertices
    assert item["coord"].shape == (n, 3) and item["coord"].dtype == np.float32
    assert item["feat"].shape == (n, 6) and item["feat"].dtype == np.float32
    assert np.array_equal(item["feat"][:, :3], item["coord"])
    assert np.allclose(np.linalg.norm(item["feat"][:, 3:], axis=1), 1.0, atol=1e-5)
    assert item["segment"].dtype == np.int64 and item["vertex_row"].shape == (v,) and item["num_vertices"] == v
    assert (item["name"], item["jaw"]) == ("SYN00001_lower", "lower")
    expected = fdi_to_class(scan.labels, "lower", 17)
    assert np.array_equal(item["vertex_segment"], expected)
    assert np.array_equal(item["segment"], expected[item["index"]])
    # coord = transform applied to the file's vertices (aligned and centred), normals rotated alike
    assert np.allclose(item["coord"], apply_transform(scan.vertices, item["transform"])[item["index"]], atol=1e-4)
    normals = apply_transform(vertex_normals(scan.vertices, scan.faces), item["transform"], direction=True)
    assert np.allclose(item["feat"][:, 3:], normals[item["index"]], atol=1e-5)
    assert np.abs(apply_transform(scan.vertices, item["transform"]).mean(0)).max() < 1e-6
    assert item["vertex_row"].min() == 0 and item["vertex_row"].max() == n - 1
    # aligned: crowns towards +z
    teeth = item["segment"] > 0
    assert item["coord"][teeth, 2].mean() > item["coord"][~teeth, 2].mean()
    ds33 = Teeth3DSDataset(root, names=["SYN00001_lower"], items=ItemOptions(num_classes=33), cache_dir=False)
    seg = ds33[0]["segment"]
    assert seg.max() > 16 and set(np.unique(seg)) <= {0} | set(range(17, 33))


def test_unaligned_and_capped(root: Path) -> None:
    ds = Teeth3DSDataset(root, names=["SYN00002_upper"], items=ItemOptions(align=False, max_points=500),
                         cache_dir=False)
    item = ds[0]
    scan = load_scan(ds.paths[0])
    assert len(item["coord"]) == 500 and item["vertex_row"].shape == (scan.num_vertices,)
    assert np.allclose(item["transform"][:3, :3], np.eye(3))
    assert np.allclose(item["coord"], (scan.vertices - scan.vertices.mean(0))[item["index"]], atol=1e-4)


def test_unlabelled_scans_get_ignore_targets(tmp_path: Path, root: Path) -> None:
    (tmp_path / "P").mkdir()
    src = root / "SYN00000" / "SYN00000_upper.obj"
    (tmp_path / "P" / "P_upper.obj").write_bytes(src.read_bytes())
    (tmp_path / "P" / "P_upper_pred.obj").write_bytes(src.read_bytes())  # not a scan name: ignored
    ds = Teeth3DSDataset(tmp_path, split="all", cache_dir=False)
    assert ds.names == ["P_upper"]
    item = ds[0]
    assert (item["segment"] == IGNORE_INDEX).all() and item["jaw"] == "upper"


def test_cache_avoids_parsing_and_follows_file_changes(root: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    ds = Teeth3DSDataset(root, names=["SYN00003_upper"], cache_dir=cache)
    first = ds[0]
    assert len(list(cache.glob("*.npz"))) == 1

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed the OBJ again")

    monkeypatch.setattr(dataset_module, "load_scan", no_parsing)
    second = Teeth3DSDataset(root, names=["SYN00003_upper"], cache_dir=cache)[0]  # a new object: disk cache
    for key in ("coord", "feat", "segment", "vertex_row"):
        assert np.array_equal(first[key], second[key])
    mem = Teeth3DSDataset(root, names=["SYN00003_upper"], cache_dir=cache, in_memory=True)
    mem[0]
    for f in cache.glob("*.npz"):
        f.unlink()
    assert np.array_equal(mem[0]["coord"], first["coord"])  # in memory, no disk needed
    # a changed label file changes the key: the scan is parsed again
    label = root / "SYN00003" / "SYN00003_upper.json"
    st = label.stat()
    os.utime(label, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(AssertionError, match="parsed the OBJ again"):
        Teeth3DSDataset(root, names=["SYN00003_upper"], cache_dir=cache)[0]


def test_cache_key_is_unchanged_by_the_item_options(tmp_path: Path, monkeypatch) -> None:
    """A scan's cache file is named by CACHE_VERSION and its mesh's and label file's path, mtime and size
    alone: no item option enters it (a changed key would silently preprocess every user's cache again).
    The name was recorded with the dataset as it was before :class:`ItemOptions` (commit 03a6ab7)."""
    mesh = tmp_path / "K" / "K_upper.obj"
    mesh.parent.mkdir()
    mesh.write_bytes(b"v 0 0 0\n" * 3)
    mesh.with_suffix(".json").write_bytes(b"{}")
    for f in (mesh, mesh.with_suffix(".json")):
        os.utime(f, ns=(1_700_000_000_000_000_000,) * 2)
    sets = [Teeth3DSDataset(tmp_path, split="all", cache_dir=tmp_path / "c", items=items)
            for items in (ItemOptions(), ItemOptions(num_classes=33, grid_size=0.3, augment={"mirror": 0.5}),
                          ItemOptions(align=False, max_points=100, jaw_feature=True, coord_feature=False,
                                      missing_teeth={"p": 1.0}, position_label_weight=0.5, mode="train", seed=7))]
    real = Path.resolve  # the key holds the files' absolute paths: give them one independent of tmp_path
    monkeypatch.setattr(Path, "resolve", lambda self, strict=False: Path("/scans") / self.relative_to(tmp_path)
                        if self.is_relative_to(tmp_path) else real(self, strict))
    for ds in sets:
        assert ds._cache_path(ds.paths[0]) == tmp_path / "c" / "K_upper-fefc3ef027a23e0bf448.npz"


def test_item_options_are_checked_and_named(root: Path) -> None:
    for bad, field in [(dict(num_classes=16), "num_classes"), (dict(grid_size=-1), "grid_size"),
                       (dict(max_points=0), "max_points"), (dict(augment={"nosuch": 1}), "augment"),
                       (dict(missing_teeth={"p": 2.0}), "missing_teeth"), (dict(mode="eval"), "mode"),
                       (dict(position_label_weight=-0.5), "position_label_weight")]:
        with pytest.raises(ValueError, match=f"^ItemOptions.{field}"):
            ItemOptions(**bad)
    o = ItemOptions(grid_size=0, augment={}, align=0)
    assert o.grid_size is None and o.augment is None and o.align is False
    with pytest.raises(AttributeError):
        o.grid_size = 0.3  # frozen
    # the dataset settles the mode by its split, and shows the options as its attributes
    assert Teeth3DSDataset(root, split="train", cache_dir=False).items.mode == "train"
    ds = Teeth3DSDataset(root, split="all", items=ItemOptions(num_classes=33, max_points=300), cache_dir=False)
    assert (ds.items.mode, ds.mode, ds.num_classes, ds.max_points, ds.augment) == ("test", "test", 33, 300, None)
    assert len(ds[0]["coord"]) == 300


def test_epoch_seeded_randomness(root: Path, tmp_path: Path) -> None:
    kw = dict(split="train", items=ItemOptions(augment=DEFAULT_AUGMENT, seed=3), cache_dir=tmp_path / "c")
    a, b = Teeth3DSDataset(root, **kw), Teeth3DSDataset(root, **kw)
    x0 = a[1]
    assert np.array_equal(x0["coord"], b[1]["coord"])  # same (seed, epoch, index): same item
    assert np.array_equal(x0["coord"], a[1]["coord"])  # and again
    a.set_epoch(1)
    x1 = a[1]
    assert not np.array_equal(x0["coord"], x1["coord"])
    b.set_epoch(1)
    assert np.array_equal(x1["coord"], b[1]["coord"])  # resumable: epoch 1 is epoch 1
    assert np.array_equal(x1["vertex_segment"] >= 0, x0["vertex_segment"] >= 0)
    c = Teeth3DSDataset(root, **{**kw, "items": ItemOptions(augment=DEFAULT_AUGMENT, seed=4)})
    assert not np.array_equal(c[1]["coord"], x0["coord"])


def test_collate_builds_a_point_batch(root: Path, tmp_path: Path) -> None:
    ds = Teeth3DSDataset(root, split="all", items=ItemOptions(grid_size=0.25), cache_dir=tmp_path / "c")
    items = [ds[i] for i in (0, 3, 5)]
    batch = collate(items)
    assert isinstance(batch, PointBatch)
    rows = [len(it["coord"]) for it in items]
    verts = [it["num_vertices"] for it in items]
    assert batch.offset.tolist() == np.cumsum(rows).tolist()
    assert batch.coord.dtype == torch.float32 and batch.feat.shape == (sum(rows), 6)
    assert batch.grid_size == 0.25 and batch.grid_coord.shape == (sum(rows), 3)
    ex = batch.extra
    assert ex["segment"].dtype == torch.int64 and ex["segment"].shape == (sum(rows),)
    assert ex["name"] == [it["name"] for it in items] and ex["jaw"] == [it["jaw"] for it in items]
    assert ex["vertex_offset"].tolist() == np.cumsum(verts).tolist()
    inverse, voff, off = ex["vertex_row"], [0] + np.cumsum(verts).tolist(), [0] + batch.offset.tolist()
    assert inverse.shape == (sum(verts),)
    for b in range(3):  # each sample's vertices point into its own rows
        part = inverse[voff[b]:voff[b + 1]]
        assert part.min() >= off[b] and part.max() < off[b + 1]
    # per-vertex targets through the map equal the representative's target
    assert torch.equal(ex["segment"][inverse], torch.from_numpy(np.concatenate(
        [it["segment"][it["vertex_row"]] for it in items])))
    assert ex["transform"].shape == (3, 4, 4)
    with pytest.raises(ValueError):
        collate([])


def test_shared_scans_through_the_dataset(scans_dir: Path, tmp_path: Path) -> None:
    ds = Teeth3DSDataset(scans_dir, split="all", jaw="lower", cache_dir=tmp_path / "c", items=ItemOptions(grid_size=0.2))
    assert len(ds) == 24
    batch = collate([ds[0], ds[1]])
    seg = batch.extra["segment"]
    assert ((seg >= 0) & (seg < 17)).all() and (seg > 0).any()
