"""Throughput of space-filling-curve encoding (and decoding) on random points.

Target: all four orders of 1M points at depth 16 in <= 1 s total on 2 CPU threads.

    .venv/bin/python bench/serialization.py            # readable table
    .venv/bin/python bench/serialization.py --json     # one JSON object of the figures
"""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pointmamba.point.serialization import ORDERS, decode, encode  # noqa: E402
from bench._timing import print_json, wall_times  # noqa: E402

TARGET_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--depths", type=int, nargs="+", default=[10, 16])
    parser.add_argument("--samples", type=int, default=8, help="batch indices spread over the points")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    batch = torch.sort(torch.randint(0, args.samples, (args.points,), generator=gen)).values.to(args.device)

    rows = []
    for depth in args.depths:
        grid = torch.randint(0, 1 << depth, (args.points, 3), generator=gen).to(args.device)
        for order in ORDERS:
            code = encode(grid, batch, depth, order)
            enc = min(wall_times(lambda: encode(grid, batch, depth, order), args.repeats, warmup=True))
            dec = min(wall_times(lambda: decode(code, depth, order), args.repeats, warmup=True))
            rows.append({"depth": depth, "order": order, "encode_s": enc, "decode_s": dec,
                         "encode_mpts_per_s": args.points / enc / 1e6})
    totals = {str(d): sum(r["encode_s"] for r in rows if r["depth"] == d) for d in args.depths}
    top = str(max(args.depths))
    result = {
        "points": args.points, "threads": args.threads, "device": args.device, "samples": args.samples,
        "repeats": args.repeats, "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__, "rows": rows, "encode_all_orders_s": totals,
        "target_s": TARGET_S, "meets_target": totals[top] <= TARGET_S,
    }
    if print_json(args.json, result):
        return
    print(f"{args.points:,} random points, {args.samples} samples, {args.threads} threads, {args.device}, "
          f"best of {args.repeats}")
    print(f"{'depth':>5}  {'order':<14}{'encode ms':>10}{'decode ms':>10}{'Mpts/s':>9}")
    for r in rows:
        print(f"{r['depth']:>5}  {r['order']:<14}{r['encode_s'] * 1e3:>10.1f}{r['decode_s'] * 1e3:>10.1f}"
              f"{r['encode_mpts_per_s']:>9.1f}")
    for d, t in totals.items():
        print(f"depth {d}: all four orders encode in {t * 1e3:.0f} ms")
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(f"depth {top}: {verdict} the target of {TARGET_S:.1f} s for all four orders")


if __name__ == "__main__":
    main()
