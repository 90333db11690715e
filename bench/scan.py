"""Speed and memory of the CPU selective scan (numba forward + hand-written backward) on 2 threads.

Shapes are one Mamba layer's scan: batch 1, d_inner 256, d_state 16, with delta_bias + softplus, D and the
z gate (as ``Mamba.forward`` calls it). For each L the figures come from a fresh subprocess, so that the
peak resident memory is that L's alone; JIT compilation / cache loading is done before timing. Beside it,
the baseline: autograd through a plain torch loop over ``unbind``-ed time steps, where it finishes within
--baseline-limit seconds (larger L are skipped with a note).

Target: fwd+bwd at L = 16384 <= 1.5 s.

    .venv/bin/python bench/scan.py                 # readable table
    .venv/bin/python bench/scan.py --json          # one JSON object, one entry per L
    .venv/bin/python bench/scan.py --lengths 16384 --repeats 5
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402
from bench._timing import print_json, wall_times  # noqa: E402

tune_cpu_runtime()  # as tools/ do, before torch is imported

TARGET_L = 16384
TARGET_S = 1.5
DIM, NSTATE = 256, 16


def _rss_mb(field: str) -> float | None:
    """VmRSS / VmHWM of this process from /proc, in MiB (None where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so the warm-up's peak is not counted."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_mb(reset_ok: bool) -> float:
    hwm = _rss_mb("VmHWM") if reset_ok else None
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _inputs(length: int, requires_grad: bool, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    t = {
        "u": torch.randn(1, DIM, length, generator=g),
        "delta": torch.randn(1, DIM, length, generator=g) - 2.0,
        "A": -torch.arange(1, NSTATE + 1, dtype=torch.float32).repeat(DIM, 1),
        "B": torch.randn(1, NSTATE, length, generator=g),
        "C": torch.randn(1, NSTATE, length, generator=g),
        "D": torch.ones(DIM),
        "z": torch.randn(1, DIM, length, generator=g),
        "delta_bias": torch.full((DIM,), -3.0),
    }
    return {k: v.requires_grad_(requires_grad) for k, v in t.items()}


def baseline_scan(u, delta, A, B, C, D, z, delta_bias):
    """The recurrence as a plain torch loop over time steps (what autograd would otherwise have to trace)."""
    import torch
    import torch.nn.functional as F

    delta = F.softplus(delta + delta_bias[:, None])
    h = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for dt, ut, bt, ct in zip(delta.unbind(-1), u.unbind(-1), B.unbind(-1), C.unbind(-1)):
        h = torch.exp(dt[..., None] * A) * h + (dt * ut)[..., None] * bt[:, None, :]
        ys.append((h * ct[:, None, :]).sum(-1))
    return (torch.stack(ys, -1) + u * D[:, None]) * F.silu(z)


def worker(kind: str, length: int, repeats: int, threads: int) -> dict:
    """Runs in the subprocess: time one L and report the peak RSS of the timed runs."""
    import numba
    import torch

    from pointmamba.ops.scan import selective_scan

    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if kind == "engine":
        small = _inputs(64, True)
        selective_scan(**small, delta_softplus=True).sum().backward()  # JIT compile / load the cache
        fn = selective_scan
    else:
        fn = baseline_scan
    x = _inputs(length, True)

    def fwd() -> None:
        with torch.no_grad():
            fn(**x, delta_softplus=True) if kind == "engine" else fn(**x)

    def fwdbwd() -> None:
        for v in x.values():
            v.grad = None
        y = fn(**x, delta_softplus=True) if kind == "engine" else fn(**x)
        y.sum().backward()

    out: dict = {}
    if kind == "engine":
        fwd()  # warm-up at this L (page faults of first allocations)
        out["base_rss_mb"] = _rss_mb("VmRSS")
        reset_ok = _reset_peak_rss()
        out["fwd_s"] = min(wall_times(fwd, repeats))
        out["fwdbwd_s"] = min(wall_times(fwdbwd, repeats))
    else:
        out["base_rss_mb"] = _rss_mb("VmRSS")
        reset_ok = _reset_peak_rss()
        out["fwdbwd_s"] = min(wall_times(fwdbwd, repeats))
    out["peak_rss_mb"] = _peak_rss_mb(reset_ok)
    out["numba_threads"] = numba.get_num_threads()
    return out


def _spawn(kind: str, length: int, repeats: int, threads: int, timeout: float | None) -> dict | None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--lengths", str(length),
           "--repeats", str(repeats), "--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"bench/scan.py worker ({kind}, L={length}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many timed runs per figure")
    parser.add_argument("--threads", type=int, default=2, help="torch and numba threads")
    parser.add_argument("--baseline-limit", type=float, default=60.0,
                        help="seconds the baseline's fwd+bwd may take before larger L are skipped")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--worker", choices=["engine", "baseline"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, args.lengths[0], args.repeats, args.threads)))
        return

    results: dict[str, dict] = {}
    last_baseline: tuple[int, float] | None = None
    baseline_off = args.no_baseline
    for length in args.lengths:
        row = _spawn("engine", length, args.repeats, args.threads, None)
        entry = {"fwd_s": row["fwd_s"], "fwdbwd_s": row["fwdbwd_s"], "peak_rss_mb": row["peak_rss_mb"],
                 "base_rss_mb": row["base_rss_mb"], "baseline_fwdbwd_s": None, "baseline_peak_rss_mb": None,
                 "baseline_note": None}
        if baseline_off:
            entry["baseline_note"] = "skipped" if args.no_baseline else "skipped: a shorter L already took too long"
        else:
            predicted = None if last_baseline is None else last_baseline[1] * length / last_baseline[0]
            if predicted is not None and predicted > 2 * args.baseline_limit:
                entry["baseline_note"] = f"skipped: predicted {predicted:.0f} s > {args.baseline_limit:.0f} s"
                baseline_off = True
            else:
                # one timed run (plus its warm-up-free start-up) must end within the limit
                base = _spawn("baseline", length, 1, args.threads, args.baseline_limit + 30)
                if base is None or base["fwdbwd_s"] > args.baseline_limit:
                    entry["baseline_note"] = f"skipped: did not finish within {args.baseline_limit:.0f} s"
                    baseline_off = True
                else:
                    entry["baseline_fwdbwd_s"] = base["fwdbwd_s"]
                    entry["baseline_peak_rss_mb"] = base["peak_rss_mb"]
                    last_baseline = (length, base["fwdbwd_s"])
        results[str(length)] = entry

    if print_json(args.json, results):
        return
    print(f"selective scan, batch 1, d_inner {DIM}, d_state {NSTATE}, {args.threads} threads, "
          f"best of {args.repeats}, {platform.processor() or platform.machine()}")
    print(f"{'L':>7}{'fwd s':>9}{'fwd+bwd s':>11}{'peak RSS MB':>13}{'baseline fwd+bwd s':>20}{'baseline RSS MB':>17}")
    for length, e in results.items():
        base = f"{e['baseline_fwdbwd_s']:.2f}" if e["baseline_fwdbwd_s"] is not None else "-"
        base_rss = f"{e['baseline_peak_rss_mb']:.0f}" if e["baseline_peak_rss_mb"] is not None else "-"
        print(f"{length:>7}{e['fwd_s']:>9.3f}{e['fwdbwd_s']:>11.3f}{e['peak_rss_mb']:>13.0f}{base:>20}{base_rss:>17}")
    notes = {e["baseline_note"] for e in results.values() if e["baseline_note"]}
    for note in sorted(notes):
        print(f"baseline: {note}")
    if str(TARGET_L) in results:
        t = results[str(TARGET_L)]["fwdbwd_s"]
        verdict = "meets" if t <= TARGET_S else "MISSES"
        print(f"L={TARGET_L}: fwd+bwd {t:.2f} s {verdict} the target of {TARGET_S} s")


if __name__ == "__main__":
    main()
