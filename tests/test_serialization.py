"""Space-filling-curve codes: round trips, curve geometry, depth consistency, locality, bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pointmamba.point.serialization import ORDERS, adaptive_depth, decode, encode, encode_orders
from pointmamba.point.serialization import hilbert as hilbert_module

HILBERTS = ("hilbert", "hilbert-trans")


def random_grid(n: int, depth: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1 << depth, (n, 3), generator=gen)


def full_grid(depth: int) -> torch.Tensor:
    side = torch.arange(1 << depth)
    return torch.cartesian_prod(side, side, side)


def read_obj_vertices(path) -> np.ndarray:
    """``v x y z`` lines of an OBJ file as (N, 3) float64 (enough for a test; not the data reader)."""
    with open(path) as f:
        rows = [line.split()[1:4] for line in f if line.startswith("v ")]
    return np.asarray(rows, dtype=np.float64)


# ------------------------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("order", ORDERS)
def test_round_trip_all_depths_with_batch(order):
    for depth in range(1, 17):
        grid = random_grid(300, depth, seed=depth)
        batch = torch.sort(torch.randint(0, 7, (300,), generator=torch.Generator().manual_seed(depth))).values
        code = encode(grid, batch, depth=depth, order=order)
        assert code.dtype == torch.int64 and code.shape == (300,)
        assert torch.equal(code >> (3 * depth), batch), "batch index must sit in the high bits"
        back, back_batch = decode(code, depth, order)
        assert torch.equal(back, grid), f"{order} depth {depth}"
        assert torch.equal(back_batch, batch)


@pytest.mark.parametrize("order", ORDERS)
def test_grid_corners_round_trip(order):
    top = (1 << 16) - 1
    grid = torch.tensor([[0, 0, 0], [top, top, top], [top, 0, 0], [0, top, 0], [0, 0, top], [1, 2, 3]])
    back, _ = decode(encode(grid, depth=16, order=order), 16, order)
    assert torch.equal(back, grid)


# ------------------------------------------------------------------------------------------- curve geometry
def reference_zorder(grid: np.ndarray) -> list[int]:
    """Plain-python bit interleaving: bit i of x, y, z -> bits 3i+2, 3i+1, 3i."""
    out = []
    for x, y, z in grid.tolist():
        code = 0
        for i in range(16):
            code |= ((x >> i) & 1) << (3 * i + 2) | ((y >> i) & 1) << (3 * i + 1) | ((z >> i) & 1) << (3 * i)
        out.append(code)
    return out


def test_zorder_matches_python_reference():
    grid = random_grid(500, 16, seed=3)
    assert encode(grid, depth=16, order="z").tolist() == reference_zorder(grid.numpy())
    assert encode(grid, depth=16, order="z-trans").tolist() == reference_zorder(grid[:, [1, 0, 2]].numpy())


@pytest.mark.parametrize("order", HILBERTS)
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_hilbert_consecutive_codes_are_unit_neighbours(order, depth):
    grid, _ = decode(torch.arange(8**depth), depth, order)
    steps = (grid[1:] - grid[:-1]).abs().sum(1)
    assert (steps == 1).all(), f"{order} depth {depth}: non-unit steps {steps[steps != 1][:5].tolist()}"
    assert grid[0].tolist() == [0, 0, 0], "the curve starts at the origin"


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_bijection_on_full_grid(order, depth):
    code = encode(full_grid(depth), depth=depth, order=order)
    assert torch.equal(torch.sort(code).values, torch.arange(8**depth))


def test_hilbert_state_tables():
    table, inverse = hilbert_module.STATE_TABLE, hilbert_module.INVERSE_TABLE
    assert table.shape == (12, 8, 2) and hilbert_module.PERIOD == 3
    for s in range(12):
        for octant in range(8):
            digit, nxt = table[s, octant]
            assert inverse[s, digit].tolist() == [octant, nxt]
    for depth in range(1, 20):  # the root for depth D + 1, after octant 0, is the root for depth D
        assert table[hilbert_module.root_state(depth + 1), 0].tolist() == [0, hilbert_module.root_state(depth)]


@pytest.mark.parametrize("order", ORDERS)
def test_depth_consistency(order):
    """A point's order must not depend on the depth the batch needed (batch invariance)."""
    for depth in (1, 2, 3, 5, 8, 12):
        grid = random_grid(2000, depth, seed=depth)
        code = encode(grid, depth=depth, order=order)
        for extra in (1, 2, 3, 4, 7):
            if depth + extra > 16:
                continue
            deeper = encode(grid, depth=depth + extra, order=order)
            assert torch.equal(torch.argsort(code, stable=True), torch.argsort(deeper, stable=True))
            assert torch.equal(code, deeper), "curve codes are depth independent by construction"


