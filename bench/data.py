"""Data pipeline benchmark: load + preprocess a synthetic jaw the first time and from the cache.

    python bench/data.py [--vertices 120000] [--repeat 5] [--json]

Rows: synthesis of a 20k-vertex jaw (target < 1 s), OBJ parse, label JSON parse, first item (parse + normals + pose + cache write + sampling),
cached item (new dataset object: .npz load + align + grid sample), in-memory item, cached training
item (with DEFAULT_AUGMENT). Times are medians over ``--repeat`` runs, in seconds. Target: cached < 0.2 s.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pointmamba.utils.cpu_runtime import tune_cpu_runtime  # noqa: E402

tune_cpu_runtime()  # as tools/ do, before torch is imported

from pointmamba.data import DEFAULT_AUGMENT, Teeth3DSDataset, read_labels, read_obj, save_scan, synthetic_jaw  # noqa: E402
from pointmamba.data.dataset import ItemOptions  # noqa: E402


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(vertices: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp) / "scans", Path(tmp) / "cache"
        t0 = time.perf_counter()
        scan = synthetic_jaw(0, "upper", vertices)
        t_synth = time.perf_counter() - t0
        t_synth20k = _median_time(lambda: synthetic_jaw(1, "lower", 20000), repeat)
        obj = save_scan(root, scan)
        (root / "all.txt").write_text(f"{scan.id_patient}_upper\n")
        kw = dict(split_file=root / "all.txt", cache_dir=cache, items=ItemOptions(grid_size=0.2, mode="test"))

        def first() -> None:
            for f in cache.glob("*"):
                f.unlink()
            Teeth3DSDataset(root, **kw)[0]

        result = {
            "vertices": int(scan.num_vertices),
            "faces": int(scan.num_faces),
            "synthesize_s": t_synth,
            "synthesize_20k_s": t_synth20k,
            "parse_obj_s": _median_time(lambda: read_obj(obj), repeat),
            "parse_json_s": _median_time(lambda: read_labels(obj.with_suffix(".json")), repeat),
            "first_item_s": _median_time(first, repeat),
        }
        Teeth3DSDataset(root, **kw)[0]  # make sure the cache is filled
        result["cached_item_s"] = _median_time(lambda: Teeth3DSDataset(root, **kw)[0], repeat)
        mem = Teeth3DSDataset(root, in_memory=True, **kw)
        mem[0]
        result["in_memory_item_s"] = _median_time(lambda: mem[0], repeat)
        train = Teeth3DSDataset(root, **{**kw, "items": ItemOptions(grid_size=0.2, mode="train", augment=DEFAULT_AUGMENT)})
        train[0]
        result["cached_train_item_s"] = _median_time(lambda: train[0], repeat)
        result["rows_after_grid"] = int(len(mem[0]["coord"]))
    result["target_cached_s"] = 0.2
    result["cached_ok"] = result["cached_item_s"] < 0.2
    result["python"] = platform.python_version()
    result["machine"] = platform.machine()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vertices", type=int, default=120000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    res = run(args.vertices, args.repeat)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"data pipeline, synthetic upper jaw: {res['vertices']} vertices, {res['faces']} faces, "
          f"{res['rows_after_grid']} rows after 0.2 mm grid (median of {args.repeat})")
    print(f"{'step':<34}{'seconds':>10}")
    for key, label in [("synthesize_20k_s", "synthesize 20k-vertex jaw"), ("synthesize_s", "synthesize (once)"), ("parse_obj_s", "parse OBJ"),
                       ("parse_json_s", "parse label JSON"), ("first_item_s", "first item (no cache)"),
                       ("cached_item_s", "cached item (disk .npz)"), ("in_memory_item_s", "in-memory item"),
                       ("cached_train_item_s", "cached train item (augmented)")]:
        print(f"{label:<34}{res[key]:>10.3f}")
    print(f"cached < {res['target_cached_s']} s: {'yes' if res['cached_ok'] else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
