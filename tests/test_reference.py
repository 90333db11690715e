"""Refactors keep behaviour: a tiny seeded run trains the reference weights, an old checkpoint predicts the same.

The reference (``tests/fixtures/reference_*``, written by ``tests/support/reference_run.py``) was recorded
from the code before the issue-16 cleanup; the checkpoint predates the warm-up state being buffers.

Float bits depend on the CPU (torch and numba pick kernels by the instruction set, MKL/oneDNN by vendor),
so the run is compared two ways:
- **within tolerances, on any CPU**, against the floats in ``reference_arrays.pt``. The bounds come from
  the same run with every kernel path this project's CPUs take, measured on one Intel Xeon (AVX-512) with
  ``ATEN_CPU_CAPABILITY`` = default / avx2 / avx512, ``NUMBA_CPU_NAME=generic``, and an AMD-like setting
  (avx2, oneDNN and MKL limited to AVX2, ``NUMBA_CPU_NAME=znver3``). Largest differences between any two:
  weights 3.8e-5 (Adam divides tiny gradients by their own size, so rounding in them reaches the update),
  probabilities 6.7e-8. The bounds are 10x and 150x those: ``WEIGHTS_ATOL`` 4e-4, ``PROBS_ATOL`` 1e-5.
  A real change of behaviour lies far outside: a learning rate 1 % higher moves the weights by 1.5e-2.
- **bit for bit**, only on a CPU whose signature is recorded in ``reference_run.json``; elsewhere these
  checks skip and say which signature they saw. ``POINTMAMBA_CPU_SIGNATURE=unknown make test`` runs the
  suite as an unrecorded CPU would.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from support.reference_run import (ARRAYS, CHECKPOINT, RECORD, machine_signature, predict_probs, recorded_hashes,
                                   train_tiny, weights_sha256)

pytestmark = pytest.mark.usefixtures("one_thread")
REFERENCE = json.loads(RECORD.read_text())
WEIGHTS_ATOL = 4e-4
PROBS_ATOL = 1e-5
same_torch = pytest.mark.skipif(torch.__version__ != REFERENCE["torch"],
                                reason=f"reference recorded with torch {REFERENCE['torch']} (bit-exact floats)")


def bits_recorded() -> dict:
    """This CPU's recorded hashes; skips the test where bits were never recorded for it."""
    hashes = recorded_hashes(REFERENCE)
    if hashes is None:
        pytest.skip(f"bit-exact floats recorded only for {[m['signature'] for m in REFERENCE['machines']]}, "
                    f"not for this CPU ({machine_signature()}); the tolerance checks cover it")
    return hashes


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    tmp = tmp_path_factory.mktemp("reference")
    return tmp / "synth", train_tiny(tmp / "synth", tmp / "work")


@pytest.fixture(scope="module")
def arrays() -> dict:
    return torch.load(ARRAYS, weights_only=True)


def test_tiny_seeded_run_gives_the_reference_weights_within_tolerance(run, arrays) -> None:
    state = run[1].state_dict()
    assert set(REFERENCE["keys"]) <= set(state), "weights renamed: old checkpoints would no longer load"
    worst = {k: (state[k].float() - ref).abs().max().item() for k, ref in arrays["weights"].items()}
    key = max(worst, key=worst.get)
    assert worst[key] <= WEIGHTS_ATOL, f"{key} differs by {worst[key]:.2e} (> {WEIGHTS_ATOL:.0e})"


# the old checkpoint stores infer.tooth_decoding=True, retired since: loading it says so (asserted below)
def test_old_checkpoint_predicts_as_before_within_tolerance(run, arrays) -> None:
    with pytest.warns(UserWarning, match=r"retired option\(s\), now ignored: infer\.tooth_decoding=True \(retired after tag pre-renovation \(commit 483fb29\)"):
        probs = torch.as_tensor(predict_probs(CHECKPOINT, run[0])).float()
    assert list(probs.shape) == REFERENCE["probs_shape"]
    assert (probs - arrays["probs"]).abs().max().item() <= PROBS_ATOL


@same_torch
def test_tiny_seeded_run_gives_the_reference_weights_bit_for_bit(run) -> None:
    expected = bits_recorded()
    assert weights_sha256(run[1].state_dict(), REFERENCE["keys"]) == expected["weights_sha256"]


@same_torch
def test_old_checkpoint_predicts_as_before_bit_for_bit(run) -> None:
    expected = bits_recorded()
    with pytest.warns(UserWarning, match=r"infer\.tooth_decoding=True"):
        probs = predict_probs(CHECKPOINT, run[0])
    assert hashlib.sha256(probs.tobytes()).hexdigest() == expected["probs_sha256"]


def test_an_unrecorded_cpu_gets_no_hashes_to_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug this replaces: an unknown CPU fell back to another CPU's hashes and failed."""
    monkeypatch.setenv("POINTMAMBA_CPU_SIGNATURE", "SomeVendor | a CPU never seen | AVX2")
    assert machine_signature() == "SomeVendor | a CPU never seen | AVX2"
    assert recorded_hashes(REFERENCE) is None


def test_old_checkpoint_loads_in_its_warmup_state() -> None:
    from pointmamba.inference.pipeline import load_trained

    with pytest.warns(UserWarning, match=r"infer\.tooth_decoding=True"):
        model, _ = load_trained(CHECKPOINT, torch.device("cpu"))
    factor = REFERENCE["warmup_factor"]
    assert all(bool(m.enabled) == (factor > 0) and float(m.ramp) == factor for _, m in model.relpos_modules())
