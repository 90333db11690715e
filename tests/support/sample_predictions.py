"""Record the shipped model's predictions of the three sample scans (``tests/fixtures/sample_predictions.json``).

``python tests/support/sample_predictions.py`` rewrites the record from the code as it is: run it only when a
change of behaviour is meant, and say so in the commit. ``tests/test_sample_predictions.py`` compares against it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "fixtures" / "sample_predictions.json"
SAMPLES = sorted((ROOT / "data" / "samples").glob("*/*.obj"))


def predict_samples() -> dict[str, dict]:
    """Each sample's JSON document as ``Segmenter`` (shipped model, default inference, one thread) writes it."""
    import torch

    from pointmamba import Segmenter

    torch.set_num_threads(1)
    segmenter = Segmenter(device="cpu")
    return {path.stem: segmenter(path).to_json() for path in SAMPLES}


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import torch

    from support.reference_run import machine_signature

    RECORD.write_text(json.dumps({"signature": machine_signature(), "torch": torch.__version__,
                                  "scans": predict_samples()}, separators=(",", ":")) + "\n")
    print(f"wrote {RECORD}")


if __name__ == "__main__":
    main()
