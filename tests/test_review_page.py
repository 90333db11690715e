"""The review page (predict --report): self-contained, meshes as binary arrays that decode back (positions
within half their quantization step), and, in a real headless Chromium, a grid that opens a drawn 3D view
without a console error."""
from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from pointmamba.report.review_page import VIEWER

from support import browser
from support.tiny import untrained_checkpoint
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory: pytest.TempPathFactory):
    from pointmamba import Segmenter

    return Segmenter(untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth"), device="cpu",
                     infer={"graph_cut": False})


def page_data(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1)
    return json.loads(block.replace("<\\/", "</"))


def decode(b64: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype=dtype)


def test_page_is_self_contained_and_its_meshes_decode_back_exactly(segmenter, scans_dir: Path, tmp_path: Path) -> None:
    from pointmamba.data import read_labels
    from pointmamba.report import ReviewPage

    page = ReviewPage(title="clinic <review> & co")
    results, binary = [], 0
    for name in ("MSN001_lower", "MSN002_upper"):
        path = scans_dir / name.split("_")[0] / f"{name}.obj"
        result = segmenter(path)
        ref = read_labels(path.with_suffix(".json"))
        png = result.save_png(tmp_path / f"{name}.png")
        page.add(result, ref.labels, result.compare(ref), png, str(path))
        results.append((result, ref))
        binary += result.vertices.shape[0] * 3 * 4 + result.faces.size * 4  # float32 + int32: a binary PLY's bulk
    html = page.write(tmp_path / "index.html").read_text()
    assert html.count(VIEWER.read_text()[:200]) == 1  # the viewer inlined once
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?:", html)  # nothing fetched
    assert "<title>clinic &lt;review&gt; &amp; co</title>" in html
    data = page_data(html)
    for (result, ref), scan in zip(results, data["scans"]):
        mesh = scan["mesh"]
        positions = mesh["origin"] + decode(mesh["positions"], "<u2").reshape(-1, 3) * np.array(mesh["step"])
        assert np.all(np.abs(positions - result.aligned) <= np.array(mesh["step"]) / 2 + 1e-9)  # uint16 per axis
        assert np.array_equal(decode(mesh["faces"], "<u2").reshape(-1, 3), result.faces)
        assert np.array_equal(decode(mesh["labels"], "u1"), result.labels)
        assert np.array_equal(decode(mesh["reference"], "u1"), ref.labels)
        assert scan["teeth"] == result.teeth and scan["review"] == result.review
        assert scan["thumbnail"].startswith("data:image/png;base64,")
        assert {int(k) for k in scan["palette"]} >= set(result.teeth)
    meshes = len(html.encode()) - VIEWER.stat().st_size - sum(len(s["thumbnail"]) for s in data["scans"])
    assert meshes < 1.5 * binary  # base64 (4/3) of the binary arrays, labels and a little JSON


@pytest.mark.slow
def test_review_page_draws_in_headless_chromium(scans_dir: Path, tmp_path: Path) -> None:
    reason = browser.missing()
    if reason:
        pytest.skip(reason)
    ckpt = untrained_checkpoint(tmp_path / "tiny.pth")
    for patient in ("MSN001", "MSN002"):
        shutil.copytree(scans_dir / patient, tmp_path / "scans" / patient)
    report = tmp_path / "out" / "index.html"
    code, _, err = run_tool("predict", tmp_path / "scans", "--checkpoint", ckpt, "--out", tmp_path / "out",
                            "--reference", "auto", "--report", report, "--set", "infer.graph_cut=false")
    assert code == 0, err
    from PIL import Image
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains

    with browser.Browser() as b:
        b.driver.get(report.as_uri())
        assert b.wait("document.querySelectorAll('.card').length") == 4
        assert b.console_errors() == []
        scans = b.driver.execute_script("return JSON.parse(document.getElementById('report-data').textContent).scans")
        order = [c.get_attribute("data-name") for c in b.driver.find_elements("css selector", ".card")]
        assert order == [s["name"] for s in sorted(scans, key=lambda s: (s["min_confidence"], s["name"]))]
        first = b.driver.find_elements("css selector", ".card")[0]
        name = first.get_attribute("data-name")
        first.click()
        assert b.wait("document.getElementById('plot').dataset.rendered") == f"{name}:prediction"
        plot = b.driver.find_element("id", "plot")
        shot = np.asarray(Image.open(io.BytesIO(plot.screenshot_as_png)).convert("RGB")).astype(int)
        drawn = (np.abs(shot - 255).sum(2) > 40).mean()
        assert drawn > 0.05, f"the 3D view is blank ({drawn:.1%} drawn)"
        palette = b.driver.execute_script("return JSON.parse(document.getElementById('report-data').textContent)"
                                          f".scans.find(s => s.name === '{name}').palette")
        rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in palette.values()])
        near = np.abs(shot[:, :, None, :] - rgb[None, None]).sum(3).min(2) < 90  # shaded tooth colours
        assert near.mean() > 0.02
        labels = b.driver.execute_script("return document.getElementById('plot').data[1].text")
        assert labels and all(t.isdigit() for t in labels)  # FDI numbers drawn on the teeth
        hover = None
        for dx, dy in ((0, -120), (-150, -40), (150, -40), (0, 60), (-250, 80)):  # over the arch
            ActionChains(b.driver).move_to_element_with_offset(plot, dx, dy).perform()
            try:
                hover = b.wait("(document.querySelector('#plot .hovertext') || {}).textContent", 5)
                break
            except TimeoutException:  # that point missed the mesh
                continue
        assert hover and re.match(r"(tooth \d\d · confidence \d\.\d\d( \(\d\.\d\d before the scan's flag\))? "
                                   r"\(\d\d: \d\.\d\d\)|gingiva)reference: ", hover), hover

        b.driver.find_element("css selector", "#modes input[value='errors']").click()
        assert b.wait("document.getElementById('plot').dataset.rendered") == f"{name}:errors"
        shot = np.asarray(Image.open(io.BytesIO(plot.screenshot_as_png)).convert("RGB")).astype(int)
        red = (np.abs(shot - np.array([0xD6, 0x27, 0x28])).sum(2) < 90).mean()
        assert red > 0.001, "an untrained model's errors are not shown"
        b.driver.save_screenshot(str(tmp_path / "review_page.png"))
        assert b.console_errors() == []

        b.driver.find_element("id", "close").click()
        b.driver.get(report.as_uri() + "#scan=MSN002_upper")  # a link opens one scan
        assert b.wait("document.getElementById('plot').dataset.rendered") == "MSN002_upper:prediction"
        assert b.console_errors() == []
