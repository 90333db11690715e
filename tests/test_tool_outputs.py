"""Where the tools write: atomically, never through a link planted in their output folder, and an output
folder that is a file or cannot be written is one line before any work, not a traceback after it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pointmamba import build_model
from pointmamba.config import load_config
from pointmamba.checkpoints.checkpoint import save_checkpoint

from support.tiny import tiny_overrides, write_synthetic
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """(an empty config file, an untrained tiny checkpoint, overrides for the synthetic set it fits)."""
    tmp = tmp_path_factory.mktemp("outputs")
    synth = write_synthetic(tmp / "synth")
    overrides = tiny_overrides(synth, tmp / "work") + ["infer.graph_cut=false", "infer.mirror_tta=false"]
    cfg = load_config(None, overrides)
    torch.manual_seed(0)
    ckpt = tmp / "tiny.pth"
    save_checkpoint({"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}}, ckpt)
    config = tmp / "empty.yaml"
    config.write_text("")
    return config, ckpt, overrides


def plant_links(out: Path, names: list[str], victim: Path) -> None:
    out.mkdir(parents=True)
    victim.write_text("precious")
    for name in names:
        (out / name).symlink_to(victim)


def test_test_tool_never_writes_through_a_planted_link(setup, tmp_path: Path) -> None:
    """tools/test.py wrote metrics.json and per_scan.csv through links planted in --out."""
    config, ckpt, overrides = setup
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    names = ["metrics.json", "per_scan.csv", "per_class.csv", "confusion.png"]
    plant_links(out, names, victim)
    code, _, err = run_tool("test", "--config", config, "--checkpoint", ckpt, "--split", "val", "--out", out,
                            "--set", *overrides)
    assert code == 0, err
    assert victim.read_bytes() == b"precious"
    assert not any((out / n).is_symlink() for n in names)
    assert json.loads((out / "metrics.json").read_text())["per_scan"][0]["name"] == "SYN00002_upper"


def test_plot_distances_never_writes_through_a_planted_link(setup, tmp_path: Path) -> None:
    config, _, overrides = setup
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    plant_links(out, ["distances.json", "distances_stage0.png"], victim)
    code, _, err = run_tool("plot_distances", "--config", config, "--out", out, "--split", "val", "--no-progress",
                            "--set", *overrides)
    assert code == 0, err
    assert victim.read_bytes() == b"precious"
    assert json.loads((out / "distances.json").read_text())["scans"] == 1


@pytest.mark.parametrize("tool", ["test", "plot_distances"])
def test_an_output_folder_that_cannot_be_one_is_one_line(setup, tmp_path: Path, tool: str) -> None:
    """--out that is a file, below a file, or where nothing can be created: FileExistsError /
    NotADirectoryError tracebacks before; one line now, before the model or the data are read."""
    config, ckpt, overrides = setup
    afile = tmp_path / "afile"
    afile.write_text("mine")
    extra = ["--checkpoint", ckpt, "--split", "val"] if tool == "test" else ["--split", "val", "--no-progress"]
    for out, message in ((afile, "is a file, not a directory"), (afile / "sub", f"{afile} is a file, not a directory"),
                         (Path("/proc/no/such/dir"), "cannot write in /proc")):
        code, _, err = run_tool(tool, "--config", config, "--out", out, *extra, "--set", *overrides)
        assert code == 2 and f"error: --out {out}" in err and message in err and "Traceback" not in err, err
    assert afile.read_text() == "mine"
