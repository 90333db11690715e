"""Refactors keep behaviour: a tiny seeded run trains bit-identical weights, an old checkpoint predicts the same.

The reference (``tests/fixtures/reference_*``, written by ``tests/support/reference_run.py``) was recorded
from the code before the issue-16 cleanup; the checkpoint predates the warm-up state being buffers.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from support.reference_run import CHECKPOINT, RECORD, expected_hashes, predict_probs, train_tiny, weights_sha256

pytestmark = pytest.mark.usefixtures("one_thread")
REFERENCE = json.loads(RECORD.read_text())
EXPECTED = expected_hashes(REFERENCE)  # float bits depend on the CPU too (see support/reference_run.py)
same_torch = pytest.mark.skipif(torch.__version__ != REFERENCE["torch"],
                                reason=f"reference recorded with torch {REFERENCE['torch']} (bit-exact floats)")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    tmp = tmp_path_factory.mktemp("reference")
    return tmp / "synth", train_tiny(tmp / "synth", tmp / "work")


@same_torch
def test_tiny_seeded_run_gives_the_reference_weights(run: tuple[Path, torch.nn.Module]) -> None:
    state = run[1].state_dict()
    assert set(REFERENCE["keys"]) <= set(state), "weights renamed: old checkpoints would no longer load"
    assert weights_sha256(state, REFERENCE["keys"]) == EXPECTED["weights_sha256"]


@same_torch
def test_old_checkpoint_predicts_as_before(run: tuple[Path, torch.nn.Module]) -> None:
    probs = predict_probs(CHECKPOINT, run[0])
    assert list(probs.shape) == REFERENCE["probs_shape"]
    assert hashlib.sha256(probs.tobytes()).hexdigest() == EXPECTED["probs_sha256"]


def test_old_checkpoint_loads_in_its_warmup_state() -> None:
    from pointmamba.evaluation.inference import load_trained

    model, _ = load_trained(CHECKPOINT, torch.device("cpu"))
    factor = REFERENCE["warmup_factor"]
    assert all(bool(m.enabled) == (factor > 0) and float(m.ramp) == factor for _, m in model.relpos_modules())