def test_adaptive_depth():
    assert adaptive_depth(torch.zeros(4, 3, dtype=torch.long)) == 1
    assert adaptive_depth(torch.tensor([[0, 1, 0]])) == 1
    assert adaptive_depth(torch.tensor([[0, 2, 0]])) == 2
    assert adaptive_depth(torch.tensor([[1023, 0, 5]])) == 10
    assert adaptive_depth(torch.tensor([[1024, 0, 5]])) == 11
    grid = random_grid(100, 9)
    assert torch.equal(encode(grid, order="hilbert"), encode(grid, depth=adaptive_depth(grid), order="hilbert"))


# ------------------------------------------------------------------------------------------- locality
def test_locality_on_real_scan(scans_dir):
    path = scans_dir / "MSN001" / "MSN001_upper.obj"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    coord = read_obj_vertices(path)
    grid_size = 0.2  # mm
    grid = np.floor((coord - coord.min(0)) / grid_size).astype(np.int64)
    grid = np.unique(grid, axis=0)
    centers = torch.from_numpy((grid + 0.5) * grid_size)
    grid = torch.from_numpy(grid)

    def mean_step(order: torch.Tensor) -> float:
        return float((centers[order[1:]] - centers[order[:-1]]).norm(dim=1).mean())

    random_step = mean_step(torch.randperm(len(grid), generator=torch.Generator().manual_seed(0)))
    print(f"\nlocality on {path.name}: {len(grid)} voxels of {grid_size} mm; random order {random_step:.2f} mm")
    for order in ORDERS:
        step = mean_step(torch.argsort(encode(grid, order=order)))
        print(f"  {order:<14} mean step {step:.3f} mm, {random_step / step:.0f}x shorter than random")
        assert step * 5 <= random_step, f"{order}: mean step {step:.2f} mm vs random {random_step:.2f} mm"


# ------------------------------------------------------------------------------------------- input handling
@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_integer_dtypes_agree(dtype):
    grid = random_grid(50, 6)
    for order in ORDERS:
        assert torch.equal(encode(grid.to(dtype), depth=6, order=order), encode(grid, depth=6, order=order))


def test_non_contiguous_input_and_one_point():
    wide = random_grid(400, 10).repeat_interleave(2, dim=1)  # (N, 6): columns x x y y z z
    grid = wide[:, ::2]
    assert not grid.is_contiguous()
    batch = torch.zeros(800, dtype=torch.long)[::2]
    for order in ORDERS:
        expected = encode(grid.contiguous(), torch.zeros(400, dtype=torch.long), depth=10, order=order)
        assert torch.equal(encode(grid, batch, depth=10, order=order), expected)
        assert torch.equal(encode(grid.t().contiguous().t(), depth=10, order=order), expected)
        one = torch.tensor([[3, 1, 2]])
        code = encode(one, torch.tensor([2]), order=order)
        assert code.shape == (1,)
        back, back_batch = decode(code, adaptive_depth(one), order)
        assert back.tolist() == [[3, 1, 2]] and back_batch.tolist() == [2]
    assert encode(torch.zeros(1, 3, dtype=torch.long), order="hilbert").tolist() == [0]


def test_bad_input_raises_clear_errors():
    grid = random_grid(10, 4)
    with pytest.raises(ValueError, match=r"depth must be in \[1, 16\]"):
        encode(grid, depth=17)
    with pytest.raises(ValueError, match=r"depth must be in \[1, 16\]"):
        encode(grid, depth=0)
    with pytest.raises(ValueError, match="needs 64 bits"):
        encode(grid, torch.full((10,), 1 << 15), depth=16)
    encode(grid, torch.full((10,), (1 << 15) - 1), depth=16)  # 63 bits fit
    with pytest.raises(ValueError, match="negative coordinates.*must be >= 0"):
        encode(grid - 1, depth=4)
    with pytest.raises(ValueError, match="integer dtype"):
        encode(grid.float(), depth=4)
    with pytest.raises(ValueError, match="integer dtype"):
        encode(grid, batch=torch.zeros(10), depth=4)
    with pytest.raises(ValueError, match=r"must be \(N, 3\)"):
        encode(grid[:, :2], depth=4)
    with pytest.raises(ValueError, match=r"must be \(N, 3\)"):
        encode(grid.view(-1), depth=4)
    with pytest.raises(ValueError, match=r"batch must be \(N=10,\)"):
        encode(grid, torch.zeros(9, dtype=torch.long), depth=4)
    with pytest.raises(ValueError, match="batch indices must be >= 0"):
        encode(grid, torch.full((10,), -1), depth=4)
    with pytest.raises(ValueError, match="does not fit depth 3"):
        encode(grid + 8, depth=3)
    with pytest.raises(ValueError, match="needs depth 17 > 16"):
        encode(torch.tensor([[1 << 16, 0, 0]]))
    with pytest.raises(ValueError, match="unknown order"):
        encode(grid, depth=4, order="peano")
    with pytest.raises(ValueError, match=r"depth must be in \[1, 16\]"):
        decode(torch.zeros(3, dtype=torch.long), 17, "hilbert")
    with pytest.raises(ValueError, match="code must be 1-D"):
        decode(torch.zeros(3, 2, dtype=torch.long), 4)


