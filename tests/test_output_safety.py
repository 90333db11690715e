"""Safe outputs (issue 46): one Segmenter shared by threads, CSV cells a spreadsheet never runs, JSON that
never holds NaN or Infinity."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support import browser
from support.review import page_data, segment_sample

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"


# ------------------------------------------------------------------------------------ threads (item 2)
THREADS_SCRIPT = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    import numpy as np
    import torch
    sys.path.insert(0, {tests!r})
    from support.tiny import untrained_checkpoint
    from pointmamba import Segmenter

    torch.set_num_threads(2)
    segmenter = Segmenter(untrained_checkpoint(Path({ckpt!r})), device="cpu", infer={{"graph_cut": False}})
    scans = {scans!r}
    sequential = [segmenter(p) for p in scans]
    start = threading.Barrier(len(scans))
    results = {{}}

    def run(k):
        start.wait()  # both threads enter the model together
        results[k] = segmenter(scans[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(scans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, seq in enumerate(sequential):
        assert np.array_equal(results[k].labels, seq.labels), k
        assert np.array_equal(results[k].probabilities, seq.probabilities), k
    print("same", len(results))
""")


def test_two_threads_on_one_segmenter_give_the_sequential_results(tmp_path: Path) -> None:
    # in a child process: before the lock, numba's pool aborted the whole process (exit 134)
    scans = [str(SAMPLES / "MSN021" / "MSN021_lower.obj"), str(SAMPLES / "MSN022" / "MSN022_upper.obj")]
    script = THREADS_SCRIPT.format(tests=str(ROOT / "tests"), ckpt=str(tmp_path / "tiny.pth"), scans=scans)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("same 2")


# ------------------------------------------------------------------------------- CSV cells (item 4)
HOSTILE_NAMES = ['=HYPERLINK("http:\\\\evil.example","open me").obj', "=2+5", "+2+5", "-2+5", "@SUM(A1:A2)",
                 "\t=1+1", "\r=1+1", "two\nlines_upper.obj", "cr\rlf\r\n_lower.obj", '<!--<script>_upper.obj',
                 "x" * 250 + "_upper.obj", "bell\x07\x1b[31m_lower.obj", 'quote"d,comma_lower.obj']


def test_csv_cells_never_start_a_formula_and_newlines_round_trip(tmp_path: Path) -> None:
    from pointmamba.utils.atomic_file import write_csv

    rows = [{"scan": name, "min_confidence": -0.25, "num_teeth": -3, "note": None} for name in HOSTILE_NAMES]
    path = write_csv(tmp_path / "summary.csv", rows)
    with open(path, newline="", encoding="utf-8") as fh:
        back = list(csv.reader(fh))
    assert back[0] == ["scan", "min_confidence", "num_teeth", "note"]
    assert len(back) == len(HOSTILE_NAMES) + 1  # one row per scan, newlines in names included
    for name, row in zip(HOSTILE_NAMES, back[1:]):
        assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r")), row[0]
        # neutralized by one leading quote, otherwise as written
        assert row[0] == ("'" + name if name[0] in "=+-@\t\r" else name)
        assert row[1:] == ["-0.25", "-3", ""]  # numbers stay numbers, negative ones too


def test_every_csv_the_package_writes_goes_through_write_csv() -> None:
    # one function neutralizes cells; a second writer elsewhere would bypass it
    package = ROOT / "pointmamba"
    writers = [str(p.relative_to(ROOT)) for p in package.rglob("*.py")
               if p.name != "atomic_file.py" and any(w in p.read_text() for w in ("csv.writer", "csv.DictWriter"))]
    assert writers == []


# ------------------------------------------------------------ the review page's embedded data (items 5, 6)
PAGE_NAMES = HOSTILE_NAMES + ["</script><script>document.body.remove()</script>", "<!--", "line\u2028sep\u2029_upper",
                              "a&b>c_lower", "/data/s_upper.obj", "/data/data/s_upper.obj", "/_data_s_upper"]


@pytest.fixture(scope="module")
def segmented(tmp_path_factory: pytest.TempPathFactory):
    return segment_sample(tmp_path_factory.mktemp("segmented"))


def _hostile_page(segmented, path: Path, names: list[str]) -> Path:
    """A review page of the sample scan under each of ``names``; the last one's reference has no teeth."""
    from dataclasses import replace

    from pointmamba.report import ReviewPage

    result, ref, png = segmented
    page = ReviewPage(title="<!--<script> review")
    for name in names[:-1]:
        page.add(replace(result, name=name), ref, result.compare(ref), png, source=name)
    toothless = np.zeros_like(ref)
    page.add(replace(result, name=names[-1]), toothless, result.compare(toothless), png, source=names[-1])
    return page.write(path)


