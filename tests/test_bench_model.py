"""bench/model.py's stage profile: every part of a training step is timed forward and backward, the parts
add up to no more than the step, and the hooks are gone afterwards."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture()
def bench_model(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setenv("POINTMAMBA_CPU_TUNING", "0")  # the process's malloc and OpenMP settings stay as they are
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("model", None)
    module = importlib.import_module("model")
    yield module
    sys.modules.pop("model", None)


def test_stage_profile_times_every_part_forward_and_backward(bench_model) -> None:  # noqa: ANN001
    from pointmamba.models.network import build_model

    torch.manual_seed(0)
    model = build_model({"enc_channels": [8, 16], "enc_depths": [1, 1], "dec_channels": [8], "dec_depths": [1],
                         "d_state": 4})
    coord, normal = bench_model.horseshoe_jaw(800, seed=0)
    labels = torch.randint(0, 17, (800,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        model.train()
        loss = torch.nn.functional.cross_entropy(model(bench_model.make_batch(coord, normal)), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    rows = bench_model.stage_profile(model, step, repeats=1)
    total = rows[-1]
    assert (total["stage"], total["part"]) == ("step", "total")
    parts = rows[:-1]
    assert [r["stage"] for r in parts] == ["stem", "enc0", "enc0", "enc0", "enc1", "enc1", "enc1", "enc1",
                                           "dec0", "dec0", "dec0", "dec0", "head"]
    kinds = {r["part"] for r in parts}
    assert {"RelPos", "Mamba block (LN + BiMamba)", "grid pooling", "unpooling + skip", "head"} <= kinds
    assert all(r["forward_s"] > 0 for r in parts)
    # every part but the stem (its input needs no gradient) has a timed backward
    assert all(r["backward_s"] > 0 for r in parts if r["stage"] != "stem")
    assert sum(r["forward_s"] + r["backward_s"] for r in parts) <= total["forward_s"]
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
