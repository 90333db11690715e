"""How close the training step's matrix products run to this CPU's matmul peak, in float32 and bfloat16.

Times the largest products of a 16k-point training step of the default model (shapes read off the torch
profiler: the Mamba in/out projections and their gradients, per stage) against a 2048^3 square product,
which is as close to the peak as torch gets here. If the model's shapes already run near the square's
rate, no reordering or fusing of them can speed the step much; only fewer or cheaper FLOPs can.

    .venv/bin/python bench/matmul.py              # 2 threads, readable table
    .venv/bin/python bench/matmul.py --json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402

tune_cpu_runtime()

import torch  # noqa: E402

# (rows, inner, cols) of the step's heaviest products (bench/model.py, grid 0.2 mm, 16k points)
SHAPES = [(6156, 128, 512), (6156, 128, 256), (256, 6156, 128), (11899, 64, 128), (128, 11899, 64),
          (1870, 256, 1024), (512, 1870, 256), (16000, 32, 128)]
SQUARE = (2048, 2048, 2048)


def gflops(shape: tuple[int, int, int], dtype: torch.dtype, repeats: int) -> float:
    """Best-of-``repeats`` GFLOP/s of one (m, k) @ (k, n) product."""
    m, k, n = shape
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        square = gflops(SQUARE, dtype, max(3, args.repeats // 3))
        shapes = {f"{m}x{k}x{n}": gflops((m, k, n), dtype, args.repeats) for m, k, n in SHAPES}
        flops = [2 * m * k * n for m, k, n in SHAPES]
        # the shapes' combined rate: their FLOPs over the sum of their times
        combined = sum(flops) / sum(f / (shapes[key] * 1e9) for f, key in zip(flops, shapes)) / 1e9
        rows.append({"dtype": str(dtype).replace("torch.", ""), "square_gflops": square,
                     "model_shapes_gflops": combined, "share_of_square": combined / square, "per_shape": shapes})
    if args.json:
        print(json.dumps({"threads": args.threads, "rows": rows}))
        return
    print(f"{args.threads} threads; GFLOP/s, best of {args.repeats}")
    print(f"{'dtype':<10}{'2048^3':>9}{'model shapes':>14}{'share':>8}")
    for r in rows:
        print(f"{r['dtype']:<10}{r['square_gflops']:>9.1f}{r['model_shapes_gflops']:>14.1f}"
              f"{r['share_of_square']:>8.0%}")


if __name__ == "__main__":
    main()
