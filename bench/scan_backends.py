"""The selective scan's backends side by side: speed (fwd, fwd+bwd) and accuracy against a float64 reference.

One Mamba layer's scan as ``Mamba.forward`` calls it: batch 1, d_inner 256, d_state 16, delta_bias +
softplus, D and the z gate. Backends per device: cpu: numba (the default there) and torch (the chunked
scan CUDA runs without mamba-ssm); cuda, where present: torch, triton (our Triton kernels) where triton
imports, and mamba_ssm where it imports. ``--triton-sweep`` adds a row per Triton tile (chunk of time
steps x channels per program) on CUDA, to choose ``scan_triton.CHUNK`` and ``BLOCK_D``.

Accuracy: max |error| / max |reference| of y and of every input's gradient, against the numba engine in
float64 (itself checked against a step-by-step float64 reference and gradcheck in tests/), for two input
sets: "init" (deltas as at initialisation, delta * A around -0.1 per step) and "trained" (large deltas:
delta * A down to about -100 per step).

    .venv/bin/python bench/scan_backends.py                    # table, L = 16384, 2 threads, best of 3
    .venv/bin/python bench/scan_backends.py --lengths 4096 16384 --repeats 5 --json
    python bench/scan_backends.py --devices cuda --triton-sweep   # a GPU: torch, triton, mamba_ssm, tiles
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402

tune_cpu_runtime()  # as tools/ do, before torch is imported

import torch  # noqa: E402

DIM, NSTATE = 256, 16
NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def inputs(length: int, regime: str, device: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    t = {
        "u": torch.randn(1, DIM, length, generator=g),
        "delta": torch.randn(1, DIM, length, generator=g) + (-2.0 if regime == "init" else 2.0),
        "A": -torch.arange(1, NSTATE + 1, dtype=torch.float32).repeat(DIM, 1),
        "B": torch.randn(1, NSTATE, length, generator=g),
        "C": torch.randn(1, NSTATE, length, generator=g),
        "D": torch.ones(DIM),
        "z": torch.randn(1, DIM, length, generator=g),
        "delta_bias": torch.full((DIM,), -3.0 if regime == "init" else 0.0),
    }
    return {k: v.to(device=device, dtype=dtype) for k, v in t.items()}


def run(backend: str, x: dict, grad: bool, seed: int = 1) -> tuple:
    """y (and the gradients of sum(y * gy) for every input) with ``backend`` forced."""
    from pointmamba.ops.scan import selective_scan

    os.environ["POINTMAMBA_BACKEND_SCAN"] = backend
    if not grad:
        with torch.no_grad():
            return selective_scan(**x, delta_softplus=True), None
    leaves = {k: v.detach().clone().requires_grad_() for k, v in x.items()}
    y = selective_scan(**leaves, delta_softplus=True)
    g = torch.Generator().manual_seed(seed)
    gy = torch.randn(y.shape, generator=g).to(device=y.device, dtype=y.dtype)
    return y, torch.autograd.grad((y * gy).sum(), list(leaves.values()))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def best_of(fn, repeats: int, device: str) -> tuple[float, float]:
    """(best, worst) seconds of ``repeats`` timed runs after one warm-up."""
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return min(times), max(times)


def errors(got: tuple, ref: tuple) -> dict[str, float]:
    def rel(a: torch.Tensor, b: torch.Tensor) -> float:
        a, b = a.detach().double().cpu(), b.detach().double().cpu()
        return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))

    out = {"y": rel(got[0], ref[0])}
    out.update({f"d{name}": rel(a, b) for name, a, b in zip(NAMES, got[1], ref[1])})
    return out


def device_backends(device: str) -> list[str]:
    if device == "cpu":
        return ["numba", "torch"]
    from pointmamba.ops import backend

    return (["torch"] + (["triton"] if backend.triton_error() is None else [])
            + (["mamba_ssm"] if backend.extension("scan") is not None else []))


# (chunk, block_d, num_warps): 18 tiles, each compiled once (about 2 s) then timed. All compile for sm_90
# (checked here without a GPU): the backward takes 80-255 registers a thread (64 x 1 x 8: 127) and spills to
# the stack at 64 x 4 x 4, 128 x 2 x 4, 128 x 4 x 4 and 128 x 4 x 8
TRITON_TILES = [(chunk, block, warps) for chunk in (32, 64, 128) for block in (1, 2, 4) for warps in (4, 8)]


def triton_sweep(length: int, repeats: int) -> list[dict]:
    """fwd+bwd seconds of the triton scan on CUDA for every tile in TRITON_TILES; the module's defaults are
    restored afterwards."""
    from pointmamba.ops import scan_triton

    defaults = scan_triton.CHUNK, scan_triton.BLOCK_D, scan_triton.NUM_WARPS
    x = inputs(length, "init", "cuda")
    rows = []
    try:
        for tile in TRITON_TILES:
            scan_triton.CHUNK, scan_triton.BLOCK_D, scan_triton.NUM_WARPS = tile
            row = {"L": length, "device": "cuda", "backend": "triton c{} b{} w{}".format(*tile)}
            try:
                row["fwd_s"] = best_of(lambda: run("triton", x, grad=False), repeats, "cuda")
                row["fwdbwd_s"] = best_of(lambda: run("triton", x, grad=True), repeats, "cuda")
            except Exception as exc:  # noqa: BLE001 - one tile that fails must not end the sweep
                nan = (float("nan"), float("nan"))
                row.update(fwd_s=nan, fwdbwd_s=nan, error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(row)
    finally:
        scan_triton.CHUNK, scan_triton.BLOCK_D, scan_triton.NUM_WARPS = defaults
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16384])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many timed runs per figure")
    parser.add_argument("--threads", type=int, default=2, help="torch and numba threads (CPU)")
    parser.add_argument("--devices", nargs="+", default=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    parser.add_argument("--no-accuracy", action="store_true", help="timings only")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--triton-sweep", action="store_true", help="also time every Triton tile (CUDA)")
    args = parser.parse_args()

    import numba

    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    results: list[dict] = []
    for length in args.lengths:
        refs = {}
        if not args.no_accuracy:  # numba in float64: the reference for both regimes
            for regime in ("init", "trained"):
                refs[regime] = run("numba", inputs(length, regime, "cpu", torch.float64), grad=True)
        for device in args.devices:
            for name in device_backends(device):
                x = inputs(length, "init", device)
                fwd = best_of(lambda: run(name, x, grad=False), args.repeats, device)
                fwdbwd = best_of(lambda: run(name, x, grad=True), args.repeats, device)
                row = {"L": length, "device": device, "backend": name, "fwd_s": fwd, "fwdbwd_s": fwdbwd}
                if device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                    run(name, x, grad=True)
                    row["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
                for regime, ref in refs.items():
                    row[f"err_{regime}"] = errors(run(name, inputs(length, regime, device), grad=True), ref)
                results.append(row)
        if args.triton_sweep and any(d.startswith("cuda") for d in args.devices):
            results.extend(triton_sweep(length, args.repeats))
    os.environ.pop("POINTMAMBA_BACKEND_SCAN", None)

    if args.json:
        print(json.dumps(results))
        return
    print(f"selective scan backends, batch 1, d_inner {DIM}, d_state {NSTATE}, {args.threads} CPU threads, "
          f"best (worst) of {args.repeats}, {platform.processor() or platform.machine()}"
          + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))
    print(f"{'L':>7} {'device':<6} {'backend':<16}{'fwd s':>16}{'fwd+bwd s':>18}  max rel. error vs float64 "
          "(y / worst gradient): init, trained")
    for r in results:
        errs = "".join(f"  {r[k]['y']:.1e} / {max(v for n, v in r[k].items() if n != 'y'):.1e}"
                       for k in ("err_init", "err_trained") if k in r)
        print(f"{r['L']:>7} {r['device']:<6} {r['backend']:<16}{r['fwd_s'][0]:>9.3f} ({r['fwd_s'][1]:.3f})"
              f"{r['fwdbwd_s'][0]:>10.3f} ({r['fwdbwd_s'][1]:.3f}){errs}")


if __name__ == "__main__":
    main()
