"""Shared test fixtures: paths to the real scans beside the checkout, and a fixed thread count."""
from __future__ import annotations

import os
from pathlib import Path

from pointmamba.utils.cpu_runtime import tune_cpu_runtime

tune_cpu_runtime()  # as the tools do, before torch is imported

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# a checkout beside ../shared finds it; a worktree elsewhere names it with POINTMAMBA_SHARED_DATA
SHARED = Path(os.environ.get("POINTMAMBA_SHARED_DATA") or ROOT.parent / "shared" / "data")
SCANS = SHARED / "scans"
TEETH3DS_LABELS = SHARED / "teeth3ds-labels"

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def scans_dir() -> Path:
    """``../shared/data/scans``; tests that need it are skipped with a reason where it is absent."""
    if not SCANS.is_dir():
        pytest.skip(f"real scans not found at {SCANS} (../shared/data/scans beside the checkout)")
    return SCANS


@pytest.fixture(scope="session")
def teeth3ds_labels_dir() -> Path:
    if not TEETH3DS_LABELS.is_dir():
        pytest.skip(f"Teeth3DS label files not found at {TEETH3DS_LABELS}")
    return TEETH3DS_LABELS


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module: on 2 shared, loaded cores two OpenMP threads made a tiny training
    step 10-100x slower (spin-waiting under oversubscription); the behaviour tested does not depend on it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
