"""The review page's size bound (issue 46, item 10): scans spooled to disk as they come (held memory does
not grow with the scan count), meshes compact (uint16 positions that decode within half a quantization
step), and one page per chunk of scans with an index page linking them above the stated bound."""
from __future__ import annotations

import base64
import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from support.review import page_data, segment_sample

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def segmented(tmp_path_factory: pytest.TempPathFactory):
    return segment_sample(tmp_path_factory.mktemp("segmented"))


def test_positions_decode_within_half_a_quantization_step(segmented, tmp_path: Path) -> None:
    from pointmamba.report import ReviewPage

    result, ref, png = segmented
    page = ReviewPage()
    page.add(result, ref, result.compare(ref), png)
    mesh = page_data(page.write(tmp_path / "index.html").read_text())["scans"][0]["mesh"]
    q = np.frombuffer(base64.b64decode(mesh["positions"]), "<u2").reshape(-1, 3)
    origin, step = np.array(mesh["origin"]), np.array(mesh["step"])
    decoded = origin + q * step  # as page.js decodes it
    extent = np.ptp(result.aligned, axis=0)
    assert np.allclose(step, extent / 65535)  # the whole uint16 range over the bounding box
    assert np.all(np.abs(decoded - result.aligned) <= step / 2 + 1e-9)
    assert np.array_equal(np.frombuffer(base64.b64decode(mesh["faces"]), "<u2").reshape(-1, 3), result.faces)
    assert np.array_equal(np.frombuffer(base64.b64decode(mesh["labels"]), "u1"), result.labels)
    assert np.array_equal(np.frombuffer(base64.b64decode(mesh["reference"]), "u1"), ref)


def _held_after_adding(segmented, count: int, tmp_path: Path) -> tuple[int, int, int]:
    """(Python bytes held after adding ``count`` scans, extra peak bytes while writing the page, bytes of
    one spooled scan)."""
    from pointmamba.report import ReviewPage

    result, ref, png = segmented
    metrics = result.compare(ref)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        page = ReviewPage(spool=tmp_path)
        for _ in range(count):
            page.add(result, ref, metrics, png)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        page.write(tmp_path / f"page{count}.html")
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return held, peak, page._sizes[0]


def test_held_memory_does_not_grow_with_the_scan_count(segmented, tmp_path: Path) -> None:
    few_held, few_peak, scan_bytes = _held_after_adding(segmented, 2, tmp_path)
    many_held, many_peak, _ = _held_after_adding(segmented, 12, tmp_path)
    assert scan_bytes > 100_000  # a real scan's data: positions, faces, labels, thumbnail
    # ten more scans: before, every scan's encoded mesh stayed in memory until the end (~10 x scan_bytes)
    assert many_held - few_held < 0.1 * scan_bytes, (few_held, many_held, scan_bytes)
    # writing streams one scan at a time: the page's peak does not grow with the scans either
    assert many_peak - few_peak < scan_bytes, (few_peak, many_peak, scan_bytes)


def test_above_the_bound_one_page_per_chunk_and_an_index_linking_them(segmented, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from pointmamba.report import ReviewPage, review_page

    result, ref, png = segmented
    monkeypatch.setattr(review_page, "PAGE_SCANS", 2)  # the bound itself is 25: a small one, same rule
    page = ReviewPage()
    names = [f"scan{k}_lower" for k in range(5)]
    for name in names:
        page.add(replace(result, name=name), ref, None, png)
    index = page.write(tmp_path / "review.html")
    assert index == tmp_path / "review.html"
    parts = ["review-01.html", "review-02.html", "review-03.html"]
    assert page.written == [tmp_path / p for p in parts] + [index]
    data = page_data(index.read_text())
    assert data["pages"] == parts
    assert [(s["name"], s["page"]) for s in data["scans"]] == list(zip(names, [parts[0]] * 2 + [parts[1]] * 2 + [parts[2]]))
    assert all("mesh" not in s and "thumbnail" not in s for s in data["scans"])  # an index: no meshes
    assert review_page.VIEWER.read_text()[:200] not in index.read_text()  # nor the viewer
    for part, chunk in zip(parts, (names[:2], names[2:4], names[4:])):
        scans = page_data((tmp_path / part).read_text())
        assert scans["index"] == "review.html"
        assert [s["name"] for s in scans["scans"]] == chunk and all(s["mesh"] and s["thumbnail"] for s in scans["scans"])


def test_the_byte_bound_splits_too(segmented, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pointmamba.report import ReviewPage, review_page

    result, ref, png = segmented
    page = ReviewPage()
    for _ in range(3):
        page.add(result, ref, None, png)
    monkeypatch.setattr(review_page, "PAGE_BYTES", int(1.5 * page._sizes[0]))  # one scan fits, two do not
    assert page.chunks() == [range(0, 1), range(1, 2), range(2, 3)]
    monkeypatch.setattr(review_page, "PAGE_BYTES", 100 * 2 ** 20)
    assert page.chunks() == [range(0, 3)]
