"""Checkpoints run no code: ours load with weights_only=True, a malicious pickle is refused before it runs."""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from pointmamba.config import load_config
from pointmamba.checkpoints.checkpoint import (CheckpointError, UnsafeCheckpointError, checkpoint_config, load_checkpoint,
                                               save_checkpoint, stored_config)
from pointmamba.inference.pipeline import load_trained
from pointmamba.training.seed import rng_state, set_rng_state, set_seed
from pointmamba.training.trainer import Trainer

from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


class _Shell:
    """Unpickling this calls os.system: what an attacker's .pth does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def malicious_checkpoint(path: Path, marker: Path) -> Path:
    torch.save({"model": _Shell(f"touch {marker}"), "config": {}}, path)
    return path


def test_rng_state_is_plain_data_and_round_trips(tmp_path: Path) -> None:
    set_seed(5)
    np.random.randn(7)  # leaves a cached Gaussian in NumPy's state
    torch.save({"rng": rng_state()}, tmp_path / "rng.pth")
    expected = (random.random(), np.random.randn(3).tolist(), torch.rand(2).tolist())
    state = torch.load(tmp_path / "rng.pth", weights_only=True)  # no allowlist: tensors and plain data only
    set_rng_state(state["rng"])
    assert (random.random(), np.random.randn(3).tolist(), torch.rand(2).tolist()) == expected


def test_old_checkpoint_with_numpy_rng_state_still_loads(tmp_path: Path) -> None:
    """Checkpoints written before the change pickled np.random.get_state(): NumPy arrays are allowed."""
    old = {"model": {}, "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}
    torch.save(old, tmp_path / "old.pth")
    state = load_checkpoint(tmp_path / "old.pth")
    set_rng_state(state["rng"])
    assert np.array_equal(state["rng"]["numpy"][1], old["rng"]["numpy"][1])


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = malicious_checkpoint(tmp_path / "evil.pth", marker)
    with pytest.raises(UnsafeCheckpointError, match=r"evil.pth: refused to load: its pickle calls posix.system"):
        load_checkpoint(evil)
    with pytest.raises(UnsafeCheckpointError):
        load_trained(evil, torch.device("cpu"))
    assert not marker.exists()

    # train --resume: the work dir's last.pth is the attacker's file
    work = tmp_path / "work"
    work.mkdir()
    malicious_checkpoint(work / "last.pth", marker)
    cfg = load_config(None, [f"work_dir={work}", f"data.root={tmp_path / 'nowhere'}"])
    with pytest.raises(UnsafeCheckpointError):
        Trainer(cfg, resume=True)
    assert not marker.exists()

    # predict: one clear line, exit 2, nothing run
    scan = tmp_path / "x_upper.obj"
    scan.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    code, _, err = run_tool("predict", scan, "--checkpoint", evil, "--out", tmp_path / "o")
    assert code == 2 and "refused to load" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
    assert not marker.exists()


def test_corrupt_and_foreign_files_still_get_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "zeros.pth").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match=r"zeros.pth: not a readable checkpoint"):
        load_checkpoint(tmp_path / "zeros.pth")
    save_checkpoint({"model": {"w": torch.ones(2)}}, tmp_path / "ok.pth")
    data = (tmp_path / "ok.pth").read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.pth: not a readable checkpoint"):
        load_checkpoint(tmp_path / "cut.pth")


# ------------------------------------------------------------------------------ crafted files with no code in them
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "MSN022" / "MSN022_upper.obj"


@pytest.fixture(scope="module")
def tiny_state() -> dict:
    from pointmamba import build_model

    from support.tiny import TINY_MODEL

    cfg = load_config(None, TINY_MODEL + ["data.grid_size=0.6"])
    torch.manual_seed(0)
    return {"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}}


def crafted(tiny_state: dict, path: Path, weights=None, **config_edits) -> Path:
    import copy

    state = copy.deepcopy(tiny_state)
    for name, fn in (weights or {}).items():
        state["model"][name] = fn(state["model"][name])
    for section, change in config_edits.items():
        if change is None:
            state["config"].pop(section)
        else:
            state["config"][section].update(change)
    save_checkpoint(state, path)
    return path


def test_non_finite_weights_are_refused_in_one_line(tiny_state: dict, tmp_path: Path) -> None:
    """NaN weights used to abort predict natively in the graph cut (GCException, exit code 134)."""
    first = next(k for k, v in tiny_state["model"].items() if v.is_floating_point())
    for value in (float("nan"), float("inf")):
        bad = crafted(tiny_state, tmp_path / "bad.pth", {first: lambda w, v=value: w * v})
        with pytest.raises(CheckpointError, match=rf"bad.pth: weight '{first}' holds \d+ NaN or infinite value"):
            load_checkpoint(bad)
    code, _, err = run_tool("predict", SAMPLE, "--checkpoint", bad, "--out", tmp_path / "o")
    assert code == 2 and "NaN or infinite" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("edits, message", [
    ({"model": {"enc_channels": [1e6, 1e6]}}, "'model.enc_channels' must be a list of integers in [1, 4096]"),
    ({"model": {"d_state": -3}}, "'model.d_state' must be in [1, 256], got -3"),
    ({"data": None}, "its stored config has no 'data' section"),
    ({"infer": {"graph_cut_smoothing": float("nan")}}, "'infer.graph_cut_smoothing' must be in [0, 1000]"),
])
def test_a_crafted_stored_config_is_checked_like_a_config_file(tiny_state: dict, tmp_path: Path, edits, message) -> None:
    """Before: a traceback (the first after allocating 3.2 GB for a million channels per stage)."""
    bad = crafted(tiny_state, tmp_path / "crafted.pth", **edits)
    with pytest.raises(CheckpointError) as info:
        load_trained(bad, torch.device("cpu"))
    assert str(info.value).startswith(f"{bad}: ") and message in str(info.value) and "\n" not in str(info.value)
    code, _, err = run_tool("predict", SAMPLE, "--checkpoint", bad, "--out", tmp_path / "o")
    assert code == 2 and message in err and "Traceback" not in err


def test_resume_from_a_model_file_names_what_is_missing(tiny_state: dict, tmp_path: Path) -> None:
    """A compact model file (weights and config only) as last.pth: before, a KeyError traceback."""
    from pointmamba.training.trainer import Trainer as Train

    from support.tiny import tiny_overrides, write_synthetic

    synth = write_synthetic(tmp_path / "synth")
    work = tmp_path / "w"
    cfg = load_config(None, tiny_overrides(synth, work))
    work.mkdir()
    save_checkpoint({"model": tiny_state["model"], "config": cfg}, work / "last.pth")
    with pytest.raises(CheckpointError, match=r"last.pth: cannot resume from it: no 'optimizer' entry"):
        Train(cfg, resume=True)


def test_export_never_replaces_its_input_or_an_existing_file(tiny_state: dict, tmp_path: Path) -> None:
    """export_model --out equal to its checkpoint replaced the training checkpoint; any file was overwritten."""
    ckpt = crafted(tiny_state, tmp_path / "run.pth")
    before = ckpt.read_bytes()
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    link = tmp_path / "link.pth"
    link.symlink_to(ckpt)
    for out, message in ((ckpt, "is the input"), (link, "is the input"), (other, "exists: pass --overwrite"),
                         (tmp_path, "is a directory"), (other / "m.pth", "is a file, not a directory")):
        code, _, err = run_tool("export_model", ckpt, "--out", out)
        assert code == 2 and message in err and "Traceback" not in err, err
    code, _, err = run_tool("export_model", ckpt, "--out", link, "--overwrite")  # not even when asked
    assert code == 2 and "is the input" in err
    assert ckpt.read_bytes() == before and other.read_text() == "mine"
    code, _, err = run_tool("export_model", ckpt, "--out", other, "--overwrite")
    assert code == 0 and load_checkpoint(other)["format"] == "pointmamba-compact-1"


def test_an_inference_option_unknown_to_this_version_is_ignored_with_a_warning(tiny_state: dict,
                                                                             tmp_path: Path) -> None:
    """A run trained while an infer option existed that was later removed could not be loaded at all
    ("unknown config key 'infer.numbering_fragment_width'"); its network is as good as ever."""
    old = crafted(tiny_state, tmp_path / "old.pth", infer={"numbering_fragment_width": 3.0, "graph_cut_smoothing": 2.0})
    with pytest.warns(UserWarning, match=r"old.pth: .*ignored: infer.numbering_fragment_width$"):
        model, cfg = load_trained(old, torch.device("cpu"))
    assert "numbering_fragment_width" not in cfg["infer"] and cfg["infer"]["graph_cut_smoothing"] == 2.0
    # elsewhere an unknown key is still an error: it may be a fact of the training
    bad = crafted(tiny_state, tmp_path / "bad.pth", model={"mixer_kind": "attention"})
    with pytest.raises(CheckpointError, match=r"unknown config key 'model.mixer_kind'"):
        load_trained(bad, torch.device("cpu"))


def test_an_input_mismatch_names_the_data_switches_that_mend_it(tiny_state: dict, tmp_path: Path) -> None:
    """A coordinate-free checkpoint under a config with coordinates said only "model.in_channels:
    checkpoint 3, config 6": the fix is a data switch, and the error now gives it, whole and working."""
    import re

    from pointmamba import build_model

    from support.tiny import TINY_MODEL, tiny_overrides, write_synthetic

    free = load_config(None, TINY_MODEL + ["data.grid_size=0.6", "data.coord_feature=false", "model.in_channels=3"])
    ckpt = tmp_path / "free.pth"
    save_checkpoint({"model": build_model(free).state_dict(), "config": {k: v for k, v in free.items() if k[0] != "_"}},
                    ckpt)
    with_coords = TINY_MODEL + ["data.grid_size=0.6"]
    with pytest.raises(CheckpointError) as info:
        load_trained(ckpt, torch.device("cpu"), config=load_config(None, with_coords))
    message = str(info.value)
    assert "model.in_channels: checkpoint 3, config 6" in message and "\n" not in message
    sets = re.search(r"--set (.*)\)$", message).group(1).split()
    assert sets == ["data.jaw_feature=false", "data.coord_feature=false", "model.in_channels=3"]
    model, cfg = load_trained(ckpt, torch.device("cpu"), config=load_config(None, with_coords + sets))
    assert model.in_channels == 3 and cfg["data"]["coord_feature"] is False
    # fine-tuning from it names the same switches
    synth = write_synthetic(tmp_path / "synth")
    cfg = load_config(None, tiny_overrides(synth, tmp_path / "w") + [f"train.init_from={ckpt}"])
    with pytest.raises(ValueError, match=re.escape("--set " + " ".join(sets))):
        Trainer(cfg)


