"""PointBatch (grid, serialization orders), packed <-> padded sequences and segment reductions."""
from __future__ import annotations

import pytest
import torch

from pointmamba.point.reductions import batch2offset, offset2batch, segment_reduce
from pointmamba.point.sequence import pack_to_padded, padded_to_pack, reverse_index
from pointmamba.point.serialization import ORDERS, encode
from pointmamba.point.batch import PointBatch


def cloud(n: int, extent: float, seed: int, shift: float = 0.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, generator=gen, dtype=torch.float64).float() * extent + shift


def within_sample_order(pb: PointBatch, k: int, sample: int) -> torch.Tensor:
    """Local row indices of ``sample`` in the order of curve ``k``."""
    start = int(pb.offset[sample - 1]) if sample else 0
    rows = pb.order[k][pb.batch[pb.order[k]] == sample]
    return rows - start


# ------------------------------------------------------------------------------------------- serialization
def test_serialize_orders_codes_and_inverse():
    # coarse grid: many points share a voxel, so ties are exercised
    pb = PointBatch.from_list([cloud(300, 5.0, 0), cloud(1, 1.0, 1), cloud(200, 30.0, 2)], grid_size=1.0)
    pb.serialize()
    n = len(pb)
    assert pb.orders == ORDERS and pb.code.shape == pb.order.shape == pb.inverse.shape == (4, n)
    assert pb.depth == 5  # extent 30 / grid 1 -> coordinates up to 29
    for k, name in enumerate(pb.orders):
        assert torch.equal(pb.code[k], encode(pb.grid_coord, pb.batch, depth=pb.depth, order=name))
        assert (pb.code[k][pb.order[k]].diff() >= 0).all(), "walking x[order[k]] visits increasing codes"
        assert torch.equal(pb.inverse[k][pb.order[k]], torch.arange(n))
        assert torch.equal(pb.order[k][pb.inverse[k]], torch.arange(n))
        seq_batch = pb.batch[pb.order[k]]
        assert (seq_batch.diff() >= 0).all(), "every sample's points are contiguous in each order"
        assert torch.equal(batch2offset(seq_batch), pb.offset)


def test_grid_coord_and_order_are_batch_invariant():
    scan = cloud(400, 8.0, 0, shift=100.0)
    alone = PointBatch(scan, grid_size=0.5).serialize()
    # batch mates with other origins and a much larger extent (the batch needs a larger depth)
    mates = [cloud(300, 200.0, 1, shift=-50.0), cloud(50, 1.0, 2)]
    batched = PointBatch.from_list([mates[0], scan, mates[1]], grid_size=0.5).serialize()
    assert batched.depth > alone.depth
    rows = slice(300, 700)
    assert torch.equal(batched.grid_coord[rows], alone.grid_coord)
    assert int(alone.grid_coord.min()) == 0
    for k in range(len(ORDERS)):
        assert torch.equal(within_sample_order(batched, k, 1), alone.order[k]), ORDERS[k]


@pytest.mark.parametrize("grid_size", [1.0, 0.15])  # ~8 points per voxel / a few shared voxels
def test_permuting_rows_permutes_the_serialized_order(grid_size):
    coord = cloud(500, 4.0, 3)
    ref = PointBatch(coord, grid_size=grid_size).serialize()
    shared = len(coord) - len(torch.unique(ref.code[0]))
    assert 0 < shared < (400 if grid_size < 1 else 500), "the test needs voxels holding several points"
    perm = torch.randperm(500, generator=torch.Generator().manual_seed(4))
    permuted = PointBatch(coord[perm], grid_size=grid_size).serialize()
    for k in range(len(ORDERS)):
        assert torch.equal(coord[perm][permuted.order[k]], coord[ref.order[k]]), ORDERS[k]
        # inverse maps each row to the same sequence position as its original row
        assert torch.equal(permuted.inverse[k], ref.inverse[k][perm])


def test_shuffle_keeps_the_set_of_orders():
    pb = PointBatch.from_list([cloud(50, 3.0, 0), cloud(20, 3.0, 1)], grid_size=0.25)
    seen = set()
    for seed in range(12):
        pb.serialize(shuffle=True, generator=torch.Generator().manual_seed(seed))
        assert sorted(pb.orders) == sorted(ORDERS)
        for k, name in enumerate(pb.orders):
            assert torch.equal(pb.code[k], encode(pb.grid_coord, pb.batch, depth=pb.depth, order=name))
        seen.add(pb.orders)
    assert len(seen) > 1, "shuffle never changed the order of the curves"


def test_serialize_subset_and_bad_orders():
    pb = PointBatch(cloud(30, 2.0, 0), grid_size=0.5)
    assert pb.serialize(orders=("hilbert",)).code.shape == (1, 30)
    with pytest.raises(ValueError, match="unknown order"):
        pb.serialize(orders=("peano",))
    with pytest.raises(ValueError, match="needs grid_coord"):
        PointBatch(cloud(30, 2.0, 0)).serialize()
    with pytest.raises(ValueError, match=r"needs depth \d+ > 16; use a coarser grid"):
        PointBatch(cloud(30, 2.0, 0) * 1e5, grid_size=1.0).serialize()


