"""For the review page's tests: the real sample scans (``data/samples``) segmented by a tiny untrained model
(a real Segmentation in a few seconds, no shared data), a page's embedded data read back strictly, and a
headless Chromium that downloads into a folder."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from support.tiny import untrained_checkpoint

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
SAMPLE = SAMPLES / "MSN021" / "MSN021_lower.obj"


def _segmenter(tmp: Path) -> Any:
    from pointmamba import Segmenter

    return Segmenter(untrained_checkpoint(tmp / "tiny.pth"), device="cpu", infer={"graph_cut": False})


def segment_sample(tmp: Path) -> tuple[Any, np.ndarray, bytes]:
    """(the Segmentation of ``SAMPLE``, its reference FDI labels, its picture as PNG bytes)."""
    from pointmamba.data import read_labels

    result = _segmenter(tmp)(SAMPLE)
    ref = read_labels(SAMPLE.with_suffix(".json")).labels
    return result, ref, result.save_png(tmp / "picture.png").read_bytes()


def segment_samples(tmp: Path) -> list[tuple[Any, np.ndarray, Path]]:
    """Every sample scan (two lower, one upper): (its Segmentation, its reference FDI labels, its OBJ)."""
    from pointmamba.data import read_labels

    segmenter = _segmenter(tmp)
    out = []
    for path in sorted(SAMPLES.glob("*/*.obj")):
        out.append((segmenter(path), read_labels(path.with_suffix(".json")).labels, path))
    return out


def page_data(html: str) -> dict:
    """The JSON in a page's data block, parsed strictly (``NaN`` or ``Infinity`` in it is an error)."""
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1)

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in the page's JSON")

    return json.loads(block, parse_constant=refuse)


def allow_downloads(driver: Any, folder: Path) -> None:
    """Let headless Chromium save the page's downloads into ``folder`` (it refuses them by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})


def downloaded(folder: Path, name: str, timeout: float = 30) -> Path:
    """``folder / name`` once the browser has finished writing it."""
    path = folder / name
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.is_file() and not any(p.suffix == ".crdownload" for p in folder.iterdir()):
            return path
        time.sleep(0.1)
    raise AssertionError(f"{name} was not downloaded into {folder} (there: {sorted(p.name for p in folder.iterdir())})")
