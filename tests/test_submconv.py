"""Our submanifold conv against a dense ``F.conv3d`` float64 reference (values and gradients)."""
from __future__ import annotations

import pytest
import torch

from pointmamba.ops.submconv import SubMConv3d, build_neighbour_map, neighbour_map, sparse_conv
from pointmamba.point.batch import PointBatch

from support.dense_conv import dense_conv3d


def _random_sites(gen: torch.Generator, sizes: list[int], extent: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique voxels per sample (several samples whose grids overlap, so crossing would show)."""
    coords, batch = [], []
    for b, n in enumerate(sizes):
        flat = torch.randperm(extent**3, generator=gen)[:n]
        coords.append(torch.stack([flat // extent**2, (flat // extent) % extent, flat % extent], 1))
        batch.append(torch.full((n,), b))
    return torch.cat(coords), torch.cat(batch)


@pytest.mark.parametrize("k", [3, 5])
def test_matches_dense_conv3d_forward_and_grads(k: int) -> None:
    gen = torch.Generator().manual_seed(k)
    extent, sizes, cin, cout = 7, [60, 25, 90], 3, 4
    grid, batch = _random_sites(gen, sizes, extent)
    perm = torch.randperm(len(grid), generator=gen)  # rows need not be sorted within a sample
    order = torch.argsort(batch[perm], stable=True)
    grid, batch = grid[perm][order], batch[perm][order]
    point = PointBatch(grid.double(), batch=batch, grid_coord=grid)
    feat = torch.randn(len(grid), cin, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(cout, k, k, k, cin, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(cout, generator=gen, dtype=torch.float64, requires_grad=True)
    out = sparse_conv(feat, point, weight, bias)
    ref = dense_conv3d(feat, grid, batch, weight, bias, (extent,) * 3)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad(out, (feat, weight, bias), g)
    grads_ref = torch.autograd.grad(ref, (feat, weight, bias), g)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_gradcheck_small() -> None:
    gen = torch.Generator().manual_seed(0)
    grid, batch = _random_sites(gen, [12, 9], 4)
    point = PointBatch(grid.double(), batch=batch, grid_coord=grid)
    feat = torch.randn(len(grid), 2, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(3, 3, 3, 3, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f, w: sparse_conv(f, point, w), (feat, weight))


def test_samples_never_mix() -> None:
    """Two samples on the very same voxels: each output depends on its own sample only."""
    gen = torch.Generator().manual_seed(1)
    grid, _ = _random_sites(gen, [40], 5)
    both = torch.cat([grid, grid])
    batch = torch.cat([torch.zeros(40), torch.ones(40)]).long()
    feat = torch.cat([torch.randn(40, 2, generator=gen, dtype=torch.float64), torch.zeros(40, 2, dtype=torch.float64)])
    weight = torch.randn(2, 3, 3, 3, 2, generator=gen, dtype=torch.float64)
    out = sparse_conv(feat, PointBatch(both.double(), batch=batch, grid_coord=both), weight)
    assert torch.equal(out[40:], torch.zeros(40, 2, dtype=torch.float64))
    alone = sparse_conv(feat[:40], PointBatch(grid.double(), grid_coord=grid), weight)
    torch.testing.assert_close(out[:40], alone)


def test_duplicate_voxels_act_as_one_site() -> None:
    gen = torch.Generator().manual_seed(2)
    grid, _ = _random_sites(gen, [30], 5)
    dup = torch.cat([grid, grid[:10]])
    feat = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    weight = torch.randn(2, 3, 3, 3, 3, generator=gen, dtype=torch.float64)
    out = sparse_conv(feat, PointBatch(dup.double(), grid_coord=dup), weight)
    site_feat = feat[:30].clone()
    site_feat[:10] = (feat[:10] + feat[30:]) / 2
    ref = sparse_conv(site_feat, PointBatch(grid.double(), grid_coord=grid), weight)
    torch.testing.assert_close(out, torch.cat([ref, ref[:10]]))


def test_neighbour_map_cached_per_kernel_size() -> None:
    grid = torch.tensor([[0, 0, 0], [0, 0, 1], [2, 2, 2]])
    point = PointBatch(grid.float(), grid_coord=grid)
    conv = SubMConv3d(3, 4, 3)
    conv(point.feat, point)
    first = neighbour_map(point, 3)
    conv(point.feat, point)
    assert neighbour_map(point, 3) is first
    assert neighbour_map(point, 5) is not first
    # (0,0,0) and (0,0,1) see each other; (2,2,2) is beyond a 3-kernel and within a 5-kernel
    assert first.num_pairs == 3 + 2
    assert build_neighbour_map(grid, point.batch, 5).num_pairs == 3 + 6


def test_layout_is_spconv_krsc() -> None:
    conv = SubMConv3d(6, 32, 5, bias=False)
    assert tuple(conv.weight.shape) == (32, 5, 5, 5, 6)
    assert set(conv.state_dict()) == {"weight"}


def test_bad_input_errors() -> None:
    grid = torch.tensor([[0, 0, 0], [1, 0, 0]])
    point = PointBatch(grid.float(), grid_coord=grid)
    with pytest.raises(ValueError, match="Cin"):
        sparse_conv(torch.zeros(2, 5), point, torch.zeros(4, 3, 3, 3, 3))
    with pytest.raises(ValueError, match="odd"):
        SubMConv3d(3, 3, 4)
    with pytest.raises(ValueError, match="grid_coord"):
        sparse_conv(torch.zeros(2, 3), PointBatch(grid.float()), torch.zeros(4, 3, 3, 3, 3))


def test_binary_search_and_dense_table_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    import pointmamba.ops.submconv as sc_module

    gen = torch.Generator().manual_seed(3)
    grid, batch = _random_sites(gen, [80, 50], 6)
    dense = build_neighbour_map(grid, batch, 5)
    monkeypatch.setattr(sc_module, "_DENSE_TABLE_MAX", 0)
    searched = build_neighbour_map(grid, batch, 5)
    assert dense.pair_ptr == searched.pair_ptr  # with the pairs themselves: the whole neighbour relation
    assert torch.equal(dense.pair_in, searched.pair_in) and torch.equal(dense.pair_out, searched.pair_out)
    assert torch.equal(dense.table, searched.table)  # the search's mirrored half included
    # offsets looked up a few at a time (what a large batch does) give the same table both ways
    monkeypatch.setattr(sc_module, "_CHUNK_ELEMENTS", 200)
    assert torch.equal(build_neighbour_map(grid, batch, 5).table, dense.table)
    monkeypatch.setattr(sc_module, "_DENSE_TABLE_MAX", 1 << 24)
    assert torch.equal(build_neighbour_map(grid, batch, 5).table, dense.table)


@pytest.mark.parametrize("k", [3, 5])
def test_neighbour_table_reads_nothing_back_per_offset(k: int) -> None:
    """On CUDA every read of a value waits for the queued kernels (issue 45: the training step's host
    waits). The table the gathered conv uses costs the key box's extents and the duplicate check, whatever
    the kernel size; only the rulebook, built on first use, reads its pair counts."""
    from pointmamba.utils.op_count import OpCount

    gen = torch.Generator().manual_seed(k)
    grid, batch = _random_sites(gen, [70, 40], 6)
    with OpCount() as count:
        nbr = build_neighbour_map(grid, batch, k)
    assert count.host_waits <= 4, count.ops
    table = nbr.table.clone()
    with OpCount() as count:
        nbr.rulebook()
    assert count.host_waits <= 2 and torch.equal(nbr.table, table)


def test_rulebook_lists_exactly_the_existing_pairs() -> None:
    """Every (input, output) pair of the rulebook is a real neighbour at its offset, none is missing, and
    the centre offset (the dense matmul) is not in it."""
    gen = torch.Generator().manual_seed(4)
    grid, batch = _random_sites(gen, [40, 30], 5)
    nbr = build_neighbour_map(grid, batch, 3)
    assert nbr.pair_ptr[13] == nbr.pair_ptr[14]  # centre offset (1, 1, 1) -> flat 13: empty range
    want = set()
    for i in range(len(grid)):
        for j in range(len(grid)):
            d = grid[j] - grid[i] + 1
            if batch[i] == batch[j] and i != j and bool(((d >= 0) & (d <= 2)).all()):
                want.add((int((d[0] * 3 + d[1]) * 3 + d[2]), j, i))  # j feeds i through that offset
    got = set()
    for o in range(27):
        for p in range(nbr.pair_ptr[o], nbr.pair_ptr[o + 1]):
            got.add((o, int(nbr.pair_in[p]), int(nbr.pair_out[p])))
    assert got == want and nbr.num_pairs == len(want) + len(grid)


def test_chunked_rulebook_gives_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny chunk budget: offsets split into pieces and groups; result and gradients as with one chunk."""
    import pointmamba.ops.submconv as sc_module

    gen = torch.Generator().manual_seed(5)
    grid, batch = _random_sites(gen, [70, 45], 6)
    point = PointBatch(grid.double(), batch=batch, grid_coord=grid)
    feat = torch.randn(len(grid), 3, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(4, 3, 3, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    results = []
    for budget in (1 << 22, 20):
        monkeypatch.setattr(sc_module, "_CHUNK_ELEMENTS", budget)
        nbr = build_neighbour_map(grid, batch, 3)
        groups = nbr.chunks(4)
        assert (len(groups) == 1) == (budget > 1000)
        assert [p for g in groups for p in g][0][1] == 0 and groups[-1][-1][2] == len(nbr.pair_in)
        point.clear_cache()
        out = sparse_conv(feat, point, weight)
        results.append((out, torch.autograd.grad(out.square().sum(), (feat, weight))))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
