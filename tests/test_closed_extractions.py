"""Position labels of closed-extraction arches turned into identities: the rule on arches whose true
numbers are known (procedural jaws with premolars taken out, then counted as a position labeller would),
its guards, real arches it must leave alone, and the path from the config through the dataset."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.config import load_config
from pointmamba.data import Teeth3DSDataset, fdi_to_class
from pointmamba.data.closed_extractions import (apply_map, closed_extraction_map, counted_side_map,
                                                lone_premolar_sides)
from pointmamba.data.scan import Scan, save_scan
from pointmamba.data.synthetic import synthetic_jaw

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def counted(labels: np.ndarray) -> np.ndarray:
    """Labels by position along the arch: each side's teeth numbered 1, 2, ... from the midline."""
    out = np.zeros_like(labels)
    for q in {int(t) // 10 for t in np.unique(labels) if t > 0}:
        present = sorted(int(t) for t in np.unique(labels) if t // 10 == q)
        for k, t in enumerate(present, start=1):
            out[labels == t] = 10 * q + k
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counted_extraction_arch_gets_its_identities_back(seed: int) -> None:
    # first premolars out, third molars in: counted, the molars read 5, 6, 7 and the arch looks complete
    jaw = synthetic_jaw(seed, "lower", 20000, missing=[34, 44], pose="canonical")
    position = counted(jaw.labels)
    assert (position != jaw.labels).any()
    mapping = closed_extraction_map(jaw.vertices, position, "lower")
    assert mapping == {34: 35, 35: 36, 36: 37, 37: 38, 44: 45, 45: 46, 46: 47, 47: 48}
    np.testing.assert_array_equal(apply_map(position, mapping), jaw.labels)


def test_one_side_only() -> None:
    jaw = synthetic_jaw(3, "lower", 20000, missing=[34], pose="canonical")
    position = counted(jaw.labels)
    position[position == 48] = 0  # the other side: 1..7 by position and identity alike
    assert closed_extraction_map(jaw.vertices, position, "lower") == {34: 35, 35: 36, 36: 37, 37: 38}


def test_complete_arch_and_incomplete_arch_are_left_alone() -> None:
    jaw = synthetic_jaw(4, "lower", 20000, missing=[38, 48], pose="canonical")
    assert closed_extraction_map(jaw.vertices, jaw.labels, "lower") == {}
    # an arch that misses a position: its numbers are not known to be in place, whatever the widths
    extraction = synthetic_jaw(0, "lower", 20000, missing=[34, 44], pose="canonical")
    broken = counted(extraction.labels)
    broken[broken == 42] = 0
    assert closed_extraction_map(extraction.vertices, broken, "lower") == {}


def test_two_premolars_under_one_label_are_not_an_extraction() -> None:
    # 34 and 35 merged under one number, counted behind it: position 4 is molar-wide, but moving the
    # side back two numbers would need a 9th tooth, so the side is left as read
    jaw = synthetic_jaw(5, "lower", 20000, pose="canonical")
    merged = jaw.labels.copy()
    merged[merged == 35] = 34
    merged = counted(merged)
    merged[(merged // 10 == 4) & (merged % 10 == 8)] = 0  # other side complete by positions 1..7
    assert closed_extraction_map(jaw.vertices, merged, "lower") == {}


def test_real_sample_arches_are_left_alone(tmp_path: Path) -> None:
    ds = Teeth3DSDataset(SAMPLES, split="all", position_label_roots=[SAMPLES], relabel_closed_extractions=True,
                         cache_dir=tmp_path, grid_size=None)
    assert all(ds.labels_are_identities(i) for i in range(len(ds)))
    assert ds.relabelled() == {}


def _write_counted_extraction(root: Path) -> np.ndarray:
    jaw = synthetic_jaw(1, "lower", 12000, missing=[34, 44], pose="random", id_patient="X001")
    save_scan(root, Scan(jaw.vertices, jaw.faces, counted(jaw.labels), "lower", "X001"))
    return jaw.labels


def test_config_to_dataset_path(tmp_path: Path) -> None:
    from pointmamba.training.data_builders import build_dataset

    root = tmp_path / "msn"
    truth = _write_counted_extraction(root)
    base = [f"data.root={root}", "data.train_split=all", "data.val_names=[X001]", f"data.position_label_roots=[{root}]",
            "data.position_label_weight=0.3", f"data.cache_dir={tmp_path / 'cache'}", "data.grid_size=0"]
    on = build_dataset(load_config(None, base + ["data.relabel_closed_extractions=true"]), "train", train=True)
    item = on[0]
    np.testing.assert_array_equal(item["vertex_segment"], fdi_to_class(truth, "lower", 17))
    assert on.relabelled() == {"X001_lower": {34: 35, 35: 36, 36: 37, 37: 38, 44: 45, 45: 46, 46: 47, 47: 48}}
    assert on.labels_are_identities(0) and item["weight"] == 1.0
    # off (the default), from the same cache: the labels as read, a complete arch by its positions
    off = build_dataset(load_config(None, base), "train", train=True)
    np.testing.assert_array_equal(off.preprocessed(0)["labels"], counted(truth))
    assert off.relabelled() == {} and off.labels_are_identities(0)


def test_identity_roots_are_never_relabelled(tmp_path: Path) -> None:
    root = tmp_path / "ios"
    _write_counted_extraction(root)  # labels that look counted, but the root says identities
    ds = Teeth3DSDataset(root, split="all", relabel_closed_extractions=True, cache_dir=tmp_path / "cache",
                         grid_size=None)
    np.testing.assert_array_equal(ds.preprocessed(0)["labels"], counted(synthetic_jaw(
        1, "lower", 12000, missing=[34, 44], pose="random").labels))
    assert ds.relabelled() == {}


def test_trainer_logs_every_relabelled_scan_and_its_map(tmp_path: Path) -> None:
    from pointmamba.training.trainer import Trainer
    from support.tiny import TINY_MODEL

    root = tmp_path / "msn"
    _write_counted_extraction(root)
    base = TINY_MODEL + [f"data.root={root}", "data.train_split=all", "data.val_names=[X001]",
                         f"data.position_label_roots=[{root}]", "data.position_label_weight=0.3",
                         f"data.cache_dir={tmp_path / 'cache'}", "data.grid_size=0.6", "train.val_interval=0",
                         "train.progress=false"]
    for switch, expected in (("true", "1 training scan(s) relabelled as closed extractions "
                                      "(data.relabel_closed_extractions): X001_lower 34->35 35->36 36->37 37->38 "
                                      "44->45 45->46 46->47 47->48"),
                             ("false", None)):
        work = tmp_path / f"work_{switch}"
        trainer = Trainer(load_config(None, base + [f"work_dir={work}", f"data.relabel_closed_extractions={switch}"]))
        trainer.close()
        log = (work / "train.log").read_text()
        if expected:
            assert expected + "\n" in log
        else:
            assert "relabelled as closed extractions" not in log


# ---------------------------------------------------------------- identity arches with counted sides

@pytest.mark.parametrize("seed", [0, 1])
def test_counted_side_of_an_identity_arch_gets_the_identity_numbers(seed: int) -> None:
    # first premolars out, no third molars: 3D-IOSSeg numbers such sides either way; counted, the first
    # molar reads 35 and the second 36
    jaw = synthetic_jaw(seed, "lower", 20000, missing=[34, 44, 38, 48], pose="canonical")
    read = counted(jaw.labels)
    mapping = counted_side_map(jaw.vertices, read, "lower")
    assert mapping == {34: 35, 35: 36, 36: 37, 44: 45, 45: 46, 46: 47}
    np.testing.assert_array_equal(apply_map(read, mapping), jaw.labels)
    # numbered by identity already, or complete: nothing moves
    assert counted_side_map(jaw.vertices, jaw.labels, "lower") == {}
    full = synthetic_jaw(seed, "lower", 20000, pose="canonical")
    assert counted_side_map(full.vertices, full.labels, "lower") == {}


def test_counted_side_rule_guards() -> None:
    jaw = synthetic_jaw(2, "lower", 20000, missing=[34, 44], pose="canonical")
    # one side counted up to its third molar (35->34, 36->35, 37 and 38 as they were): no 9th number, left
    mixed = jaw.labels.copy()
    mixed[jaw.labels == 35], mixed[jaw.labels == 36] = 34, 35
    assert counted_side_map(jaw.vertices, mixed, "lower") == {}
    # the other side counted all the way (its third molar left out): only that side moves
    read = jaw.labels.copy()
    read[jaw.labels == 48] = 0
    for t in (45, 46, 47):
        read[jaw.labels == t] = t - 1
    assert counted_side_map(jaw.vertices, read, "lower") == {44: 45, 45: 46, 46: 47}
    # no canine on the side: the pattern is not there to read
    read[jaw.labels == 43] = 0
    assert counted_side_map(jaw.vertices, read, "lower") == {}


def _write_counted_side(root: Path) -> np.ndarray:
    jaw = synthetic_jaw(1, "lower", 12000, missing=[34, 44, 38, 48], pose="random", id_patient="Y001")
    save_scan(root, Scan(jaw.vertices, jaw.faces, counted(jaw.labels), "lower", "Y001"))
    return jaw.labels


def test_counted_sides_config_to_dataset_path(tmp_path: Path) -> None:
    from pointmamba.training.data_builders import build_dataset

    ios, msn = tmp_path / "ios", tmp_path / "msn"
    truth = _write_counted_side(ios)
    _write_counted_extraction(msn)  # position labels: not this switch's business
    base = [f"data.root=[{ios},{msn}]", "data.train_split=all", "data.val_names=[Y001]", "data.train_exclude=[]",
            f"data.position_label_roots=[{msn}]", f"data.cache_dir={tmp_path / 'cache'}", "data.grid_size=0",
            "data.augment=false"]  # no mirror: the classes keep their side
    cfg = load_config(None, base + ["data.relabel_counted_sides=true"])
    on = build_dataset(cfg, "train", train=True)
    i = on.names.index("Y001_lower")
    np.testing.assert_array_equal(on[i]["vertex_segment"], fdi_to_class(truth, "lower", 17))
    assert on.relabelled() == {"Y001_lower": {34: 35, 35: 36, 36: 37, 44: 45, 45: 46, 46: 47}}
    # the val set is scored against the labels as read
    val = build_dataset(cfg, "val", train=False)
    np.testing.assert_array_equal(val.preprocessed(0)["labels"], counted(truth))
    assert val.relabelled() == {}
    off = build_dataset(load_config(None, base), "train", train=True)
    np.testing.assert_array_equal(off.preprocessed(off.names.index("Y001_lower"))["labels"], counted(truth))
    assert off.relabelled() == {}


def test_trainer_logs_counted_sides(tmp_path: Path) -> None:
    from pointmamba.training.trainer import Trainer
    from support.tiny import TINY_MODEL

    root = tmp_path / "ios"
    _write_counted_side(root)
    work = tmp_path / "work"
    Trainer(load_config(None, TINY_MODEL + [
        f"data.root={root}", "data.train_split=all", "data.val_names=[Y001]", "data.train_exclude=[]",
        f"data.cache_dir={tmp_path / 'cache'}", "data.grid_size=0.6", "train.val_interval=0", "train.progress=false",
        f"work_dir={work}", "data.relabel_counted_sides=true"])).close()
    assert ("1 training scan(s) relabelled where a side was counted (data.relabel_counted_sides): Y001_lower "
            "34->35 35->36 36->37 44->45 45->46 46->47\n") in (work / "train.log").read_text()


def test_lone_premolar_sides_and_the_test_tools_groups() -> None:
    from pointmamba.evaluation.scan_summary import group_rows, reference_groups

    jaw = synthetic_jaw(0, "lower", 20000, missing=[34], pose="canonical")
    assert lone_premolar_sides(jaw.vertices, jaw.labels, "lower") == {3: 6}  # by identity
    assert lone_premolar_sides(jaw.vertices, counted(jaw.labels), "lower") == {3: 5}  # counted
    full = synthetic_jaw(0, "lower", 20000, pose="canonical")
    assert lone_premolar_sides(full.vertices, full.labels, "lower") == {}
    both = synthetic_jaw(0, "lower", 20000, missing=[34, 45], pose="canonical")  # two gaps, one premolar each
    assert lone_premolar_sides(both.vertices, both.labels, "lower") == {3: 6, 4: 6}

    rows = [{"name": n, "source": "s", "jaw": "lower", **reference_groups(j.labels, j.vertices, "lower")}
            for n, j in (("pattern", jaw), ("full", full))]
    assert [r["lone_premolar"] for r in rows] == [True, False]
    groups = group_rows(rows)
    assert [r["name"] for r in groups["lone premolar side"]] == ["pattern"]
    assert [r["name"] for r in groups["no lone premolar side"]] == ["full"]
    # without the vertices the flag is not computed, and no arch of the pattern: no such groups
    assert "lone_premolar" not in reference_groups(jaw.labels)
    assert "lone premolar side" not in group_rows(rows[1:])
