"""Out-of-range settings and unknown devices are reported by their key, in one line."""
from __future__ import annotations

import pytest
import torch

from pointmamba.config import ConfigError, load_config
from pointmamba.utils.device import DeviceError, resolve_device

from support.tools import run_tool


@pytest.mark.parametrize("item, message", [
    ("train.batch_size=0", "'train.batch_size' must be >= 1, got 0"),
    ("train.lr=-1", "'train.lr' must be > 0, got -1"),
    ("train.lr=.nan", "'train.lr' must be > 0, got nan"),
    ("train.epochs=0", "'train.epochs' must be in [1, 100000], got 0"),
    ("train.label_smoothing=1.5", "'train.label_smoothing' must be in [0, 1], got 1.5"),
    ("train.betas=[0.9, 1.0]", "'train.betas' must be two numbers in [0, 1)"),
    ("data.max_points=0", "'data.max_points' must be >= 1, got 0"),
    ("data.grid_size=-0.2", "'data.grid_size' must be >= 0, got -0.2"),
    ("train.epochs=100000000000000000000000", "'train.epochs' must be in [1, 100000], got 100000000000000000000000"),
    ("seed=4294967296", "'seed' must be in [0, 4294967295]"),
    ("data.num_classes=16", "model.num_classes (17) must equal data.num_classes (16)"),
    # inference: NaN / huge smoothing hung the graph cut, NaN width weight predicted two teeth, [] crashed
    ("infer.graph_cut_smoothing=.nan", "'infer.graph_cut_smoothing' must be in [0, 1000], got nan"),
    ("infer.graph_cut_smoothing=1e308", "'infer.graph_cut_smoothing' must be in [0, 1000], got 1e+308"),
    ("infer.tta_angles=[]", "'infer.tta_angles' must be a list of 1 to 64 angles in [-360, 360] degrees"),
    ("infer.tta_angles=[0, .inf]", "'infer.tta_angles' must be a list of 1 to 64 angles"),
    ("infer.tta_angles=[a]", "'infer.tta_angles' must be a list of 1 to 64 angles"),
    # the model: keys a crafted checkpoint used to allocate gigabytes or crash with
    ("model.enc_channels=[1e6, 1e6]", "'model.enc_channels' must be a list of integers in [1, 4096], got [1000000.0, 1000000.0]"),
    ("model.d_state=-3", "'model.d_state' must be in [1, 256], got -3"),
    ("model.relpos.max_rel_dist=.nan", "'model.relpos.max_rel_dist' must be in (0, 1000000.0], got nan"),
])
def test_out_of_range_values_name_the_key(item: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [item])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_defaults_and_null_settings_pass() -> None:
    load_config(None, ["data.max_points=null", "train.max_steps_per_epoch=null", "data.grid_size=0"])
    load_config(None, ["infer.tta_angles=[0, 90, -90]", "infer.graph_cut_smoothing=0", "model.d_state=16"])


def test_a_network_too_large_to_build_is_refused_before_building() -> None:
    """Each key in range, together 4 stages of 4096 channels x 64 blocks: about 1.7e11 parameters."""
    with pytest.raises(ConfigError, match=r"ask for a network of about [\d,]+ parameters \(at most 500,000,000\)"):
        load_config(None, ["model.enc_channels=[4096,4096,4096,4096]", "model.enc_depths=[64,64,64,64]"])
    from pointmamba import build_model
    from pointmamba.config_ranges import estimated_parameters
    from pointmamba.models.network import count_parameters

    cfg = load_config(None)  # the estimate is of the right size: the default network
    assert 0.9 < estimated_parameters(cfg["model"]) / count_parameters(build_model(cfg)) < 1.2


def test_predict_set_is_range_checked_before_any_work(tmp_path) -> None:
    """--set infer.graph_cut_smoothing=.nan made predict hang forever (the graph cut never converged)."""
    from pointmamba.cli._common import infer_overrides
    from pointmamba.config import resolve_infer

    assert resolve_infer(None)["graph_cut_smoothing"] == 3.0 and infer_overrides([]) == {}
    with pytest.raises(ConfigError, match=r"--set: config key 'infer.tta_angles' must be a list"):
        infer_overrides(["infer.tta_angles=[]"])
    with pytest.raises(ConfigError, match=r"infer: config key 'infer.numbering_fragment_cost' must be in"):
        resolve_infer({"numbering_fragment_cost": float("nan")})
    from pointmamba import Segmenter

    with pytest.raises(ConfigError, match=r"'infer.graph_cut_smoothing' must be in \[0, 1000\], got nan"):
        Segmenter(infer={"graph_cut_smoothing": float("nan")})  # the Python API, before the model loads
    code, _, err = run_tool("predict", tmp_path / "none_upper.obj", "--out", tmp_path / "o",
                            "--set", "infer.graph_cut_smoothing=.nan")
    assert code == 2 and "'infer.graph_cut_smoothing' must be in [0, 1000], got nan" in err and "Traceback" not in err


def test_graph_cut_refuses_what_overflows_its_integer_costs() -> None:
    """The graph cut itself (a library caller's path): NaN smoothing cast to int32 gave costs of -2^31,
    on which alpha-expansion never ended; NaN probabilities aborted the GCO library natively."""
    import numpy as np

    from pointmamba.inference.graph_cut import graph_cut

    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0.5]], dtype=np.float64)
    f = np.array([[0, 1, 2], [1, 3, 2]])
    n = np.tile([0.0, 0.0, 1.0], (4, 1))
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8]])
    for smoothing in (float("nan"), 1e308, -1.0):
        with pytest.raises(ValueError, match="smoothing must be in"):
            graph_cut(p, v, f, n, smoothing=smoothing)
    with pytest.raises(ValueError, match="NaN or infinite"):
        graph_cut(np.full_like(p, np.nan), v, f, n, smoothing=1.0)
    assert graph_cut(p, v, f, n, smoothing=0.01).tolist() == [0, 0, 1, 1]  # valid input: still runs


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
