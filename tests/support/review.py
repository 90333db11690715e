"""For the review page's tests: a real sample scan (``data/samples``) segmented by a tiny untrained model
(a real Segmentation in a few seconds, no shared data), and a page's embedded data read back strictly."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from support.tiny import untrained_checkpoint

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "MSN021" / "MSN021_lower.obj"


def segment_sample(tmp: Path) -> tuple[Any, np.ndarray, bytes]:
    """(the Segmentation of ``SAMPLE``, its reference FDI labels, its picture as PNG bytes)."""
    from pointmamba import Segmenter
    from pointmamba.data import read_labels

    segmenter = Segmenter(untrained_checkpoint(tmp / "tiny.pth"), device="cpu", infer={"graph_cut": False})
    result = segmenter(SAMPLE)
    ref = read_labels(SAMPLE.with_suffix(".json")).labels
    return result, ref, result.save_png(tmp / "picture.png").read_bytes()


def page_data(html: str) -> dict:
    """The JSON in a page's data block, parsed strictly (``NaN`` or ``Infinity`` in it is an error)."""
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1)

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in the page's JSON")

    return json.loads(block, parse_constant=refuse)
