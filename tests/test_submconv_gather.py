"""The gathered sparse conv (``POINTMAMBA_BACKEND_SPCONV=gather``, ``ops/submconv_gather.py``) against the
dense ``F.conv3d`` float64 reference and against the rulebook conv, up to a network's training step."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pointmamba.ops import backends
from pointmamba.ops.backend import BackendError
from pointmamba.ops.submconv import neighbour_map, sparse_conv
from pointmamba.ops.submconv_gather import neighbour_table
from pointmamba.point.batch import PointBatch
from pointmamba.utils.op_count import OpCount

from support.dense_conv import dense_conv3d
from test_submconv import _random_sites


@pytest.fixture
def gather(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", "gather")


def _sites(seed: int, sizes: list[int], extent: int) -> tuple[torch.Tensor, torch.Tensor, PointBatch]:
    gen = torch.Generator().manual_seed(seed)
    grid, batch = _random_sites(gen, sizes, extent)
    return grid, batch, PointBatch(grid.double(), batch=batch, grid_coord=grid)


@pytest.mark.parametrize("k", [3, 5])
def test_matches_dense_conv3d_forward_and_grads(gather: None, k: int) -> None:
    grid, batch, point = _sites(k, [60, 25, 90], 7)
    gen = torch.Generator().manual_seed(10 + k)
    feat = torch.randn(len(grid), 3, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(4, k, k, k, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(4, generator=gen, dtype=torch.float64, requires_grad=True)
    out = sparse_conv(feat, point, weight, bias)
    ref = dense_conv3d(feat, grid, batch, weight, bias, (7, 7, 7))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad(out, (feat, weight, bias), g), torch.autograd.grad(ref, (feat, weight, bias), g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_gradcheck_small(gather: None) -> None:
    grid, _, point = _sites(0, [12, 9], 4)
    gen = torch.Generator().manual_seed(1)
    feat = torch.randn(len(grid), 2, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(3, 3, 3, 3, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f, w: sparse_conv(f, point, w), (feat, weight))


def test_duplicate_voxels_and_float32_match_the_rulebook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows sharing a voxel, float32 inputs: the same outputs and gradients as the rulebook conv."""
    gen = torch.Generator().manual_seed(3)
    grid, batch = _random_sites(gen, [200, 150], 9)
    rows = torch.cat([torch.arange(len(grid)), torch.randint(len(grid), (60,), generator=gen)])
    grid, batch = grid[rows], batch[rows]
    order = torch.argsort(batch, stable=True)
    grid, batch = grid[order], batch[order]
    feat = torch.randn(len(grid), 8, generator=gen)
    weight = torch.randn(6, 3, 3, 3, 8, generator=gen) * 0.1
    results = {}
    for name in ("torch", "gather"):
        monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", name)
        point = PointBatch(grid.float(), batch=batch, grid_coord=grid)
        f, w = feat.clone().requires_grad_(), weight.clone().requires_grad_()
        out = sparse_conv(f, point, w)
        out.backward(torch.ones_like(out))
        results[name] = (out.detach(), f.grad, w.grad)
    for a, b in zip(results["torch"], results["gather"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_table_is_the_rulebook_densified() -> None:
    """Every rulebook pair at its offset, the centre the site itself, ``num_sites`` elsewhere, and the
    symmetry the backward relies on: j at offset o of i exactly when i is at K^3 - 1 - o of j."""
    _, _, point = _sites(5, [40, 30], 5)
    nbr = neighbour_map(point, 3)
    table = neighbour_table(nbr)
    m = nbr.num_sites
    assert table.shape == (m, 27) and torch.equal(table[:, 13], torch.arange(m))
    filled = 0
    for o in range(27):
        s, e = nbr.pair_ptr[o], nbr.pair_ptr[o + 1]
        assert torch.equal(table[nbr.pair_out[s:e], o], nbr.pair_in[s:e])
        filled += e - s
    assert int((table < m).sum()) == filled + m
    i, o = (table < m).nonzero(as_tuple=True)
    assert torch.equal(table[table[i, o], 26 - o], i)
    assert neighbour_table(nbr) is table  # kept on the map


def test_few_ops_whatever_the_neighbours(gather: None) -> None:
    """The point of the backend: a conv's forward and backward dispatch a fixed handful of ops (the
    rulebook dispatches a matmul per filled offset, forward and twice backward)."""
    _, _, point = _sites(6, [300, 300], 8)
    neighbour_table(neighbour_map(point, 3))  # built once per batch, outside the count
    feat = torch.randn(len(point), 16, requires_grad=True)
    weight = torch.randn(16, 3, 3, 3, 16, requires_grad=True)
    with OpCount() as count:
        sparse_conv(feat, point, weight).sum().backward()
    assert sum(count.ops.values()) <= 40, count.ops
    assert count.ops["mm"] == 3 and "index_add_" not in count.ops  # no atomics on CUDA


def test_backend_is_chosen_only_when_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POINTMAMBA_BACKEND_SPCONV", raising=False)
    assert backends("cpu")["spconv"] == "torch"
    monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", "gather")
    assert backends("cpu")["spconv"] == "gather"
    monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", "gathered")
    with pytest.raises(BackendError, match="gather"):
        backends("cpu")


def test_network_training_step_matches_the_rulebook(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's path: the recipe's config -> preprocessed jaws -> its network; a training step's loss and
    every gradient the same under both backends (float32)."""
    from pointmamba.config import input_features, load_config
    from pointmamba.data import collate
    from pointmamba.data.dataset import make_item, preprocess_scan
    from pointmamba.data.synthetic import synthetic_jaw
    from pointmamba.models.network import build_model

    cfg = load_config("configs/shared_data_recipe.yaml")
    d = cfg["data"]
    items = [make_item(preprocess_scan(synthetic_jaw(seed, jaw, 3000)), name=jaw, num_classes=d["num_classes"],
                       grid_size=d["grid_size"], align=d["align"], mode="test", **input_features(d))
             for seed, jaw in ((1, "upper"), (2, "lower"))]
    results = {}
    for name in ("torch", "gather"):
        monkeypatch.setenv("POINTMAMBA_BACKEND_SPCONV", name)
        torch.manual_seed(0)
        model = build_model(cfg).train()
        batch = collate(items)
        loss = F.cross_entropy(model(batch).float(), batch.extra["segment"], ignore_index=-100)
        loss.backward()
        results[name] = (loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
    (loss_a, grads_a), (loss_b, grads_b) = results["torch"], results["gather"]
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-5, atol=1e-6)
    assert len(grads_a) == len(grads_b) > 100
    diff = sum(float((a - b).pow(2).sum()) for a, b in zip(grads_a, grads_b)) ** 0.5
    assert diff / sum(float(a.pow(2).sum()) for a in grads_a) ** 0.5 < 1e-4
