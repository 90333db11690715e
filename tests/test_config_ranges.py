"""Out-of-range settings and unknown devices are reported by their key, in one line."""
from __future__ import annotations

import pytest
import torch

from pointmamba.config import ConfigError, load_config
from pointmamba.device import DeviceError, resolve_device

from support.tools import run_tool


@pytest.mark.parametrize("item, message", [
    ("train.batch_size=0", "'train.batch_size' must be >= 1, got 0"),
    ("train.lr=-1", "'train.lr' must be > 0, got -1"),
    ("train.lr=.nan", "'train.lr' must be > 0, got nan"),
    ("train.epochs=0", "'train.epochs' must be >= 1, got 0"),
    ("train.label_smoothing=1.5", "'train.label_smoothing' must be in [0, 1], got 1.5"),
    ("train.betas=[0.9, 1.0]", "'train.betas' must be two numbers in [0, 1)"),
    ("data.max_points=0", "'data.max_points' must be >= 1, got 0"),
    ("data.grid_size=-0.2", "'data.grid_size' must be >= 0, got -0.2"),
])
def test_out_of_range_values_name_the_key(item: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [item])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_defaults_and_null_settings_pass() -> None:
    load_config(None, ["data.max_points=null", "train.max_steps_per_epoch=null", "data.grid_size=0"])


def test_device_names_are_checked() -> None:
    with pytest.raises(DeviceError, match=r"--device='gpu0' is not a device: use auto, cpu, cuda"):
        resolve_device("gpu0", "--device")
    with pytest.raises(DeviceError, match="only cpu and cuda"):
        resolve_device("meta")
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match=r"train.device='cuda' but no CUDA device is available"):
            resolve_device("cuda")


def test_train_cli_reports_the_key(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  batch_size: 0\n")
    code, _, err = run_tool("train", "--config", cfg, "--work-dir", tmp_path / "w")
    assert code == 2 and "'train.batch_size' must be >= 1, got 0" in err and "Traceback" not in err