def test_the_config_alone_is_read_as_the_whole_file_gives_it_and_bad_files_fail_alike(tiny_state: dict,
                                                                                      tmp_path: Path) -> None:
    """predict reads the stored config before the network (mapped, the weights unread): the same config as a
    full load, for a zip file and a pre-zip one torch cannot map, and the same one-line refusals."""
    path = crafted(tiny_state, tmp_path / "ok.pth")
    assert stored_config(path) == checkpoint_config(load_checkpoint(path), path)
    legacy = tmp_path / "legacy.pth"
    torch.save(tiny_state, legacy, _use_new_zipfile_serialization=False)
    assert stored_config(legacy) == checkpoint_config(load_checkpoint(path), path)

    marker = tmp_path / "pwned"
    with pytest.raises(UnsafeCheckpointError, match=r"evil.pth: refused to load"):
        stored_config(malicious_checkpoint(tmp_path / "evil.pth", marker))
    assert not marker.exists()
    (tmp_path / "zeros.pth").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match=r"zeros.pth: not a readable checkpoint"):
        stored_config(tmp_path / "zeros.pth")
    data = path.read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.pth: not a readable checkpoint"):
        stored_config(tmp_path / "cut.pth")
    with pytest.raises(CheckpointError, match=r"checkpoint not found: .*absent.pth"):
        stored_config(tmp_path / "absent.pth")
