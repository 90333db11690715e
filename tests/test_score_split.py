"""The split test loop as a library function (``pointmamba.evaluation.split_test.score_split``): called directly
on the sample scans, it gives the per-scan mIoU that ``pointmamba-test`` writes to per_scan.csv."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from support.tiny import TINY_MODEL, untrained_checkpoint
from support.tools import run_tool

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
SETS = [f"data.root={SAMPLES}", "data.val_names=[MSN021_lower,MSN022_upper]", "data.grid_size=0.6", *TINY_MODEL]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_score_split_matches_the_test_tool(tmp_path: Path) -> None:
    import torch

    from pointmamba.config import load_config
    from pointmamba.evaluation.split_test import score_split
    from pointmamba.inference.pipeline import load_trained
    from pointmamba.training.data_builders import build_dataset

    ckpt = untrained_checkpoint(tmp_path / "tiny.pth")
    config = tmp_path / "config.yaml"
    config.write_text("train:\n  device: cpu\n")
    code, _, err = run_tool("test", config, "--checkpoint", ckpt, "--split", "val", "--no-progress",
                            "--set", *SETS, "--out", tmp_path / "t")
    assert code == 0, err[-2000:]
    with open(tmp_path / "t" / "per_scan.csv", newline="") as f:
        written = {row["name"]: float(row["miou"]) for row in csv.DictReader(f)}

    device = torch.device("cpu")
    model, cfg = load_trained(ckpt, device, config=load_config(str(config), SETS))
    result = score_split(model, cfg, build_dataset(cfg, "val", train=False), device, progress=False)
    assert [r["name"] for r in result.rows] == ["MSN021_lower", "MSN022_upper"] == list(written)
    for row in result.rows:
        assert row["miou"] == written[row["name"]]  # the CSV holds the full repr: bit for bit
    assert result.overall["num_scans"] == 2 and result.summary["all"]["scans"] == 2
    assert result.confusion.matrix.sum() == sum(r["vertices"] for r in result.rows)
