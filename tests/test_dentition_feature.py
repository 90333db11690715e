"""The dentition as a network input (``data.dentition_feature``, issue 43): one constant channel, +1 mixed,
-1 permanent, 0 not given. In training, an arch whose own labels read the lone-premolar pattern shows its
dentition on about half its draws (0 otherwise, and always 0 elsewhere); at inference the network gets
``infer.dentition``, also as one network of an averaged pair."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.config import ConfigError, load_config
from pointmamba.data import load_scan
from pointmamba.data.dataset import DENTITION_SHOWN, make_item, preprocess_scan
from pointmamba.data.synthetic import synthetic_jaw
from pointmamba.data.scan import save_scan
from pointmamba.inference.pipeline import load_trained, vertex_probabilities
from pointmamba.training.data_builders import build_dataset

from support.tiny import tiny_overrides

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def arches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic lower jaws: SYN001 with the pattern on both sides (34, 44 missing: canine, one
    premolar-sized 35, molars 36, 37; labelled as the adult it could be, a permanent dentition), SYN002 whole."""
    root = tmp_path_factory.mktemp("dentition") / "scans"
    for name, missing in (("SYN001", (34, 44, 38, 48)), ("SYN002", (38, 48))):
        scan = synthetic_jaw(int(name[-1]), "lower", n_vertices=6000, missing=missing, pose="canonical",
                             id_patient=name)
        save_scan(root, scan)
    return root


def _dataset(root: Path, tmp_path: Path, split: str = "train", *extra: str):
    cfg = load_config(None, tiny_overrides(root, tmp_path / "w") + [
        "data.dentition_feature=true", "model.in_channels=7", "data.train_names=[SYN001, SYN002]",
        "data.val_names=[SYN001, SYN002]", *extra])
    return cfg, build_dataset(cfg, split, train=split == "train")


def test_the_channel_is_the_given_dentition_and_the_config_counts_it() -> None:
    with pytest.raises(ConfigError, match="in_channels must be 7 .*data.dentition_feature=true"):
        load_config(None, ["data.dentition_feature=true"])
    scan = synthetic_jaw(0, "lower", n_vertices=3000, pose="canonical")
    arrays = preprocess_scan(scan)
    for dentition, value in (("mixed", 1.0), ("permanent", -1.0), ("auto", 0.0), (None, 0.0)):
        item = make_item(arrays, scan.name, 17, 0.6, dentition_feature=True, dentition=dentition)
        assert item["feat"].shape[1] == 7
        np.testing.assert_array_equal(item["feat"][:, 6], value)
    plain = make_item(arrays, scan.name, 17, 0.6, dentition="mixed")  # the switch off: no channel
    assert plain["feat"].shape[1] == 6


def test_training_shows_a_pattern_arch_its_own_dentition_about_half_the_time(arches: Path, tmp_path: Path) -> None:
    _, ds = _dataset(arches, tmp_path)
    names = list(ds.names)
    pattern, whole = names.index("SYN001_lower"), names.index("SYN002_lower")
    assert ds.labelled_dentition(pattern) == "permanent" and ds.labelled_dentition(whole) is None
    shown = {pattern: [], whole: []}
    for epoch in range(40):
        ds.set_epoch(epoch)
        for i in shown:
            shown[i].append(float(np.unique(ds[i]["feat"][:, 6]).item()))
    assert set(shown[whole]) == {0.0}
    assert set(shown[pattern]) == {-1.0, 0.0}
    assert abs(shown[pattern].count(-1.0) / 40 - DENTITION_SHOWN) < 0.2
    _, val = _dataset(arches, tmp_path, "val")  # evaluation items: not given
    assert all(np.all(val[i]["feat"][:, 6] == 0.0) for i in range(len(val)))


def test_a_network_that_takes_the_dentition_gets_infer_dentition_alone_and_in_a_pair(arches: Path,
                                                                                     tmp_path: Path) -> None:
    from pointmamba import build_model
    from pointmamba.checkpoints.checkpoint import save_checkpoint

    paths = {}
    for name, extra in (("with", ["data.dentition_feature=true", "model.in_channels=7"]), ("without", [])):
        cfg = load_config(None, tiny_overrides(arches, tmp_path / name) + extra)
        torch.manual_seed(3)
        paths[name] = tmp_path / f"{name}.pth"
        save_checkpoint({"model": build_model(cfg).state_dict(),
                         "config": {k: v for k, v in cfg.items() if k[0] != "_"}}, paths[name])
    scan = load_scan(arches / "SYN001" / "SYN001_lower.obj")
    arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}

    def probs(model, cfg, dentition: str) -> np.ndarray:
        cfg = {**cfg, "infer": {**(cfg.get("infer") or {}), "dentition": dentition}}
        return vertex_probabilities(model, arrays, scan.name, cfg, CPU, mirror_tta=False)[0]

    net, cfg = load_trained(paths["with"], CPU)
    auto, mixed, permanent = (probs(net, cfg, d) for d in ("auto", "mixed", "permanent"))
    assert np.abs(mixed - auto).max() > 1e-4 and np.abs(permanent - auto).max() > 1e-4
    other, other_cfg = load_trained(paths["without"], CPU)
    assert np.array_equal(probs(other, other_cfg, "mixed"), probs(other, other_cfg, "auto"))
    both, both_cfg = load_trained(paths["without"], CPU, average_with=[paths["with"]])
    for d, alone in (("auto", auto), ("mixed", mixed)):
        np.testing.assert_allclose(probs(both, both_cfg, d), (probs(other, other_cfg, d) + alone) / 2,
                                   rtol=0, atol=1e-12)
