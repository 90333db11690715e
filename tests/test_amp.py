"""bf16 autocast, the CUDA training path (train.amp), run here with the CPU's autocast.

Autocast runs the Mamba block's projections in bf16 while our autograd Functions saved their float32
inputs; their backward then mixed float32 and bf16 matmul operands and raised (found by
bench/gpu_check.py's bf16 rows), so AMP training on CUDA could not have taken one step.
"""
from __future__ import annotations

import torch

from pointmamba import build_model
from pointmamba.models.mamba import Mamba
from pointmamba.point.batch import PointBatch


def _block_grads(block: Mamba, x: torch.Tensor, amp: bool) -> list[torch.Tensor]:
    block.zero_grad()
    xs = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        y = block(xs)
    (y.float() * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return [y.detach().float(), xs.grad] + [p.grad.clone() for p in block.parameters()]


def test_mamba_block_backward_under_bf16_autocast_matches_float32(one_thread):
    torch.manual_seed(0)
    block = Mamba(d_model=32, d_state=8)
    x = torch.randn(2, 128, 32)
    want = _block_grads(block, x, amp=False)
    got = _block_grads(block, x, amp=True)
    for (name, param), g, w in zip([("y", None), ("x", None)] + list(block.named_parameters()), got, want):
        assert g.dtype == (param.dtype if param is not None else g.dtype)
        assert torch.isfinite(g).all(), name
        rel = float((g.double() - w.double()).norm() / w.double().norm())
        assert rel < 0.05, f"{name}: relative error {rel:.3g} under bf16 autocast"


def test_network_training_step_under_bf16_autocast(one_thread):
    torch.manual_seed(0)
    model = build_model({"enc_channels": [16, 32], "enc_depths": [1, 1], "dec_channels": [16], "dec_depths": [1],
                         "drop_path": 0.0, "shuffle_orders": False})
    g = torch.Generator().manual_seed(1)
    coord = torch.rand(600, 3, generator=g) * 20
    point = PointBatch(coord, torch.cat([coord / 20, torch.randn(600, 3, generator=g)], 1), grid_size=0.5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(point)
    loss = torch.nn.functional.cross_entropy(logits.float(), torch.randint(0, 17, (600,), generator=g))
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert any("mixer" in n or "mamba" in n for n in grads)
    for name, grad in grads.items():
        assert grad.dtype == torch.float32 and torch.isfinite(grad).all(), name