# ------------------------------------------------------------------------------------------- bad input
def test_point_batch_bad_input():
    good = cloud(10, 1.0, 0)
    for bad_value in (float("nan"), float("inf"), -float("inf")):
        coord = good.clone()
        coord[3, 1] = bad_value
        with pytest.raises(ValueError, match="NaN or inf"):
            PointBatch(coord, grid_size=0.1)
    with pytest.raises(ValueError, match="empty batch"):
        PointBatch(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="empty batch"):
        PointBatch.from_list([])
    with pytest.raises(ValueError, match=r"offset ends at 8 but there are 10 points"):
        PointBatch(good, offset=torch.tensor([4, 8]))
    with pytest.raises(ValueError, match="strictly increasing"):
        PointBatch(good, offset=torch.tensor([6, 4, 10]))
    with pytest.raises(ValueError, match="strictly increasing"):
        PointBatch(good, offset=torch.tensor([4, 4, 10]))
    with pytest.raises(ValueError, match="batch and offset disagree"):
        PointBatch(good, offset=torch.tensor([4, 10]), batch=torch.tensor([0] * 5 + [1] * 5))
    with pytest.raises(ValueError, match="batch must be sorted"):
        PointBatch(good, batch=torch.tensor([1] * 5 + [0] * 5))
    with pytest.raises(ValueError, match=r"coord must be a \(N, 3\)"):
        PointBatch(torch.zeros(10, 2))
    with pytest.raises(ValueError, match="grid_size must be > 0"):
        PointBatch(good, grid_size=0.0)


# ------------------------------------------------------------------------------------------- sequences
def test_packed_padded_round_trip_and_reverse():
    lengths = torch.tensor([5, 1, 3, 7])
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
    padded, mask = pack_to_padded(x, lengths, pad_value=-9.0)
    assert padded.shape == (4, 7, 4) and mask.shape == (4, 7)
    assert mask.sum(1).tolist() == lengths.tolist()
    assert (padded[~mask] == -9.0).all()
    start = 0
    for b, length in enumerate(lengths.tolist()):
        assert torch.equal(padded[b, :length], x[start:start + length])
        start += length
    assert torch.equal(padded_to_pack(padded, mask), x)

    rev = reverse_index(lengths)
    assert torch.equal(rev[rev], torch.arange(16)), "reverse_index is an involution"
    start = 0
    for length in lengths.tolist():
        assert torch.equal(x[rev][start:start + length], x[start:start + length].flip(0))
        start += length
    with pytest.raises(ValueError, match="lengths sum to 15"):
        pack_to_padded(x, torch.tensor([5, 1, 2, 7]))



def test_equal_lengths_pad_as_a_view():
    """One sample (or equal lengths): no padding, so padded and packed forms share memory."""
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(1))
    for lengths in (torch.tensor([12]), torch.tensor([4, 4, 4])):
        padded, mask = pack_to_padded(x, lengths)
        assert padded.shape == (len(lengths), 12 // len(lengths), 3) and bool(mask.all())
        assert padded.data_ptr() == x.data_ptr()
        packed = padded_to_pack(padded, mask)
        assert torch.equal(packed, x) and packed.data_ptr() == x.data_ptr()

def test_offset_batch_helpers():
    offset = torch.tensor([3, 4, 9])
    batch = offset2batch(offset)
    assert batch.tolist() == [0, 0, 0, 1, 2, 2, 2, 2, 2]
    assert torch.equal(batch2offset(batch), offset)


# ------------------------------------------------------------------------------------------- segments
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_segment_reduce_matches_python_reference(reduce):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(40, 3, generator=gen)
    index = torch.randint(0, 5, (40,), generator=gen)
    index[index == 2] = 4  # segments 2 and 5 are empty
    out = segment_reduce(x, index, 6, reduce)
    assert out.shape == (6, 3) and out.dtype == x.dtype
    xd = x.double().tolist()
    for seg in range(6):
        rows = [xd[i] for i in range(40) if int(index[i]) == seg]
        for c in range(3):
            vals = [r[c] for r in rows]
            if not vals:
                expected = 0.0
            elif reduce == "sum":
                expected = sum(vals)
            elif reduce == "mean":
                expected = sum(vals) / len(vals)
            else:
                expected = max(vals) if reduce == "max" else min(vals)
            assert float(out[seg, c]) == pytest.approx(expected, abs=1e-5), (reduce, seg, c)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_segment_reduce_gradients(reduce):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(12, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.tensor([0, 0, 1, 3, 3, 3, 0, 1, 3, 3, 0, 1])  # segment 2 is empty
    assert torch.autograd.gradcheck(lambda t: segment_reduce(t, index, 4, reduce), (x,))


def test_segment_reduce_bad_input():
    with pytest.raises(ValueError, match="reduce must be one of"):
        segment_reduce(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), 1, "median")
    with pytest.raises(ValueError, match="one entry per row"):
        segment_reduce(torch.zeros(3, 2), torch.zeros(4, dtype=torch.long), 1, "sum")
