"""bench/gpu_check.py on a machine without CUDA: the CPU rows run and hold measured numbers within their
tolerances, every CUDA row says "skipped: no CUDA", the exit status is 0 and the JSON round-trips. The
agreement machinery is the one CUDA uses: here it compares the CPU's torch backends with the numba ones,
and it must catch a backend that computes something else. ``--stand-in`` runs the CUDA rows' code
(training run, checkpoint on CPU, timings) on the CPU (slow tests). Also bench/gpu_build.py's patch.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import gpu_build  # noqa: E402
import gpu_check  # noqa: E402
from gpu_check import QUICK, REFERENCE, Row, Where, agreement_rows  # noqa: E402

CPU_TORCH = Where("cpu", "torch")


def run_cli(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict, list[Row]]:
    """gpu_check.py --quick with CUDA hidden; (process, JSON, rows)."""
    out = tmp_path / "gpu_check.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--quick", "--json", str(out), *args],
                          capture_output=True, text=True, env=env, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data, rows = gpu_check.load_rows(out)
    return proc, data, rows


def check_cpu_and_cuda_rows(proc: subprocess.CompletedProcess, data: dict, rows: list[Row]) -> None:
    assert data["complete"] and data["exit_status"] == 0 and data["quick"] is True
    assert data["environment"]["torch"] == torch.__version__ and "cuda" not in data["environment"]
    cuda = [r for r in rows if r.where.startswith("cuda")]
    cpu = [r for r in rows if r.where.startswith("cpu")]
    assert cuda and cpu
    assert {r.status for r in cuda} == {"skipped: no CUDA"}
    for r in cpu:
        assert r.status == "ok", r
        if r.limit is not None:  # a measured number inside its tolerance
            assert isinstance(r.value, float) and math.isfinite(r.value)
            assert r.value <= r.limit if r.sense == "<=" else r.value >= r.limit
    # the JSON holds the rows the table printed, and reads back into the same rows
    assert gpu_check.table(rows) in proc.stdout
    assert [Row.from_dict(asdict(r)) for r in rows] == rows


def test_cli_without_cuda_runs_the_cpu_rows_and_skips_the_cuda_rows(tmp_path):
    proc, data, rows = run_cli(tmp_path, "--sections", "backends", "speed")
    check_cpu_and_cuda_rows(proc, data, rows)
    by = {(r.check, r.where): r for r in rows}
    assert by[("backend per op", "cpu auto")].value == "scan=numba conv1d=numba spconv=torch"
    assert by[("backend per op", "cpu torch")].value == "scan=torch conv1d=torch spconv=torch"
    assert ("backend per op", "cuda ext") in by
    numba = by[(gpu_check.scan_speed_check(QUICK, "numba"), "cpu auto")]
    assert numba.value > 0 and numba.unit == "s" and numba.detail["runs"] >= 3
    for backend in ("torch", "mamba_ssm"):
        assert by[(gpu_check.scan_speed_check(QUICK, backend), "cuda torch" if backend == "torch" else "cuda ext")]
    assert any(r.check.startswith("network only") for r in rows)  # CUDA speed rows listed, skipped


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("case", ["scan", "conv1d", "sparse conv", "cpe"])
def test_op_agreement_of_the_cpu_torch_backends(case, precision):
    (row,) = agreement_rows(case, CPU_TORCH, precision, QUICK, REFERENCE, {})
    assert row.status == "ok" and math.isfinite(row.value) and row.value <= row.limit, row
    assert row.detail["reference"] == "cpu auto"
    if case in ("scan", "conv1d") or precision == "bf16":
        assert row.value > 0  # two engines (torch vs numba) or two precisions were compared, not one twice
    else:
        assert row.value == 0  # both CPU combinations run the torch sparse conv: identical


def test_agreement_catches_a_backend_that_computes_something_else(monkeypatch):
    import pointmamba.ops.conv1d as conv1d

    real = conv1d._causal_conv1d_torch
    monkeypatch.setattr(conv1d, "_causal_conv1d_torch", lambda x, w, b, silu: real(x, w * 1.001, b, silu))
    (row,) = agreement_rows("conv1d", CPU_TORCH, "fp32", QUICK, REFERENCE, {})
    assert row.status == "FAIL" and row.value > row.limit
    assert gpu_check.failed([row])


def test_network_rows_against_the_reference_itself(one_thread):
    """The network rows' code, fast: the reference's own backends in float32 agree exactly."""
    refs: dict = {}
    rows = agreement_rows("network", REFERENCE, "fp32", QUICK, REFERENCE, refs)
    assert [r.check for r in rows] == gpu_check.agreement_checks("network", "fp32")
    assert [(r.value, r.status) for r in rows] == [(0.0, "ok"), (1.0, "ok"), (0.0, "ok")]
    assert rows[0].detail["rows"] > 1000 and rows[2].detail["parameters"] > 100



def test_network_logits_follow_the_shipped_weights_and_gradients_a_fresh_init(monkeypatch, one_thread):
    """Logits come from the shipped file; gradients from the seeded fresh initialization, whatever ships."""
    base = gpu_check.case_network(torch.device("cpu"), "fp32", True, QUICK)
    real = gpu_check.shipped_model

    def other_weights(device: torch.device):
        model, cfg = real(device)
        with torch.no_grad():
            model.head[-1].weight.mul_(1.5)
        return model, cfg

    monkeypatch.setattr(gpu_check, "shipped_model", other_weights)
    other = gpu_check.case_network(torch.device("cpu"), "fp32", True, QUICK)
    assert not torch.equal(other["logits"], base["logits"])
    grads = [k for k in base if k.startswith("grad.")]
    assert len(grads) > 100 and all(torch.equal(other[k], base[k]) for k in grads)
    monkeypatch.setattr(gpu_check, "GRADIENT_INIT_SEED", 1)
    reseeded = gpu_check.case_network(torch.device("cpu"), "fp32", True, QUICK)
    assert not torch.equal(reseeded["grad.cpe_stem.conv.weight"], base["grad.cpe_stem.conv.weight"])

@pytest.mark.slow
def test_network_agreement_under_bf16_autocast(one_thread):
    """bf16 on the CPU is slow (no bf16 matmul units here): 16 s for one 3k-point forward + backward."""
    refs: dict = {}
    rows = agreement_rows("network", REFERENCE, "bf16", QUICK, REFERENCE, refs)
    assert [r.check for r in rows] == gpu_check.agreement_checks("network", "bf16")
    for r in rows:
        assert r.status == "ok" and math.isfinite(r.value), r
    logits, argmax, grads = rows
    assert 0 < logits.value and 0 < grads.value and argmax.value >= argmax.limit
    assert set(refs) == {("network", "fp32")}  # one float32 reference serves both precisions


def test_judging_tolerances_targets_and_errors():
    ok = gpu_check.judged(Row("agreement", "x", "cpu torch", 1e-5, limit=1e-4, sense="<="))
    fail = gpu_check.judged(Row("agreement", "x", "cpu torch", 2e-4, limit=1e-4, sense="<="))
    nan = gpu_check.judged(Row("agreement", "x", "cpu torch", math.nan, limit=1e-4, sense="<="))
    miss = gpu_check.judged(Row("speed", "x", "cuda torch", 10.0, limit=200.0, sense=">="), "target")
    assert [r.status for r in (ok, fail, nan, miss)] == ["ok", "FAIL", "FAIL", "MISS"]
    assert not gpu_check.failed([ok, miss]) and gpu_check.failed([ok, fail])
    ref = torch.linspace(-2, 3, 50)
    assert gpu_check.rel_error(ref * 1.01, ref) == pytest.approx(0.01, rel=1e-6)
    assert gpu_check.rel_error(torch.full((50,), math.nan), ref) == math.inf

    def broken() -> list[Row]:
        raise ValueError("a CUDA kernel said no\nsecond line")

    rows = gpu_check.run_task(gpu_check.Task([("speed", "a"), ("memory", "b")], Where("cuda", "torch"), broken))
    assert [r.status for r in rows] == ["error: ValueError: a CUDA kernel said no"] * 2
    assert "Traceback" in rows[0].detail["traceback"] and gpu_check.failed(rows)
    skipped = gpu_check.run_task(gpu_check.Task([("speed", "a")], Where("cuda", "auto"), broken, "skipped: no CUDA"))
    assert skipped[0].status == "skipped: no CUDA" and skipped[0].where == "cuda ext"


def test_json_output_is_written_atomically_and_never_over_a_foreign_file(tmp_path):
    foreign = tmp_path / "notes.json"
    foreign.write_text(json.dumps({"mine": 1}))
    with pytest.raises(SystemExit, match="not an earlier gpu_check result"):
        gpu_check.check_output_path(foreign)
    with pytest.raises(SystemExit, match="does not exist"):
        gpu_check.check_output_path(tmp_path / "missing" / "out.json")
    out = tmp_path / "out.json"
    args = gpu_check.argparse.Namespace(quick=True)
    rows = [Row("backends", "backend per op", "cpu auto", "scan=numba"), Row("speed", "s", "cuda torch", status="skipped: no CUDA")]
    gpu_check.write_json(out, {"torch": torch.__version__}, rows, args, "now", done=True)
    gpu_check.check_output_path(out)  # an earlier result may be replaced
    data, back = gpu_check.load_rows(out)
    assert back == rows and data["format"] == gpu_check.FORMAT and data["exit_status"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "out.json"]  # no temporary file left


UPSTREAM_LIKE = '''
if not SKIP_CUDA_BUILD:
    cc_flag = []
    if HIP_BUILD:
        cc_flag.append("-DBUILD_PYTHON_PACKAGE")
    else:
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_75,code=sm_75")
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_80,code=sm_80")
        if bare_metal_version >= Version("11.8"):
            cc_flag.append("-gencode")
            cc_flag.append("arch=compute_90,code=sm_90")
        if bare_metal_version >= Version("12.8"):
            cc_flag.append("-gencode")
            cc_flag.append("arch=compute_100,code=sm_100")

    # HACK: the ABI flag
    if FORCE_CXX11_ABI:
        pass
'''


def test_gpu_build_keeps_one_architecture():
    out = gpu_build.one_arch(UPSTREAM_LIKE, "90")
    compile(out, "setup.py", "exec")
    assert 'cc_flag.append("arch=compute_90,code=sm_90")' in out
    assert "sm_75\")" not in out and "sm_80\")" not in out and "sm_100\")" not in out
    assert out.count('cc_flag.append("-gencode")') == 1
    assert gpu_build.one_arch(out, "90") == out  # idempotent
    with pytest.raises(ValueError, match="sm_89 is not among"):
        gpu_build.one_arch(UPSTREAM_LIKE, "89")
    with pytest.raises(ValueError, match="no cc_flag"):
        gpu_build.one_arch("setup()\n", "90")


@pytest.mark.slow
def test_cli_quick_every_section_without_cuda(tmp_path):
    proc, data, rows = run_cli(tmp_path)
    check_cpu_and_cuda_rows(proc, data, rows)
    agreement = [r for r in rows if r.section == "agreement" and r.where == "cpu torch"]
    assert len(agreement) == 2 * 7 and all(isinstance(r.value, float) for r in agreement)
    fp32 = {r.check: r.value for r in agreement if "fp32" in r.check}
    assert 0 < fp32["network logits (fp32)"] <= 1e-4 and fp32["network argmax (fp32)"] == 1.0


@pytest.mark.slow
def test_stand_in_runs_the_cuda_rows_code_on_the_cpu(tmp_path):
    proc, data, rows = run_cli(tmp_path, "--stand-in", "--sections", "training", "speed", "memory")
    here = [r for r in rows if r.where == "cpu as cuda torch"]
    by = {r.check: r for r in here}
    train, same_net, same_seg = (by[c] for _, c in gpu_check.training_checks(QUICK))
    assert train.status == "ok" and math.isfinite(train.value) and train.detail["steps"] >= 2
    assert same_net.value == 1.0 and same_seg.value == 1.0  # the same CPU on both sides
    for _, check in gpu_check.throughput_checks(QUICK) + gpu_check.inference_checks(QUICK):
        row = by[check]
        if row.section == "memory":
            assert row.status == "skipped: no GPU memory on cpu"
        else:
            assert row.value > 0 and row.status in ("ok", "MISS"), row
    seg = by[gpu_check.inference_checks(QUICK)[2][1]]  # segment_scan: where its time goes, step by step
    steps = seg.detail["steps_median_s"]
    assert {"preprocess", "network", "refine"} <= set(steps) and all(v > 0 for v in steps.values())
    assert sum(steps.values()) <= seg.detail["max_s"] * 1.01
    assert {r.status for r in rows if r.where == "cpu as cuda ext"} == {"skipped: the CUDA extensions need CUDA (stand-in)"}
