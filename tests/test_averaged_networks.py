"""Averaging networks with different inputs: the average is the mean of each network's own probabilities,
it survives the compact file, it can be switched off, and a pair that cannot be averaged says so."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba import build_model
from pointmamba.config import ConfigError, load_config
from pointmamba.data import load_scan
from pointmamba.data.dataset import preprocess_scan
from pointmamba.inference.averaged_networks import AveragedNetworks, first_network
from pointmamba.inference.pipeline import load_trained, segment_scan, vertex_probabilities
from pointmamba.checkpoints.shipped import export_compact
from pointmamba.checkpoints.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

from support.tiny import TINY_MODEL, write_synthetic
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")
WITH_COORDS = TINY_MODEL + ["data.grid_size=0.6"]
NO_COORDS = WITH_COORDS + ["data.coord_feature=false", "model.in_channels=3"]


def saved(path: Path, overrides: list[str], seed: int) -> Path:
    """An untrained tiny network (its own seed: the two of a pair predict differently) saved as a checkpoint."""
    cfg = load_config(None, overrides)
    torch.manual_seed(seed)
    save_checkpoint({"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}},
                    path)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(with coordinates, without them, a synthetic upper jaw)."""
    tmp = tmp_path_factory.mktemp("averaged")
    synth = write_synthetic(tmp / "synth", count=1, vertices=2000)
    scan = next(p for p in sorted(synth.rglob("*_upper.obj")))
    return saved(tmp / "coords.pth", WITH_COORDS, 0), saved(tmp / "free.pth", NO_COORDS, 1), scan


def probabilities(model: torch.nn.Module, cfg: dict, scan_path: Path) -> np.ndarray:
    scan = load_scan(scan_path)
    arrays = {k: v for k, v in preprocess_scan(scan).items() if k != "labels"}
    return vertex_probabilities(model, arrays, scan.name, cfg, CPU, mirror_tta=True)[0]


def test_the_average_is_the_mean_of_each_networks_own_probabilities(pair: tuple[Path, Path, Path]) -> None:
    coords, free, scan = pair
    a, a_cfg = load_trained(coords, CPU)
    b, b_cfg = load_trained(free, CPU)
    both, cfg = load_trained(coords, CPU, average_with=[free])
    assert isinstance(both, AveragedNetworks) and len(both) == 2
    assert both.first.in_channels == 6 and both.others[0].in_channels == 3  # each network keeps its input
    pa, pb, pab = probabilities(a, a_cfg, scan), probabilities(b, b_cfg, scan), probabilities(both, cfg, scan)
    assert np.abs(pa - pb).max() > 0.01  # two different networks: the test below could fail
    np.testing.assert_allclose(pab, (pa + pb) / 2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pab.sum(1), 1.0, atol=1e-9)
    # switched off, the first network alone, bit for bit
    off = {**cfg, "infer": {**cfg["infer"], "average_networks": False}}
    assert np.array_equal(probabilities(both, off, scan), pa)
    with pytest.raises(TypeError, match="no single forward pass"):
        both(None)
    assert first_network(both) is both.first and first_network(a) is a


