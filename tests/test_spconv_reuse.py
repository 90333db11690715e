"""The spconv path's cached indice pairs across grad modes.

spconv 2.3.8 builds a submanifold conv's backward pairs only in training mode
(``is_train=(not self.subm) or training`` in ``spconv/pytorch/conv.py``) and reuses whatever pairs the
tensor's ``indice_key`` holds. ``sparse_conv`` caches the spconv tensor per PointBatch, so one batch sent
through a model without grad and then with grad reused pairs without a backward half, and spconv's
backward failed ("!indices.empty() assert faild", seen on an H200 by bench/gpu_check.py). spconv imports
only with CUDA, so a stand-in with that one behaviour (pairs made without grad have no backward half; a
backward through them raises as spconv does) and a dense ``F.conv3d`` for the arithmetic takes its place.
"""
from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from pointmamba.ops import backend as backend_mod
from pointmamba.ops.submconv import SubMConv3d
from pointmamba.point.batch import PointBatch

from support.dense_conv import dense_conv3d


class StandInTensor:
    """spconv.SparseConvTensor's fields that ``sparse_conv`` uses."""

    def __init__(self, features, indices, spatial_shape, batch_size, indice_dict=None):  # noqa: ANN001
        self.features, self.indices, self.spatial_shape, self.batch_size = features, indices, spatial_shape, batch_size
        self.indice_dict = {} if indice_dict is None else indice_dict

    def replace_feature(self, features: torch.Tensor) -> StandInTensor:
        return StandInTensor(features, self.indices, self.spatial_shape, self.batch_size, self.indice_dict)


def _refuse_backward(grad: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("ConvMainUnitTest_matmul_split_Simt_f32f32f32_0.cu(208) !indices.empty() assert faild. error")


class StandInSubMConv3d(nn.Module):
    """spconv.SubMConv3d(cin, cout, k, bias=, indice_key=): KRSC weight, pairs kept under indice_key."""

    def __init__(self, cin: int, cout: int, k: int, bias: bool = True, indice_key: str | None = None):
        super().__init__()
        self.k, self.indice_key = k, indice_key
        self.weight = nn.Parameter(torch.zeros(cout, k, k, k, cin))
        self.bias = nn.Parameter(torch.zeros(cout)) if bias else None

    def forward(self, x: StandInTensor) -> StandInTensor:
        pairs = x.indice_dict.get(self.indice_key)
        if pairs is None:
            pairs = x.indice_dict[self.indice_key] = {"backward": self.training}
        out = dense_conv3d(x.features, x.indices[:, 1:].long(), x.indices[:, 0].long(), self.weight, self.bias,
                           x.spatial_shape)
        if out.requires_grad and not pairs["backward"]:
            out.register_hook(_refuse_backward)
        return x.replace_feature(out)


@pytest.fixture
def stand_in_spconv(monkeypatch):
    """``sparse_conv`` takes the spconv path on the CPU, into the stand-in."""
    module = types.SimpleNamespace(SubMConv3d=StandInSubMConv3d, SparseConvTensor=StandInTensor)
    monkeypatch.setattr(backend_mod, "_imports", {"spconv": (module, None)})
    real_choose = backend_mod.choose
    monkeypatch.setattr(backend_mod, "choose", lambda op, device: "spconv" if op == "spconv" else real_choose(op, device))


def _batch() -> PointBatch:
    g = torch.Generator().manual_seed(0)
    coord = torch.rand(300, 3, generator=g) * 6
    return PointBatch(coord, torch.randn(300, 4, generator=g), offset=torch.tensor([170, 300]), grid_size=0.5)


def test_stand_in_refuses_backward_through_pairs_made_without_grad(stand_in_spconv):
    conv = StandInSubMConv3d(4, 5, 3, indice_key="k")
    x = StandInTensor(torch.randn(3, 4), torch.tensor([[0, 1, 1, 1], [0, 1, 2, 1], [0, 3, 3, 3]]), [4, 4, 4], 1)
    with torch.no_grad():
        conv.eval()(x)
    out = conv.train()(x.replace_feature(torch.randn(3, 4, requires_grad=True)))
    with pytest.raises(RuntimeError, match="indices.empty"):
        out.features.sum().backward()


def test_a_batch_seen_without_grad_then_with_grad_trains(stand_in_spconv, monkeypatch):
    torch.manual_seed(0)
    conv = SubMConv3d(4, 5, 3)
    with torch.no_grad():
        nn.init.normal_(conv.weight)
        nn.init.normal_(conv.bias)
    point = _batch()
    with torch.no_grad():
        first = conv(point.feat, point)
    out = conv(point.feat, point)
    out.square().sum().backward()  # raised in spconv's backward before the cache was kept per grad mode
    assert torch.allclose(out, first)
    grads = conv.weight.grad.clone(), conv.bias.grad.clone()

    # the same numbers from our own rulebook conv on a fresh batch
    monkeypatch.setattr(backend_mod, "choose", lambda op, device: "torch")
    conv.zero_grad()
    point = _batch()
    ours = conv(point.feat, point)
    ours.square().sum().backward()
    assert torch.allclose(out, ours, atol=1e-5)
    assert torch.allclose(grads[0], conv.weight.grad, rtol=1e-4, atol=1e-4)
    assert torch.allclose(grads[1], conv.bias.grad, rtol=1e-4, atol=1e-4)
