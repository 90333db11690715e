"""The shipped model: compact format, default of the tools, and its accuracy on a scan it did not train on."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.checkpoints.shipped import DEFAULT_MODEL, FORMAT, resolve_checkpoint

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_shipped_model_is_small_and_loads_without_pickle_code() -> None:
    assert DEFAULT_MODEL.is_file() and DEFAULT_MODEL.stat().st_size < 30 * 2**20
    state = torch.load(DEFAULT_MODEL, map_location="cpu", weights_only=True)
    assert state["format"] == FORMAT
    assert all(v.dtype != torch.float32 for v in state["model"].values())  # float16 weights
    # two networks averaged at inference: the recipe, and the recipe without the coordinates as input
    (second,) = state["average_with"]
    assert all(v.dtype != torch.float32 for v in second["model"].values())
    assert state["config"]["model"]["in_channels"] == 7 and second["config"]["model"]["in_channels"] == 4
    assert second["config"]["data"]["coord_feature"] is False
    assert resolve_checkpoint(None) == DEFAULT_MODEL == resolve_checkpoint("pretrained")


def test_shipped_model_segments_a_real_scan() -> None:
    """A regression check on MSN021_lower (a training scan of the shipped model: accuracy 0.90 when exported)."""
    from pointmamba.data import load_scan
    from pointmamba.inference.pipeline import load_trained, segment_scan

    from pointmamba.inference.averaged_networks import AveragedNetworks

    scan = load_scan(ROOT / "data" / "samples" / "MSN021" / "MSN021_lower.obj")
    model, cfg = load_trained(DEFAULT_MODEL, torch.device("cpu"))
    assert isinstance(model, AveragedNetworks) and len(model) == 2
    for average in (True, False):  # the pair, and its first network alone (infer.average_networks: false)
        cfg["infer"]["average_networks"] = average
        pred = segment_scan(model, scan, cfg, torch.device("cpu"))
        accuracy = float((pred.fdi == scan.labels).mean())
        assert accuracy >= ACCURACY_MSN021_LOWER, (average, accuracy)
        assert set(np.unique(pred.fdi)) <= {0, *range(31, 39), *range(41, 49)}


def test_fine_tune_starts_from_the_shipped_weights(tmp_path: Path) -> None:
    """From the file's first network (the one the configs' 7-channel input fits)."""
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer

    cfg = load_config(ROOT / "configs" / "demo_finetune.yaml",
                      [f"work_dir={tmp_path / 'w'}", f"data.root={ROOT / 'data' / 'samples'}", f"data.cache_dir={tmp_path / 'c'}", "train.progress=false"])
    trainer = Trainer(cfg)
    shipped = torch.load(DEFAULT_MODEL, map_location="cpu", weights_only=True)["model"]
    for name, value in trainer.net.state_dict().items():
        torch.testing.assert_close(value, shipped[name].to(value.dtype))
    trainer.close()


ACCURACY_MSN021_LOWER = 0.85


def test_export_compact_round_trip(tmp_path: Path) -> None:
    """A training checkpoint exported as float16 loads through load_trained and predicts the same classes."""
    from pointmamba import build_model
    from pointmamba.config import load_config
    from pointmamba.data import collate, load_scan
    from pointmamba.data.dataset import make_item, preprocess_scan
    from pointmamba.inference.pipeline import load_trained
    from pointmamba.checkpoints.shipped import export_compact

    from support.tiny import TINY_MODEL

    cfg = load_config(None, TINY_MODEL + ["data.grid_size=0.6"])
    torch.manual_seed(0)
    net = build_model(cfg).eval()
    state = {"model": net.state_dict(), "config": {k: v for k, v in cfg.items() if not k.startswith("_")},
             "hooks": {"warmup": {"factor": 1.0}}, "optimizer": {"unused": torch.zeros(3)}, "epoch": 3}
    path = export_compact(state, tmp_path / "m.pth")
    assert "optimizer" not in torch.load(path, weights_only=True)
    loaded, _ = load_trained(path, torch.device("cpu"))
    scan = load_scan(ROOT / "data" / "samples" / "MSN022" / "MSN022_upper.obj")
    item = make_item(preprocess_scan(scan), scan.name, 17, 0.6)
    with torch.no_grad():
        a = net(collate([item])).argmax(1)
        b = loaded(collate([item])).argmax(1)
    assert (a == b).float().mean() > 0.99


def test_shipped_model_uses_the_current_inference_defaults() -> None:
    from pointmamba.inference.config import INFER_DEFAULTS
    from pointmamba.inference.config import infer_options

    state = torch.load(DEFAULT_MODEL, map_location="cpu", weights_only=True)
    assert "infer" not in state["config"] and "infer" not in state["average_with"][0]["config"]  # chosen at prediction time
    assert infer_options(state["config"]) == INFER_DEFAULTS
