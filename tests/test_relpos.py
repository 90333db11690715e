"""RelPos: step geometry, presets, init scale on a real scan, quantile running estimate, identity switch."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pointmamba.models.network import build_model
from pointmamba.models.relpos import RECORD_KEYS, RelPos, RelPosConfig, relative_steps
from pointmamba.point.batch import PointBatch


def _load_real_scan(scans_dir) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """(coord, normal) of MSN001_lower: the project's loader when present, else the OBJ ``v`` lines."""
    path = scans_dir / "MSN001" / "MSN001_lower.obj"
    try:
        from pointmamba.data.scan import load_scan

        scan = load_scan(path)
        return torch.as_tensor(scan.vertices, dtype=torch.float32), torch.as_tensor(scan.vertex_normals(), dtype=torch.float32)
    except ImportError:
        v = np.array([ln.split()[1:4] for ln in path.read_text().splitlines() if ln.startswith("v ")], dtype=np.float32)
        coord = torch.from_numpy(v)
        return coord, torch.nn.functional.normalize(coord - coord.mean(0), dim=1)


def _random_batch(gen: torch.Generator, sizes: list[int], spread: float = 5.0) -> PointBatch:
    coord = torch.rand(sum(sizes), 3, generator=gen) * spread
    point = PointBatch(coord, torch.randn(sum(sizes), 8, generator=gen), offset=torch.tensor(sizes).cumsum(0), grid_size=0.5)
    return point.serialize(("z", "hilbert"))


def test_steps_stay_within_samples() -> None:
    point = _random_batch(torch.Generator().manual_seed(0), [30, 1, 45])
    for k in range(2):
        step, first = relative_steps(point, k)
        seq = point.order[k]
        assert int(first.sum()) == 3 and first[seq[0]] and first[seq[30]] and first[seq[31]]
        assert torch.equal(step[first], torch.zeros(3, 3))
        c, s = point.coord[seq], step[seq]
        same = ~first[seq][1:]
        torch.testing.assert_close(s[1:][same], (c[1:] - c[:-1])[same])


def test_presets_and_overrides() -> None:
    naive = RelPosConfig.from_dict({"preset": "naive"})
    assert (naive.gate_bias_init, naive.final_norm, naive.scale_init, naive.max_rel_dist) == (0.0, False, 1.0, 5.0)
    fixed = RelPosConfig.from_dict({"preset": "fixed", "normalization": "quantile"})
    assert (fixed.gate_bias_init, fixed.final_norm, fixed.scale_init) == (-2.0, True, 0.1)
    assert fixed.normalization == "quantile"  # "fixed + quantile" is a valid ablation
    assert RelPosConfig.from_dict({"preset": "naive", "final_norm": True}).final_norm is True
    with pytest.raises(ValueError, match="custom"):
        RelPosConfig.from_dict({"preset": "custom", "gate_bias_init": -1.0})
    with pytest.raises(ValueError, match="normalization"):
        RelPosConfig.from_dict({"normalization": "median"})
    m = RelPos(16, RelPosConfig.from_dict({"preset": "naive"}))
    assert not any(isinstance(x, torch.nn.LayerNorm) for x in (m.dist_encoder[-1], m.dir_encoder[-1]))
    assert float(m.scale.detach()) == 1.0 and torch.equal(m.gate_bias, torch.zeros(16))


