"""Position variants `logical`, `sin+gru`, `sin+logical` (and `gru` checked against its definition).

Slot-level tests run ``PositionSlot.pre`` on a packed, serialized batch: gradients, a float64 reference,
causality inside a window, batch invariance and no information crossing samples.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from pointmamba import build_model
from pointmamba.models.config import resolve_model_config
from pointmamba.models.logical import LogicalPosition
from pointmamba.models.position import PART_CLASSES, POSITION_PARTS, GRUPosition, PositionSlot
from pointmamba.point.batch import PointBatch

NEW = ["logical", "sin+gru", "sin+logical"]
SEQUENCE_KINDS = ["gru", *NEW]  # kinds that run along a curve order
WINDOW = 8


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):  # noqa: ANN001
    yield


def _batch(sizes: list[int], seed: int, channels: int = 12, dtype: torch.dtype = torch.float32) -> PointBatch:
    gen = torch.Generator().manual_seed(seed)
    coord = torch.rand(sum(sizes), 3, generator=gen, dtype=torch.float64) * 6.0
    feat = torch.randn(sum(sizes), channels, generator=gen, dtype=torch.float64)
    point = PointBatch(coord.to(dtype), feat.to(dtype), offset=torch.tensor(sizes).cumsum(0), grid_size=0.5)
    return point.serialize(("z", "hilbert"))


def _pack(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> PointBatch:
    point = PointBatch.from_list([c for c, _ in parts], [f for _, f in parts], grid_size=0.5)
    return point.serialize(("z", "hilbert"))


def _samples(point: PointBatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    bounds = [0, *point.offset.tolist()]
    return [(point.coord[a:b], point.feat[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _slot(kind: str, channels: int = 12, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    cfg = resolve_model_config({"logical": {"window": WINDOW}, "sinusoidal": {"scale": 1.0}})
    return PositionSlot(kind, channels, [0, 1], cpe_kernel=cfg["cpe_kernel"], abs_pos=cfg["abs_pos"],
                        sinusoidal=cfg["sinusoidal"], logical=cfg["logical"], relpos=cfg["relpos"])


def _reference_logical(m: LogicalPosition, feat: torch.Tensor, point: PointBatch) -> torch.Tensor:
    """Per sample, per window of the order-0 sequence, a softmax over the keys at or before each query."""
    out = feat.clone()
    c = feat.shape[1]
    seq = point.order[0]
    start = 0
    for n in point.lengths.tolist():
        rows = seq[start:start + n]
        for a in range(0, n, m.window):
            r = rows[a:a + m.window]
            q, k, v = m.qkv(feat[r]).split(c, 1)
            score = q @ k.T / c ** 0.5
            score = score.masked_fill(torch.ones_like(score, dtype=torch.bool).triu(1), float("-inf"))
            out[r] = feat[r] + m.norm(m.out(score.softmax(1) @ v))
        start += n
    return out


def test_logical_matches_float64_reference_and_gradcheck() -> None:
    point = _batch([19, 5, 8], seed=1, channels=6, dtype=torch.float64)  # longer than, shorter than, equal to a window
    m = LogicalPosition(6, window=WINDOW).double()
    with torch.no_grad():
        torch.testing.assert_close(m(point.feat, point), _reference_logical(m, point.feat, point), rtol=1e-12, atol=1e-12)
    small = _batch([5, 3], seed=2, channels=4, dtype=torch.float64)
    m = LogicalPosition(4, window=3).double()
    feat = small.feat.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: m(x, small), (feat,))
    with pytest.raises(ValueError, match="logical.window"):
        LogicalPosition(4, window=0)


@pytest.mark.parametrize("kind", ["logical", "sin+logical"])
def test_causal_inside_a_window_and_windows_independent(kind: str) -> None:
    point = _batch([3 * WINDOW + 5, 11], seed=3)
    slot = _slot(kind).eval()
    seq = point.order[0]
    j = WINDOW + 4  # sequence position of the perturbed point: the 5th of the second window of sample 0
    feat = point.feat.clone()
    feat[seq[j]] += 3.0
    with torch.no_grad():
        base = slot.pre(point.feat, point)[seq]
        moved = slot.pre(feat, point)[seq]
    changed = (moved - base).abs().amax(1) > 1e-6
    assert not changed[:j].any()  # nothing before it in the order, in its window or before
    assert changed[j:2 * WINDOW].all()  # it and every later point of its window see it
    assert not changed[2 * WINDOW:].any()  # later windows, and the other sample, do not


@pytest.mark.parametrize("kind", NEW)
def test_gradients_reach_every_slot_parameter(kind: str) -> None:
    point = _batch([30, 13], seed=4)
    slot = _slot(kind).train()
    feat = point.feat.clone().requires_grad_(True)
    slot.pre(feat, point).square().sum().backward()
    names = [n for n, _ in slot.named_parameters()]
    assert names and all(n.split(".")[0] in {"sinusoidal", "gru", "logical"} for n in names)
    missing = [n for n, p in slot.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient for {missing}"
    assert torch.any(feat.grad != 0)


@pytest.mark.parametrize("kind", SEQUENCE_KINDS)
def test_batch_invariance_and_no_leak_across_samples(kind: str) -> None:
    slot = _slot(kind).train()  # no batch statistics in these modules: train mode as well
    packed = _batch([23, 40, 6], seed=5)
    a, b, c = _samples(packed)
    with torch.no_grad():
        alone = slot.pre(a[1], _pack([a]))
        together = slot.pre(packed.feat, packed)
        torch.testing.assert_close(together[:23], alone, rtol=0, atol=1e-5)
        gen = torch.Generator().manual_seed(6)  # sample b moved, reshaped and its features redrawn
        b2 = (b[0][:31] * 1.7 + 4.0, torch.randn(31, 12, generator=gen))
        other = _pack([a, b2, c])
        again = slot.pre(other.feat, other)
    torch.testing.assert_close(again[:23], together[:23], rtol=0, atol=1e-5)
    torch.testing.assert_close(again[-6:], together[-6:], rtol=0, atol=1e-5)


def test_composites_are_sinusoidal_then_dynamic() -> None:
    point = _batch([17, 9], seed=7)
    for kind, dynamic in (("sin+gru", "gru"), ("sin+logical", "logical")):
        slot = _slot(kind).eval()
        assert slot.cpe is None and slot.relpos is None and slot.abs_pos is None
        with torch.no_grad():
            expected = getattr(slot, dynamic)(slot.sinusoidal(point.feat, point), point)
            assert torch.equal(slot.pre(point.feat, point), expected)
    assert _slot("logical").sinusoidal is None and _slot("logical").gru is None


def test_gru_is_bidirectional_gru_plus_linear_residual() -> None:
    """``gru``: feat + Linear(BiGRU(LayerNorm(feat))) along order 0, each sample as its own sequence."""
    point = _batch([21, 8], seed=8)
    m = GRUPosition(12).eval()
    assert m.gru.bidirectional and m.proj.in_features == 2 * m.gru.hidden_size and m.proj.out_features == 12
    with torch.no_grad():
        out = m(point.feat, point)
        seq, start = point.order[0], 0
        for n in point.lengths.tolist():
            rows = seq[start:start + n]
            y, _ = m.gru(m.norm(point.feat[rows]).unsqueeze(0))
            torch.testing.assert_close(out[rows], point.feat[rows] + m.proj(y[0]), rtol=0, atol=1e-6)
            start += n


def _scan(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    grid = torch.randperm(16 * 16, generator=gen)[:n]
    coord = torch.stack([grid // 16, grid % 16, (grid % 5)], 1).float() * 0.5 + 0.25
    return coord, torch.cat([coord - coord.mean(0), torch.randn(n, 3, generator=gen)], 1)


@pytest.mark.parametrize("kind", NEW)
def test_network_gradients_and_batch_invariance(kind: str) -> None:
    torch.manual_seed(0)
    model = build_model({"enc_channels": [12, 24], "enc_depths": [1, 1], "dec_channels": [12], "dec_depths": [1],
                         "orders": ["z", "hilbert"], "d_state": 4, "drop_path": 0.0, "num_classes": 5,
                         "position": kind, "logical": {"window": 16}})
    a, b = _scan(70, 1), _scan(40, 2)
    model.train()
    out = model(PointBatch.from_list([a[0], b[0]], [a[1], b[1]], grid_size=0.5))
    torch.nn.functional.cross_entropy(out, torch.randint(0, 5, (110,))).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient for {missing}"
    assert not model.relpos_modules()
    model.eval()
    with torch.no_grad():
        alone = model(PointBatch.from_list([a[0]], [a[1]], grid_size=0.5))
        together = model(PointBatch.from_list([b[0], a[0]], [b[1], a[1]], grid_size=0.5))[40:]
    assert (together - alone).abs().max() <= 1e-5


@pytest.mark.parametrize("kind", sorted(POSITION_PARTS))
def test_slot_builds_exactly_the_parts_of_its_kind(kind: str) -> None:
    slot = _slot(kind)
    parts = POSITION_PARTS[kind]
    for name, cls in PART_CLASSES.items():
        module = getattr(slot, name)
        assert (module is not None) == (name in parts) and (module is None or type(module) is cls), name
    assert (slot.relpos is not None) == ("relpos" in parts)
    point = _batch([30, 20], seed=1)
    out = slot.pre(point.feat, point)
    assert out.shape == point.feat.shape
    if not set(parts) - {"relpos"}:  # nothing runs before the blocks
        assert torch.equal(out, point.feat)