def test_networks_on_other_grids_or_with_the_jaw_are_averaged_each_on_its_own_input(
        pair: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The pair shares one prepared batch; a network on another grid gets its own points, and one that takes
    the jaw as input its extra channel: either way the average is the mean of each network's own."""
    coords, _, scan = pair
    other_grid = saved(tmp_path / "grid.pth", TINY_MODEL + ["data.grid_size=0.5"], 2)
    with_jaw = saved(tmp_path / "jaw.pth", WITH_COORDS + ["data.jaw_feature=true", "model.in_channels=7"], 3)
    a, a_cfg = load_trained(coords, CPU)
    for other in (other_grid, with_jaw):
        b, b_cfg = load_trained(other, CPU)
        both, cfg = load_trained(coords, CPU, average_with=[other])
        pa, pb = probabilities(a, a_cfg, scan), probabilities(b, b_cfg, scan)
        assert np.abs(pa - pb).max() > 0.01
        np.testing.assert_allclose(probabilities(both, cfg, scan), (pa + pb) / 2, rtol=0, atol=1e-12)


def test_a_compact_file_holds_the_pair_and_predicts_as_the_two_files_do(pair: tuple[Path, Path, Path],
                                                                        tmp_path: Path) -> None:
    coords, free, scan = pair
    code, out, err = run_tool("export_model", coords, "--average-with", free, "--out", tmp_path / "pair.pth")
    assert code == 0, err
    for name, path in (("one", coords), ("two", free)):  # the same networks, each rounded to float16 alone
        assert run_tool("export_model", path, "--out", tmp_path / f"{name}.pth")[0] == 0
    state = torch.load(tmp_path / "pair.pth", map_location="cpu", weights_only=True)
    assert len(state["average_with"]) == 1 and state["average_with"][0]["config"]["data"]["coord_feature"] is False
    for k, v in load_checkpoint(coords)["model"].items():  # the first network at the top, as in a one-network file
        assert torch.equal(state["model"][k], v.half() if v.is_floating_point() else v)
    both, cfg = load_trained(tmp_path / "pair.pth", CPU)
    one, one_cfg = load_trained(tmp_path / "one.pth", CPU)
    two, two_cfg = load_trained(tmp_path / "two.pth", CPU)
    expected = (probabilities(one, one_cfg, scan) + probabilities(two, two_cfg, scan)) / 2
    np.testing.assert_allclose(probabilities(both, cfg, scan), expected, rtol=0, atol=1e-12)
    # the whole path a user takes: classes from the pair's probabilities
    pred = segment_scan(both, load_scan(scan), cfg, CPU)
    assert pred.probs.shape == expected.shape and np.allclose(pred.probs, expected, atol=1e-12)
    # a file already holding a pair is not exported again (its second network would be lost)
    code, _, err = run_tool("export_model", tmp_path / "pair.pth", "--out", tmp_path / "again.pth")
    assert code != 0 and "pair.pth: already holds 2 averaged networks" in err.splitlines()[0]


def test_networks_that_cannot_be_averaged_are_refused_in_one_line(pair: tuple[Path, Path, Path],
                                                                  tmp_path: Path) -> None:
    coords, free, _ = pair
    other_classes = saved(tmp_path / "c33.pth", WITH_COORDS + ["data.num_classes=33", "model.num_classes=33"], 2)
    with pytest.raises(ConfigError, match=r"network 2 of the average has data.num_classes=33, the first 17"):
        load_trained(coords, CPU, average_with=[other_classes])
    code, _, err = run_tool("export_model", coords, "--average-with", other_classes, "--out", tmp_path / "x.pth")
    assert code != 0 and "num_classes=33" in err and not (tmp_path / "x.pth").exists()
    # a damaged second network names itself
    export_compact(load_checkpoint(coords), tmp_path / "pair.pth", average_with=[(load_checkpoint(free), {})])
    state = torch.load(tmp_path / "pair.pth", weights_only=True)
    key = next(k for k, v in state["average_with"][0]["model"].items() if v.is_floating_point())
    state["average_with"][0]["model"][key] = torch.full_like(state["average_with"][0]["model"][key], float("nan"))
    torch.save(state, tmp_path / "nan.pth")
    with pytest.raises(CheckpointError, match=r"nan.pth \(network 2 of 2\): weight .* NaN"):
        load_trained(tmp_path / "nan.pth", CPU)
    state["average_with"] = [{"config": state["config"]}]  # a network without weights
    torch.save(state, tmp_path / "empty.pth")
    with pytest.raises(CheckpointError, match=r"empty.pth: 'average_with' must be a list of networks, each with a 'model'"):
        load_trained(tmp_path / "empty.pth", CPU)


def test_test_tool_scores_an_average(pair: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """tools/test.py --average-with: each network built from its own stored config (no --set for the
    coordinate-free one), the files named in metrics.json."""
    coords, free, _ = pair
    samples = Path(__file__).resolve().parents[1] / "data" / "samples"
    config = tmp_path / "config.yaml"
    config.write_text("train:\n  device: cpu\n")
    code, out, err = run_tool("test", "--config", config, "--checkpoint", coords, "--average-with", free, "--split", "val",
                              "--set", f"data.root={samples}", "data.val_names=[MSN022_upper]", *WITH_COORDS,
                              "infer.graph_cut=false", "--out", tmp_path / "t")
    assert code == 0, err[-2000:]
    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    assert metrics["average_with"] == [str(free)] and metrics["infer"]["average_networks"] is True


def test_fine_tuning_from_a_pair_starts_from_its_first_network(pair: tuple[Path, Path, Path], tmp_path: Path) -> None:
    from pointmamba.training.trainer import Trainer

    from support.tiny import tiny_overrides

    coords, free, _ = pair
    export_compact(load_checkpoint(coords), tmp_path / "pair.pth", average_with=[(load_checkpoint(free), {})])
    synth = write_synthetic(tmp_path / "synth", count=3, vertices=2000)
    trainer = Trainer(load_config(None, tiny_overrides(synth, tmp_path / "w") + ["data.grid_size=0.6",
                                                                               f"train.init_from={tmp_path / 'pair.pth'}"]))
    try:
        first = load_checkpoint(tmp_path / "pair.pth")["model"]
        assert all(torch.equal(v, first[k].to(v.dtype)) for k, v in trainer.net.state_dict().items())
        assert "the first of its 2 averaged networks" in (tmp_path / "w" / "train.log").read_text()
    finally:
        trainer.close()
