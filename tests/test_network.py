"""The segmentation network: config handling, gradients per variant, batch and permutation invariance."""
from __future__ import annotations

import pytest
import torch

from pointmamba import build_model
from pointmamba.models.config import MODEL_DEFAULTS
from pointmamba.models.network import count_parameters
from pointmamba.point.batch import PointBatch

GRID = 0.5
SMALL = {  # a small but complete network: two stages, every order used by some block
    "enc_channels": [12, 24],
    "enc_depths": [2, 2],
    "dec_channels": [12],
    "dec_depths": [1],
    "orders": ["z", "hilbert"],
    "d_state": 4,
    "drop_path": 0.0,
    "num_classes": 5,
}


def _small(**kw: object) -> dict:
    cfg = dict(SMALL)
    cfg.update(kw)
    return cfg


def _surface_voxels(n: int, seed: int, extent: int = 24) -> torch.Tensor:
    """``n`` distinct voxels on a bumpy height field (a surface, like a scan), as (n, 3) grid coords."""
    gen = torch.Generator().manual_seed(seed)
    flat = torch.randperm(extent * extent, generator=gen)[:n]
    x, y = flat // extent, flat % extent
    z = (3 + 2 * torch.sin(x / 3.0) * torch.cos(y / 4.0)).round().long()
    return torch.stack([x, y, z], 1)