@pytest.mark.parametrize("preset", ["fixed", "naive"])
def test_init_scale_on_real_scan(scans_dir, preset: str) -> None:  # noqa: ANN001
    coord, normal = _load_real_scan(scans_dir)
    torch.manual_seed(0)
    model = build_model({"relpos": {"preset": preset}}).eval()
    point = PointBatch(coord, torch.cat([(coord - coord.mean(0)) / 30.0, normal], 1), grid_size=0.2)
    point.serialize(model.orders)
    relpos = model.enc[0].position.relpos_for(0)
    relpos.record = {}
    with torch.no_grad():  # exactly what the network runs before its first block
        feat = model.enc[0].position.pre(model.cpe_stem(point.feat, point), point)
        relpos(feat, point, 0)
    rec = relpos.record
    gate_mean = float(rec["gate"].mean())
    ratio = float(rec["contribution"].std() / rec["feat"].std())
    print(f"\n{preset}: gate mean {gate_mean:.4f} (sigmoid(-2) = {1 / (1 + math.exp(2)):.4f}), "
          f"std(scale*gate*pos)/std(feat) = {ratio:.4f}")
    if preset == "fixed":
        assert abs(gate_mean - 1 / (1 + math.exp(2))) <= 0.02
        assert ratio <= 0.05
    else:
        assert ratio >= 0.3


def test_record_only_when_listening() -> None:
    point = _random_batch(torch.Generator().manual_seed(1), [40, 25])
    m = RelPos(8)
    out = m(point.feat, point, 0)
    assert m.record is None
    m.record = {}
    torch.testing.assert_close(m(point.feat, point, 0), out)
    assert set(RECORD_KEYS) <= set(m.record) and all(not v.requires_grad for k, v in m.record.items() if k in RECORD_KEYS)
    m.ramp = 0.5
    torch.testing.assert_close(m(point.feat, point, 0) - point.feat, (out - point.feat) * 0.5)


def test_disabled_is_exact_identity() -> None:
    point = _random_batch(torch.Generator().manual_seed(2), [20, 30])
    m = RelPos(8, RelPosConfig.from_dict({"preset": "naive", "normalization": "quantile"}))
    m.train()
    m.enabled = False
    assert m(point.feat, point, 1) is point.feat
    assert int(m.num_batches_tracked) == 0  # no statistics either


def test_quantile_running_estimate_used_in_eval() -> None:
    gen = torch.Generator().manual_seed(3)
    cfg = RelPosConfig.from_dict({"normalization": "quantile", "quantile_momentum": 0.5})
    m = RelPos(8, cfg)
    m.train()
    first = _random_batch(gen, [200, 150], spread=4.0)
    m(first.feat, first, 0)
    step, is_first = relative_steps(first, 0)
    d = step.norm(dim=1)
    q0 = torch.quantile(d[(d > 0) & ~is_first], 0.95)
    torch.testing.assert_close(m.running_scale, q0)  # the first batch sets the estimate
    second = _random_batch(gen, [300], spread=20.0)
    m(second.feat, second, 0)
    assert float(m.running_scale) > float(q0) and int(m.num_batches_tracked) == 2

    m.eval()
    buffer = m.running_scale.clone()
    a = _random_batch(gen, [120], spread=4.0)
    alone = m(a.feat, a, 1)
    far = _random_batch(gen, [90], spread=4.0)
    pair = PointBatch(torch.cat([a.coord, far.coord * 10]), torch.cat([a.feat, far.feat]),
                      offset=torch.tensor([120, 210]), grid_size=0.5).serialize(("z", "hilbert"))
    together = m(pair.feat, pair, 1)[:120]
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-6)  # no batch statistic in eval
    assert torch.equal(m.running_scale, buffer)
    fixed = RelPos(8, RelPosConfig.from_dict({"max_rel_dist": float(buffer)}))
    fixed.load_state_dict(m.state_dict())
    fixed.eval()
    torch.testing.assert_close(fixed(a.feat, a, 1), alone, rtol=1e-6, atol=1e-6)


def test_direction_angles_variant_runs_and_is_finite() -> None:
    point = _random_batch(torch.Generator().manual_seed(4), [50, 3])
    m = RelPos(12, RelPosConfig.from_dict({"direction": "angles"}))
    m.record = {}
    out = m(point.feat[:, :8].repeat(1, 2)[:, :12], point, 0)
    assert torch.isfinite(out).all() and m.dir_encoder[0].in_features == 3
