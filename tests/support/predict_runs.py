"""What the tests of tools/predict.py share: a sample scan, an untrained model, the tool run in-process."""
from __future__ import annotations

from pathlib import Path

import pytest

from support.tiny import untrained_checkpoint
from support.tools import run_tool

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "MSN022" / "MSN022_upper.obj"
FAST = ("--set", "infer.graph_cut=false")
"""No graph cut: the plumbing under test does not depend on it, and it is the slowest step."""


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth")


def predict(ckpt: Path, *args) -> tuple[int, str, str]:
    """``tools/predict.py ARGS --checkpoint CKPT``: (exit status, stdout, stderr)."""
    return run_tool("predict", *args, "--checkpoint", ckpt)


def one_error_line(code: int, err: str) -> bool:
    """Exit 2 with exactly one ``error:`` line and no traceback."""
    return code == 2 and "Traceback" not in err and len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