def _scan(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(coord, feat) with exactly one point per voxel of size GRID."""
    gen = torch.Generator().manual_seed(seed + 100)
    grid = _surface_voxels(n, seed)
    coord = (grid.float() + 0.2 + 0.6 * torch.rand(n, 3, generator=gen)) * GRID + torch.randn(1, 3, generator=gen)
    normal = torch.nn.functional.normalize(torch.randn(n, 3, generator=gen), dim=1)
    return coord, torch.cat([coord - coord.mean(0), normal], 1)


def _batch(scans: list[tuple[torch.Tensor, torch.Tensor]]) -> PointBatch:
    return PointBatch.from_list([c for c, _ in scans], [f for _, f in scans], grid_size=GRID)


def test_config_defaults_and_unknown_keys() -> None:
    model = build_model({"model": {"enc_channels": [8, 16], "enc_depths": [1, 1], "dec_channels": [8], "dec_depths": [1]}})
    assert model.cfg["num_classes"] == MODEL_DEFAULTS["num_classes"] and model.cfg["relpos"]["preset"] == "fixed"
    with pytest.raises(ValueError, match="valid keys under model:.*enc_channels"):
        build_model({"enc_chanels": [8]})
    with pytest.raises(ValueError, match="valid keys under model.relpos:.*gate_bias_init"):
        build_model({"relpos": {"gate_bias": -2.0}})
    with pytest.raises(ValueError, match="position must be one of"):
        build_model({"position": "learned"})
    with pytest.raises(ValueError, match="dec_channels"):
        build_model({"dec_channels": [64, 64]})
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())


def test_parameter_groups_by_name() -> None:
    model = build_model(_small())
    names = [n for n, _ in model.named_parameters()]
    assert any("cpe_stem" in n for n in names) and any(".cpe." in n for n in names)
    assert any("relpos" in n for n in names) and any("mixer" in n for n in names)
    assert all(n.startswith("head.") for n in names if "head" in n)
    assert [n for n, _ in model.relpos_modules()] == ["enc0.order0", "enc0.order1", "enc1.order0", "enc1.order1",
                                                      "dec0.order0"]


VARIANTS = [
    {"position": "cpe"},
    {"position": "cpe+relpos"},
    {"position": "relpos+abs"},
    {"position": "sinusoidal"},
    {"position": "gru"},
    {"position": "none"},
    {"position": "cpe+relpos", "mixer_combine": "concat", "mixer_share_params": True, "pool_reduce": "mean",
     "relpos": {"preset": "naive", "normalization": "quantile", "direction": "angles"}},
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(str(x) for x in v.values() if not isinstance(x, dict)))
def test_gradients_reach_every_parameter(variant: dict) -> None:
    torch.manual_seed(0)
    model = build_model(_small(enc_depths=[1, 1], **variant)).train()
    point = _batch([_scan(100, 1), _scan(60, 2)])
    labels = torch.randint(0, 5, (len(point),))
    torch.nn.functional.cross_entropy(model(point), labels).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient for {missing}"
    if "relpos" in variant["position"]:
        assert model.relpos_modules()
    else:
        assert not model.relpos_modules()


def test_batch_invariance_in_eval() -> None:
    torch.manual_seed(0)
    model = build_model(_small(orders=["z", "z-trans", "hilbert", "hilbert-trans"], enc_depths=[4, 1],
                               relpos={"normalization": "quantile"})).train()
    with torch.no_grad():  # a few training forwards so the running quantiles are not at their start value
        model(_batch([_scan(200, 5), _scan(140, 6)]))
    model.eval()
    a, b, c = _scan(180, 3), _scan(60, 4), _scan(230, 7)
    with torch.no_grad():
        alone = model(_batch([a]))
        together = model(_batch([b, a, c]))[60:240]
    assert (together - alone).abs().max() <= 1e-5


def test_permuting_input_rows_permutes_output() -> None:
    torch.manual_seed(0)
    model = build_model(_small(pool_reduce="mean")).eval()
    (ca, fa), (cb, fb) = _scan(170, 8), _scan(120, 9)
    gen = torch.Generator().manual_seed(0)
    pa, pb = torch.randperm(170, generator=gen), torch.randperm(120, generator=gen)
    with torch.no_grad():
        out = model(_batch([(ca, fa), (cb, fb)]))
        out_perm = model(_batch([(ca[pa], fa[pa]), (cb[pb], fb[pb])]))
    expected = torch.cat([out[:170][pa], out[170:][pb]])
    assert (out_perm - expected).abs().max() <= 1e-5


def test_disabled_relpos_equals_network_without_relpos() -> None:
    torch.manual_seed(0)
    with_relpos = build_model(_small(position="cpe+relpos")).eval()
    plain = build_model(_small(position="cpe")).eval()
    shared = {k: v for k, v in with_relpos.state_dict().items() if "relpos" not in k}
    assert set(shared) == set(plain.state_dict())
    plain.load_state_dict(shared)
    for _, module in with_relpos.relpos_modules():
        module.enabled = False
    point = [_scan(160, 10), _scan(70, 11)]
    with torch.no_grad():
        assert torch.equal(with_relpos(_batch(point)), plain(_batch(point)))


def test_serialization_is_done_by_the_network_unless_given() -> None:
    model = build_model(_small()).eval()
    point = _batch([_scan(100, 12)])
    with torch.no_grad():
        out = model(point)
    assert point.orders == ("z", "hilbert")
    torch.manual_seed(3)
    model.train()
    shuffled = _batch([_scan(100, 12)])
    model(shuffled)
    assert sorted(shuffled.orders) == ["hilbert", "z"]
    with pytest.raises(ValueError, match="serialized with 1 orders"):
        model(_batch([_scan(100, 12)]).serialize(("z",)))
    with pytest.raises(ValueError, match="grid_coord"):
        model(PointBatch(point.coord, point.feat))
    assert out.shape == (100, 5)


def test_model_caches_live_apart_from_batch_data() -> None:
    """What the network caches on a batch goes to ``point.cache`` (cleared by ``clear_cache``), never ``extra``."""
    from pointmamba.point.batch import PointBatch

    torch.manual_seed(0)
    model = build_model(_small()).eval()
    point = PointBatch(torch.rand(200, 3) * 10, torch.randn(200, 6), offset=torch.tensor([120, 200]), grid_size=0.5,
                       segment=torch.zeros(200, dtype=torch.long))
    with torch.no_grad():
        out = model(point)
    assert set(point.extra) == {"segment"} and point.cache
    point.clear_cache()
    assert point.cache == {}
    with torch.no_grad():
        assert torch.equal(model(point), out)