# ------------------------------------------------------------------------------------------- several orders at once
@pytest.mark.parametrize("depth", [None, 5, 16])
def test_encode_orders_is_encode_per_order(depth):
    grid = random_grid(300, 5, seed=3)
    batch = torch.sort(torch.randint(0, 4, (300,), generator=torch.Generator().manual_seed(4))).values
    codes, used = encode_orders(grid, batch, ORDERS, depth, num_samples=None)
    assert used == (adaptive_depth(grid) if depth is None else depth)
    for order, code in zip(ORDERS, codes):
        assert torch.equal(code, encode(grid, batch, used, order))
    alone, _ = encode_orders(grid, None, ("z", "hilbert"), depth)
    assert torch.equal(alone[1], encode(grid, None, used, "hilbert"))


def test_spread_table_is_the_bit_spreading_for_every_16_bit_value():
    from pointmamba.point.serialization import _bits

    x = torch.arange(1 << 16)
    spread = _bits.spread3(x)
    assert torch.equal(spread, _bits._spread_bits(x))
    assert torch.equal(_bits.compact3(spread), x)
    assert torch.equal(_bits.spread3(x[[5, 4464, 3]].view(3, 1)), spread[[5, 4464, 3]].view(3, 1))  # any shape
    with pytest.raises(IndexError):  # outside the serialization's checked range: an error, never a wrong code
        _bits.spread3(torch.tensor([1 << 16]))


def test_orders_of_one_axis_layout_share_one_morton_code():
    """Four orders interleave the bits twice (z and Hilbert of each layout share it): 6 table lookups, not
    12. Each op is a kernel launch on CUDA, where the recipe's step is bound by launches."""
    from pointmamba.point.serialization import _bits
    from pointmamba.utils.op_count import OpCount

    grid = random_grid(500, 9, seed=6)
    batch = torch.sort(torch.randint(0, 3, (500,), generator=torch.Generator().manual_seed(6))).values
    _bits.spread3(grid[:1, 0])  # the table is built on first use (its own ops)
    with OpCount() as count:
        codes, depth = encode_orders(grid, batch, ORDERS, None, 3)
    assert count.ops["index_select"] == 6 + 2 * (-(-depth // 4))  # 6 spreads, and the two Hilbert walks' gathers
    assert sum(count.ops.values()) <= 80  # 234 with the bit tricks per order (2026-11-28)
    for order, code in zip(ORDERS, codes):
        assert torch.equal(code, encode(grid, batch, depth, order))


def test_encode_orders_raises_what_encode_raises():
    grid = random_grid(10, 4)
    one = torch.zeros(10, dtype=torch.long)
    for args, message in [((grid - 1, one, ("z",)), "negative coordinates"),
                          ((grid + 8, one, ("z",), 3), "does not fit depth 3"),
                          ((torch.tensor([[1 << 16, 0, 0]]), torch.zeros(1, dtype=torch.long), ("z",)), "needs depth 17 > 16"),
                          ((grid, torch.full((10,), 1 << 15), ("hilbert",), 16), "needs 64 bits"),
                          ((grid, torch.full((10,), -1), ("z",)), "batch indices must be >= 0"),
                          ((grid, one, ("peano",)), "unknown order"),
                          ((grid, one, ("z",), 17), r"depth must be in \[1, 16\]"),
                          ((grid.float(), one, ("z",)), "integer dtype"),
                          ((grid, one[:9], ("z",)), r"batch must be \(N=10,\)")]:
        with pytest.raises(ValueError, match=message):
            encode_orders(*args)


def test_serialize_reads_the_device_once_for_all_orders(monkeypatch):
    """PointBatch.serialize reads values back from the device (each read waits for the GPU's queue) once
    for its range and once for tied voxels, not five times an order."""
    from pointmamba.point.batch import PointBatch

    grid = random_grid(500, 6, seed=5)
    point = PointBatch(grid.double(), batch=torch.sort(torch.randint(0, 3, (500,))).values, grid_coord=grid)
    reads = []
    for name in ("item", "tolist", "__int__", "__bool__", "__float__"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name, **k: (reads.append(_n), _o(self, *a, **k))[1])
    point.serialize(ORDERS)
    assert len(reads) <= 2, reads
