"""The review page as a clinician works through it (issue 47, items 1 and 2's page part): a readable
occlusal thumbnail, a dental chart per scan (the full arch, found and missing, confidence and runner-up),
the per-vertex uncertainty, keyboard navigation, accept / flag marks that persist and download as CSV,
deep links that choose the view, reference and prediction side by side with linked cameras, and
corrections made on the page that download as a Teeth3DS JSON per scan.

The fast tests read the page's data; the browser tests drive the page in headless Chromium."""
from __future__ import annotations

import base64
import csv
import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from support import browser
from support.review import allow_downloads, downloaded, page_data, segment_samples

pytestmark = pytest.mark.usefixtures("one_thread")

HOSTILE = "=HYPERLINK(\"http:\\\\evil.example\",\"open me\")_lower"  # a formula as a scan name (issue 46, case 4)


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory):
    return segment_samples(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def page(samples, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A page of the three sample scans, with their references, and one more under a formula name."""
    from pointmamba.report import ReviewPage

    page = ReviewPage(title="review")
    for result, ref, path in samples:
        page.add(result, ref, result.compare(ref), source=str(path))
    result, ref, path = samples[0]
    page.add(replace(result, name=HOSTILE), ref, None, source=HOSTILE)
    return page.write(tmp_path_factory.mktemp("page") / "index.html")


def _decode(b64: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype=dtype)


# ---------------------------------------------------------------------------------------------- fast
def test_each_scan_carries_a_dental_chart_of_the_full_arch(samples, page: Path) -> None:
    from pointmamba.data import LOWER_FDI, UPPER_FDI

    arch = {"upper": [18, 17, 16, 15, 14, 13, 12, 11, 21, 22, 23, 24, 25, 26, 27, 28],
            "lower": [48, 47, 46, 45, 44, 43, 42, 41, 31, 32, 33, 34, 35, 36, 37, 38]}
    scans = page_data(page.read_text())["scans"]
    for (result, _, _), scan in zip(samples, scans):
        chart = scan["chart"]
        assert [c["fdi"] for c in chart] == arch[result.jaw]
        assert sorted(c["fdi"] for c in chart) == sorted(UPPER_FDI if result.jaw == "upper" else LOWER_FDI)
        assert [c["fdi"] for c in chart if c["found"]] == [f for f in arch[result.jaw] if f in result.teeth]
        for c in chart:
            if not c["found"]:
                assert set(c) == {"fdi", "found"}  # missing: nothing else to show
                continue
            tooth = min((t for t in result.confidence.teeth if t.fdi == c["fdi"]), key=lambda t: t.confidence)
            assert c["confidence"] == pytest.approx(tooth.confidence, abs=1e-4)
            assert c["runner_up"] == tooth.runner_up
            assert c["runner_up_confidence"] == pytest.approx(tooth.runner_up_confidence, abs=1e-4)
        assert scan["review_below"] == result.confidence.rules.review_below


def test_a_number_carried_twice_shows_its_less_confident_tooth() -> None:
    from pointmamba.inference.confidence import ToothConfidence
    from pointmamba.report.review_page import dental_chart

    teeth = [ToothConfidence(11, 1, 0.9, 21, 0.05, 800), ToothConfidence(11, 2, 0.4, 12, 0.35, 300),
             ToothConfidence(27, 3, 0.7, 26, 0.2, 900)]
    chart = {c["fdi"]: c for c in dental_chart("upper", teeth)}
    assert chart[11] == {"fdi": 11, "found": True, "confidence": 0.4, "runner_up": 12, "runner_up_confidence": 0.35,
                         "twice": True}
    assert chart[27]["found"] and not chart[27]["twice"]
    assert [f for f, c in chart.items() if not c["found"]] == [18, 17, 16, 15, 14, 13, 12, 21, 22, 23, 24, 25, 26, 28]


def test_the_mesh_carries_each_vertex_margin_as_uint8(samples, page: Path) -> None:
    scans = page_data(page.read_text())["scans"]
    for (result, _, _), scan in zip(samples, scans):
        margin = _decode(scan["mesh"]["margin"], "u1")
        p = np.sort(np.asarray(result.probabilities, dtype=np.float64), axis=1)
        expected = np.rint(255 * (p[:, -1] - p[:, -2]))
        assert margin.shape == (len(result.labels),)  # one byte per vertex, in file order
        assert np.abs(margin.astype(int) - expected).max() <= 1  # float32 rounding at a half step
        assert margin.max() > margin.min()  # not a constant: vertices differ in how sure the model is


def test_the_thumbnail_is_the_occlusal_view_with_numbers_readable_at_its_size(samples) -> None:
    from PIL import Image
    from scipy import ndimage

    from pointmamba.data import class_colors
    from pointmamba.inference.render import THUMBNAIL_SIZE, render_thumbnail
    from pointmamba.report import ReviewPage

    result, ref, _ = samples[0]
    page = ReviewPage()
    page.add(result)  # no picture given: the page draws the scan's own occlusal view
    page.write(page._spool / "page.html")
    scan = page_data((page._spool / "page.html").read_text())["scans"][0]
    with Image.open(io.BytesIO(base64.b64decode(scan["thumbnail"].split(",", 1)[1]))) as img:
        assert img.size == THUMBNAIL_SIZE  # the card shows it at about this size: nothing shrunk away

    args = (result.aligned, result.faces)
    colors, classes = class_colors(result.num_classes), result.classes
    numbered = np.asarray(Image.open(io.BytesIO(render_thumbnail(*args, result.labels, colors, classes))))
    bare = np.asarray(Image.open(io.BytesIO(render_thumbnail(*args, np.zeros_like(result.labels), colors, classes))))
    boxes, count = ndimage.label(np.abs(numbered.astype(int) - bare).sum(2) > 0)
    sizes = ndimage.sum_labels(np.ones(boxes.shape), boxes, range(1, count + 1))
    # the number labels, not the slivers where two labels overlap
    heights = [s[0].stop - s[0].start for s, n in zip(ndimage.find_objects(boxes), sizes) if n > 100]
    # each number on a white label 16 px tall, its digits about 12 px (the four panels shrunk gave about 4 px)
    assert len(heights) >= 4 and min(heights) >= 15, heights


def test_the_page_documents_its_keys_and_holds_what_a_correction_needs(samples, page: Path) -> None:
    import re

    from pointmamba.data import LOWER_FDI, UPPER_FDI

    html = page.read_text()
    keys = re.search(r'<p class="keys" id="keys">(.*?)</p>', html, re.S).group(1)
    for key in ("n", "p", "a", "f", "v", "Esc", "Enter", "r", "c", "z"):
        assert f"<kbd>{key}</kbd>" in keys, key
    data = page_data(html)
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}", data["run"])  # names this run's marks in the browser
    for (result, _, _), scan in zip(samples, data["scans"]):
        assert (scan["id_patient"], scan["jaw"]) == (result.id_patient, result.jaw)
        jaw = UPPER_FDI if result.jaw == "upper" else LOWER_FDI
        assert {int(k) for k in scan["palette"]} >= {0, *jaw}  # a number the prediction lacks has a colour
        assert len(_decode(scan["mesh"]["labels"], "u1")) == len(result.vertices)  # every vertex: nothing decimated


# ---------------------------------------------------------------------------------------------- browser

@pytest.fixture
def b(tmp_path: Path):
    """Headless Chromium (``b``, as tests/support/browser.py names it) saving the page's downloads into
    ``tmp_path``; skipped where it cannot run."""
    reason = browser.missing()
    if reason:
        pytest.skip(reason)
    with browser.Browser() as chromium:
        allow_downloads(chromium.driver, tmp_path)
        yield chromium


def _open(b: browser.Browser, url: str) -> None:
    b.driver.get(url)
    b.wait("document.querySelectorAll('.card').length")


def _rendered(b: browser.Browser) -> str:
    return b.wait("document.getElementById('plot').dataset.rendered")


def _keys(b: browser.Browser, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(b.driver).send_keys(*keys).perform()


def _hover(b: browser.Browser, plot, spot: tuple[int, int], nudge: bool = False) -> bool:
    """Move the mouse to ``spot`` (pixels from the plot's centre); True when it is over the mesh."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains

    if nudge:
        ActionChains(b.driver).move_to_element_with_offset(plot, spot[0] + 3, spot[1] + 3).perform()
    ActionChains(b.driver).move_to_element_with_offset(plot, *spot).perform()
    try:
        b.wait("(document.querySelector('#plot .hovertext') || {}).textContent", 5)
        return True
    except TimeoutException:  # that point missed the mesh
        return False


def _click(b: browser.Browser) -> None:
    """A click where the mouse is (pressed a moment: plotly's 3D view reads a bare click late)."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(b.driver).click_and_hold().pause(0.2).release().perform()


@pytest.mark.slow
def test_keys_walk_the_scans_and_the_marks_download_as_csv(page: Path, tmp_path: Path, b: browser.Browser) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(b, page.as_uri())
    order = [c.get_attribute("data-name") for c in b.driver.find_elements("css selector", ".card")]
    _keys(b, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ENTER)  # the grid: move to the second card, open it
    assert _rendered(b) == f"{order[1]}:prediction"
    _keys(b, "a")  # accept
    assert b.wait("document.getElementById('accept').classList.contains('on')")
    _keys(b, "n")
    assert _rendered(b) == f"{order[2]}:prediction"
    _keys(b, "f", "p")  # flag this one, back to the previous
    assert _rendered(b) == f"{order[1]}:prediction"
    _keys(b, Keys.ARROW_LEFT)
    assert _rendered(b) == f"{order[0]}:prediction"
    _keys(b, "v")  # the next view mode
    assert _rendered(b) == f"{order[0]}:reference"
    _keys(b, Keys.ESCAPE)
    assert b.wait("!document.getElementById('viewer').classList.contains('open')")
    next(c for c in b.driver.find_elements("css selector", ".card") if c.get_attribute("data-name") == HOSTILE).click()
    _rendered(b)
    _keys(b, "f", Keys.ESCAPE)
    cards = {c.get_attribute("data-name"): c.text for c in b.driver.find_elements("css selector", ".card")}
    assert "accepted" in cards[order[1]] and "flagged" in cards[order[2]] and "flagged" in cards[HOSTILE]
    assert b.driver.execute_script("return document.activeElement.dataset.name") == HOSTILE  # back on its card
    _keys(b, "a")  # on the grid: marks the card in focus
    assert b.wait("document.activeElement.textContent.includes('accepted')")

    b.driver.refresh()  # the marks persist in the browser
    _open(b, page.as_uri())
    assert "accepted" in b.driver.find_element("css selector", f".card[data-name='{order[1]}']").text
    b.driver.find_element("id", "download-marks").click()
    with open(downloaded(tmp_path, "review-marks.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    marks = {r["scan"]: r["mark"] for r in rows}
    # the formula neutralized, as csv_cell does; the marks as made, the other scans unmarked
    expected = {name: "" for name in order} | {order[1]: "accepted", order[2]: "flagged", HOSTILE: "accepted"}
    assert marks == {("'" + n if n == HOSTILE else n): mark for n, mark in expected.items()}
    assert b.console_errors() == []


@pytest.mark.slow
def test_a_correction_made_on_the_page_downloads_as_teeth3ds_json(samples, page: Path, tmp_path: Path,
                                                                  b: browser.Browser) -> None:
    from selenium.webdriver.common.keys import Keys

    from pointmamba.data import instances_from_labels, read_labels, read_mesh

    result, _, obj = next(s for s in samples if s[0].name == "MSN022_upper")
    tooth = result.teeth[0]
    target = tooth + 1 if tooth % 10 < 8 else tooth - 1  # its neighbour's number
    _open(b, page.as_uri() + "#scan=MSN022_upper")
    assert _rendered(b) == "MSN022_upper:prediction"
    # renumber: the tooth's row in the chart, its new number typed, Enter
    b.driver.find_element("css selector", f"#chart tr[data-fdi='{tooth}']").click()
    assert f"tooth {tooth}" in b.driver.find_element("id", "selection").text
    _keys(b, *str(target), Keys.ENTER)
    edits = b.wait("document.getElementById('edits').textContent")
    assert edits.startswith(f"{(result.labels == tooth).sum()} vertices corrected")

    # repaint: a region clicked in the 3D view, cut by a plane clicked at the same point, given away
    plot = b.driver.find_element("id", "plot")
    spot = next(spot for spot in ((0, -120), (-150, -40), (150, -40), (0, 60), (-250, 80), (250, 80))
                if _hover(b, plot, spot))
    _click(b)
    picked = b.wait("document.getElementById('selection').textContent.startsWith('selected') && "
                    "document.getElementById('selection').textContent")
    region = int(picked.rsplit("(", 1)[1].split()[0])
    label = int(b.driver.find_element("id", "number").get_attribute("value"))
    _keys(b, "c")
    assert _hover(b, plot, spot, nudge=True)  # the redrawn view hovers anew before it takes a click
    _click(b)  # the plane through the same point
    cut = b.wait("document.getElementById('selection').textContent.includes('one side of the cut') && "
                 "document.getElementById('selection').textContent")
    part = int(cut.rsplit("(", 1)[1].split()[0])
    assert 0 < part < region
    given = 0 if label else target
    _keys(b, *str(given), Keys.ENTER)
    b.driver.find_element("id", "download-json").click()
    doc = read_labels(downloaded(tmp_path, "MSN022_upper.json"), len(read_mesh(obj)[0]))
    assert b.console_errors() == []

    # the reader takes it (one label per vertex of the OBJ, in file order); the tooth renumbered whole, the
    # part of the clicked region given away, nothing else changed
    assert (doc.id_patient, doc.jaw) == (result.id_patient, result.jaw)
    after_renumber = np.where(result.labels == tooth, target, result.labels)
    changed = doc.labels != after_renumber
    assert changed.sum() == part and set(after_renumber[changed]) == {label} and set(doc.labels[changed]) == {given}
    assert not np.any(doc.labels == tooth) or tooth == given
    np.testing.assert_array_equal(doc.instances, instances_from_labels(doc.labels))


@pytest.mark.slow
def test_r_gives_the_selected_tooth_its_runner_up_and_only_a_predicted_tooth(samples, page: Path, tmp_path: Path,
                                                                             b: browser.Browser) -> None:
    from pointmamba.data import read_labels, read_mesh

    result, _, obj = next(s for s in samples if s[0].name == "MSN022_upper")
    tooth = next(t for t in result.confidence.teeth if t.runner_up in result.teeth)  # its runner-up a found tooth
    _open(b, page.as_uri() + "#scan=MSN022_upper")
    assert _rendered(b) == "MSN022_upper:prediction"
    b.driver.find_element("css selector", f"#chart tr[data-fdi='{tooth.fdi}']").click()
    _keys(b, "r")
    edits = b.wait("document.getElementById('edits').textContent")
    assert edits.startswith(f"{(result.labels == tooth.fdi).sum()} vertices corrected (1 step")
    # the runner-up's row now selects two predicted teeth: whose runner-up would that be? Refused, nothing changed
    b.driver.find_element("css selector", f"#chart tr[data-fdi='{tooth.runner_up}']").click()
    _keys(b, "r")
    assert "select one tooth as predicted" in b.driver.find_element("id", "selection").text
    assert b.driver.find_element("id", "edits").text == edits
    b.driver.find_element("id", "download-json").click()
    doc = read_labels(downloaded(tmp_path, "MSN022_upper.json"), len(read_mesh(obj)[0]))
    np.testing.assert_array_equal(doc.labels, np.where(result.labels == tooth.fdi, tooth.runner_up, result.labels))
    assert b.console_errors() == []


@pytest.mark.slow
def test_deep_links_choose_the_view_and_the_side_by_side_cameras_move_together(samples, page: Path,
                                                                               b: browser.Browser) -> None:
    from PIL import Image

    _open(b, page.as_uri() + "#scan=MSN021_lower&view=uncertainty")
    assert _rendered(b) == "MSN021_lower:uncertainty"
    png = b.driver.find_element("id", "plot").screenshot_as_png
    shot = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    reddish = (shot[:, :, 0] > 150) & (shot[:, :, 0] - shot[:, :, 2] > 60)  # low margin: red to orange
    assert reddish.mean() > 0.005, "an untrained model's uncertain vertices are not shown"

    b.driver.get(page.as_uri() + "#scan=MSN023_lower&view=compare")
    assert _rendered(b) == "MSN023_lower:compare"
    assert b.driver.execute_script("return location.hash") == "#scan=MSN023_lower&view=compare"
    meshes = b.driver.execute_script(
        "return document.getElementById('plot').data.filter(t => t.type === 'mesh3d').map(t => t.scene)")
    assert meshes == ["scene", "scene2"]  # the reference beside the prediction
    eye = {"x": 1.2, "y": -0.4, "z": 0.9}
    b.driver.execute_script("Plotly.relayout(document.getElementById('plot'), {'scene.camera': {eye: arguments[0]}})",
                            eye)
    assert b.wait("(document.getElementById('plot').layout.scene2.camera || {}).eye") == eye
    b.driver.find_element("css selector", "#modes input[value='errors']").click()
    assert _rendered(b) == "MSN023_lower:errors"
    assert b.driver.execute_script("return location.hash") == "#scan=MSN023_lower&view=errors"

    tooth = next(s for s in samples if s[0].name == "MSN022_upper")[0].teeth[-1]
    b.driver.get(page.as_uri() + f"#scan=MSN022_upper&tooth={tooth}")  # a link selects a tooth
    assert b.wait("document.getElementById('selection').textContent").startswith(f"selected: tooth {tooth} (")
    b.driver.find_element("id", "close").click()
    b.driver.find_element("css selector", ".card[data-name='MSN021_lower'] .chart span.sure, "
                          ".card[data-name='MSN021_lower'] .chart span.unsure, "
                          ".card[data-name='MSN021_lower'] .chart span.low").click()  # a found tooth of a card's chart
    assert _rendered(b) == "MSN021_lower:prediction"
    assert b.wait("document.getElementById('selection').textContent").startswith("selected: tooth ")
    assert b.console_errors() == []


@pytest.mark.slow
def test_a_brush_stroke_is_kept_by_the_browser_and_downloads_after_a_reload(samples, page: Path, tmp_path: Path,
                                                                           b: browser.Browser) -> None:
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    from pointmamba.data import read_labels

    result, _, _ = next(s for s in samples if s[0].name == "MSN023_lower")
    radius = 2.5
    _open(b, page.as_uri() + "#scan=MSN023_lower")
    assert _rendered(b) == "MSN023_lower:prediction"
    Select(b.driver.find_element("id", "pick")).select_by_value("brush")
    size = b.driver.find_element("id", "brush")
    size.clear()
    size.send_keys(str(radius))
    plot = b.driver.find_element("id", "plot")
    b.driver.find_element("id", "viewer-title").click()  # out of the number field: keys go to the page again
    assert next(spot for spot in ((0, -120), (-150, -40), (150, -40), (0, 60)) if _hover(b, plot, spot))
    _click(b)
    b.wait("document.getElementById('selection').textContent.startsWith('selected: brush')")
    _keys(b, "0", Keys.ENTER)  # to the gingiva
    b.wait("document.getElementById('edits').textContent.includes('corrected')")
    b.driver.refresh()  # the corrections are kept by the browser
    _open(b, page.as_uri() + "#scan=MSN023_lower")
    assert _rendered(b) == "MSN023_lower:prediction"
    b.driver.find_element("id", "download-json").click()
    doc = read_labels(downloaded(tmp_path, "MSN023_lower.json"), len(result.labels))
    assert b.console_errors() == []
    changed = np.flatnonzero(doc.labels != result.labels)
    assert len(changed) and np.all(doc.labels[changed] == 0)
    # the stroke: every vertex within the radius of the clicked one (those that were gingiva already unchanged)
    near = lambda v: np.flatnonzero(np.linalg.norm(result.aligned - result.aligned[v], axis=1) <= radius)  # noqa: E731
    assert any(np.array_equal(changed, np.setdiff1d(near(v), np.flatnonzero(result.labels == 0))) for v in changed)


@pytest.mark.slow
def test_the_index_of_a_chunked_run_shows_and_downloads_the_marks_of_every_page(samples, tmp_path: Path,
                                                                               b: browser.Browser,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from pointmamba.report import ReviewPage, review_page

    monkeypatch.setattr(review_page, "PAGE_SCANS", 2)  # the bound itself is 25: a small one, same rule
    page = ReviewPage()
    for result, ref, path in samples:
        page.add(result, ref, None, source=str(path))
    index = page.write(tmp_path / "pages" / "index.html")
    assert [p.name for p in page.written] == ["index-01.html", "index-02.html", "index.html"]
    _open(b, (tmp_path / "pages" / "index-02.html").as_uri())
    name = b.driver.find_element("css selector", ".card").get_attribute("data-name")
    _keys(b, "k", "a")  # the grid: focus the card, accept it
    _open(b, index.as_uri())
    cards = {c.get_attribute("data-name"): c.text for c in b.driver.find_elements("css selector", ".card")}
    assert len(cards) == 3 and "accepted" in cards[name] and sum("accepted" in t for t in cards.values()) == 1
    b.driver.find_element("id", "download-marks").click()
    with open(downloaded(tmp_path, "review-marks.csv"), newline="", encoding="utf-8") as fh:
        marks = {r["scan"]: r["mark"] for r in csv.DictReader(fh)}
    assert marks == {s[0].name: ("accepted" if s[0].name == name else "") for s in samples}
    assert b.console_errors() == []