def test_no_file_name_reaches_the_page_as_markup(segmented, tmp_path: Path) -> None:
    from pointmamba.report.review_page import VIEWER

    html = _hostile_page(segmented, tmp_path / "index.html", PAGE_NAMES).read_text()
    data_start = html.index('<script type="application/json" id="report-data">') + 50
    block = html[data_start:html.index("</script>", data_start)]
    for char in "<>&\u2028\u2029":  # as \u003c ... only: nothing the HTML parser or old JavaScript reads
        assert char not in block, char
    # the page's own elements only: three scripts (data, viewer, app), nothing opened or commented out
    assert html.count("<script") - VIEWER.read_text().count("<script") == 3
    assert "<!--" not in html.replace(VIEWER.read_text(), "")
    data = page_data(html)
    assert [s["name"] for s in data["scans"]] == PAGE_NAMES and [s["source"] for s in data["scans"]] == PAGE_NAMES


def test_a_reference_without_teeth_gives_null_not_nan(segmented, tmp_path: Path) -> None:
    from pointmamba.utils.finite_json import dumps

    result, ref, png = segmented
    metrics = result.compare(np.zeros_like(ref))
    assert math.isnan(metrics["TLA"])  # no reference teeth: no tooth to localise
    data = page_data(_hostile_page(segmented, tmp_path / "index.html", ["a_lower", "toothless_lower"]).read_text())
    assert data["scans"][1]["metrics"]["TLA"] is None and data["scans"][1]["metrics"]["TIR"] is None
    assert data["scans"][0]["metrics"]["TLA"] == pytest.approx(result.compare(ref)["TLA"])
    # one helper for every JSON file: non-finite numbers, numpy's included, as null
    assert dumps({"a": float("nan"), "b": [np.float32("inf"), -math.inf], 3: np.int64(2)}) == \
        '{"a": null, "b": [null, null], "3": 2}'
    # arrays and long lists take a fast path: it must give the same, NaN included
    assert dumps({"i": np.arange(3), "f": np.array([0.5, np.nan]), "g": np.array([[1.5], [2.5]]),
                  "t": (1, True, None, "x"), "m": [1, 2.5, float("inf")]}) == \
        '{"i": [0, 1, 2], "f": [0.5, null], "g": [[1.5], [2.5]], "t": [1, true, null, "x"], "m": [1, 2.5, null]}'


def test_teeth3ds_json_never_holds_nan(tmp_path: Path) -> None:
    from pointmamba.data.teeth3ds import save_labels

    labels = np.array([0, 31, 31, 32])
    path = save_labels(tmp_path / "s_lower.json", labels, "lower", "s", extra={"score": math.nan, "spread": [math.inf]})
    doc = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in {path.name}"))
    assert doc["score"] is None and doc["spread"] == [None] and doc["labels"] == labels.tolist()


@pytest.mark.slow
def test_hostile_names_chunks_and_a_toothless_reference_draw_in_chromium(segmented, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    reason = browser.missing()
    if reason:
        pytest.skip(reason)
    from pointmamba.report import review_page

    single = _hostile_page(segmented, tmp_path / "one" / "index.html", PAGE_NAMES)
    monkeypatch.setattr(review_page, "PAGE_SCANS", 2)  # the same rule as at 25 scans, on three
    index = _hostile_page(segmented, tmp_path / "chunks" / "index.html", PAGE_NAMES[:2] + ["toothless_lower"])
    with browser.Browser() as b:
        b.driver.get(single.as_uri())
        assert b.wait("document.querySelectorAll('.card').length") == len(PAGE_NAMES)
        names = [c.get_attribute("data-name") for c in b.driver.find_elements("css selector", ".card")]
        assert sorted(names) == sorted(PAGE_NAMES)  # every name shown as text, none as markup
        assert b.console_errors() == []

        b.driver.get(index.as_uri())  # the index: every scan, each linking to its chunk's page
        assert b.wait("document.querySelectorAll('.card').length") == 3
        card = b.driver.find_element("css selector", ".card[data-name='toothless_lower']")
        assert "TLA –" in card.text and "TIR –" in card.text  # null metrics shown as a dash
        card.click()
        assert b.wait("document.getElementById('plot').dataset.rendered") == "toothless_lower:prediction"
        assert b.driver.current_url.split("#")[0].endswith("/index-02.html")
        drawn = b.driver.execute_script("return document.getElementById('plot').data[0].x.length")
        assert drawn == len(segmented[0].vertices)  # the quantized positions decoded and drawn
        assert b.driver.find_element("id", "index-link").get_attribute("href").endswith("/index.html")
        assert b.console_errors() == []
