"""tools/predict.py on large batches (issue 47 item 4): every check before the model loads, --skip-existing
resumes a batch (complete scans skipped, half-written ones redone), --layout per-scan, a short model line
with the details in DIR/run.json; the review page spooled inside --out and its chunk pages checked up front."""
from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pointmamba.cli.done_records import record_path
from pointmamba.cli.output_files import STATE_DIR
from pointmamba.inference.segmenter import Segmenter

from support.predict_runs import FAST, SAMPLE, ckpt, one_error_line, predict  # noqa: F401 (ckpt: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
SAMPLES = SAMPLE.parents[1]  # data/samples: MSN021_lower, MSN022_upper, MSN023_lower, each with its labels


@pytest.fixture
def model_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each time a Segmenter (the network) is built, its checkpoint; the real constructor still runs."""
    loads: list[str] = []
    real = Segmenter.__init__

    def spy(self, checkpoint=None, *args, **kwargs) -> None:
        loads.append(str(checkpoint))
        real(self, checkpoint, *args, **kwargs)

    monkeypatch.setattr(Segmenter, "__init__", spy)
    return loads


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def stamps(folder: Path, stem: str) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.glob(f"{stem}*") if p.is_file()}


def test_a_rerun_into_the_same_out_stops_before_the_model_loads(ckpt: Path, tmp_path: Path,
                                                                model_loads: list[str]) -> None:
    """The rerun failed with "exists (not written by this run)" only after the model had loaded."""
    out = tmp_path / "out"
    code, _, err = predict(ckpt, SAMPLE, "--out", out, *FAST)
    assert code == 0 and len(model_loads) == 1, err
    code, _, err = predict(ckpt, SAMPLE, "--out", out, *FAST)
    assert one_error_line(code, err) and "MSN022_upper.json exists (not written by this run)" in err, err
    assert "--skip-existing" in err
    assert len(model_loads) == 1  # the second run never built the network
    # a checkpoint that cannot load: the output problem is still the one reported, so it came first
    code, _, err = predict(tmp_path / "no such.pth", SAMPLE, "--out", out, *FAST)
    assert one_error_line(code, err) and "exists (not written by this run)" in err, err


def test_a_scan_without_a_jaw_is_segmented_and_the_jaw_file_names_it(ckpt: Path, tmp_path: Path,
                                                                      model_loads: list[str]) -> None:
    """The issue's 'Patient 7 mandible.stl' stopped with "jaw unknown" after the model had loaded: now its jaw
    is told from its teeth, or given per scan by --jaw-file, whose bad rows stop the run before the model loads."""
    scan = tmp_path / "Patient 7 mandible.obj"
    shutil.copy(SAMPLE, scan)
    code, _, err = predict(ckpt, scan, "--out", tmp_path / "out", *FAST)
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "Patient 7 mandible.json").read_text())["confidence"]["jaw"]["source"] == "teeth"
    table = tmp_path / "jaws.csv"
    table.write_text("scan,jaw\nPatient 7 mandible,Lower\n")
    code, _, err = predict(ckpt, scan, "--out", tmp_path / "named", "--jaw-file", table, *FAST)
    doc = json.loads((tmp_path / "named" / "Patient 7 mandible.json").read_text())
    assert code == 0 and doc["jaw"] == "lower" and doc["confidence"]["jaw"]["source"] == "given", err
    loads = len(model_loads)
    table.write_text("Patient 7 mandible,mandible\n")
    code, _, err = predict(ckpt, scan, "--out", tmp_path / "bad", "--jaw-file", table, *FAST)
    assert one_error_line(code, err) and "jaws.csv line 1" in err and "unknown jaw 'mandible'" in err, err
    assert len(model_loads) == loads and not (tmp_path / "bad").exists()


def test_skip_existing_skips_complete_scans_and_redoes_half_written_ones(ckpt: Path, tmp_path: Path,
                                                                        model_loads: list[str]) -> None:
    out = tmp_path / "out"
    code, _, err = predict(ckpt, SAMPLES, "--out", out, "--export-teeth", *FAST)
    assert code == 0, err
    first = rows(out / "summary.csv")
    assert [r["status"] for r in first] == ["done"] * 3
    # a crash, as a killed run leaves it: MSN022's picture never written; MSN023's files all written but
    # its done-record not yet (killed between the two)
    (out / "MSN022_upper.png").unlink()
    record_path(out, "MSN023_lower").unlink()
    before = {stem: stamps(out, stem) for stem in ("MSN021_lower", "MSN022_upper", "MSN023_lower")}
    code, stdout, err = predict(ckpt, SAMPLES, "--out", out, "--export-teeth", "--skip-existing", *FAST)
    assert code == 0, err
    assert "skipped 1 of 3 scans that an earlier run finished" in err
    assert stamps(out, "MSN021_lower") == before["MSN021_lower"]  # complete: not one file touched
    for stem in ("MSN022_upper", "MSN023_lower"):  # half written: redone, every file new
        after = stamps(out, stem)
        assert after.keys() >= before[stem].keys() and (out / f"{stem}.png").is_file()
        assert all(after[name] != t for name, t in before[stem].items()), stem
    second = rows(out / "summary.csv")
    assert [r["status"] for r in second] == ["skipped", "done", "done"]
    assert second[0]["teeth"] == first[0]["teeth"] and second[0]["output"] == "MSN021_lower"
    assert "1 skipped (finished earlier)" in stdout
    assert len(model_loads) == 2
    # everything complete: nothing to do, and the network is not even loaded
    code, _, err = predict(ckpt, SAMPLES, "--out", out, "--export-teeth", "--skip-existing", *FAST)
    assert code == 0 and "nothing left to do" in err and len(model_loads) == 2, err
    assert [r["status"] for r in rows(out / "summary.csv")] == ["skipped"] * 3
    # other inference options: the earlier results are not this run's, every scan is redone
    code, _, err = predict(ckpt, SAMPLES, "--out", out, "--export-teeth", "--skip-existing", *FAST,
                           "infer.mirror_tta=false")
    assert code == 0 and [r["status"] for r in rows(out / "summary.csv")] == ["done"] * 3, err
    # --export-teeth asked now but not then: not complete either
    code, _, err = predict(ckpt, SAMPLE, "--out", tmp_path / "one", *FAST)
    code, _, err = predict(ckpt, SAMPLE, "--out", tmp_path / "one", "--skip-existing", "--export-teeth", *FAST)
    assert code == 0 and "skipped" not in err and (tmp_path / "one" / "MSN022_upper_gingiva.stl").is_file(), err


def test_skip_existing_and_overwrite_exclude_each_other(ckpt: Path, tmp_path: Path) -> None:
    code, _, err = predict(ckpt, SAMPLE, "--out", tmp_path / "out", "--skip-existing", "--overwrite", *FAST)
    assert one_error_line(code, err) and "pass one of them" in err, err


def test_layout_per_scan_writes_a_folder_per_scan(ckpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, err = predict(ckpt, SAMPLES, "--out", out, "--layout", "per-scan", "--export-teeth", *FAST)
    assert code == 0, err
    for stem in ("MSN021_lower", "MSN022_upper", "MSN023_lower"):
        folder = out / stem
        assert {f".json", ".ply", ".png", "_gingiva.stl"} <= {p.name[len(stem):] for p in folder.iterdir()}
        assert json.loads((folder / f"{stem}.json").read_text())["jaw"] in ("upper", "lower")
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [".pointmamba-predict.lock", "run.json",
                                                                    "summary.csv"]
    # resumable as the flat layout is
    code, _, err = predict(ckpt, SAMPLES, "--out", out, "--layout", "per-scan", "--export-teeth", "--skip-existing",
                           *FAST)
    assert code == 0 and "nothing left to do" in err, err
    # a file where a scan's folder goes: one line before any work
    other = tmp_path / "other"
    other.mkdir()
    (other / "MSN022_upper").write_text("not a folder")
    code, _, err = predict(ckpt, SAMPLE, "--out", other, "--layout", "per-scan", *FAST)
    assert one_error_line(code, err) and "MSN022_upper is a file, where this run makes the scan's folder" in err, err


def test_the_model_line_is_short_and_the_details_are_in_run_json(ckpt: Path, tmp_path: Path) -> None:
    """Every run printed a 600-character 'model: ...; inference: ...' line."""
    out = tmp_path / "out"
    code, stdout, err = predict(ckpt, SAMPLES / "MSN021", SAMPLE, "--out", out, *FAST)
    assert code == 0, err
    line = next(ln for ln in stdout.splitlines() if ln.startswith("model:"))
    sha = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert len(line) <= 140 and sha[:12] in line and "graph_cut=False" in line and "mirror_tta" not in line, line
    run = json.loads((out / "run.json").read_text())
    assert run["checkpoint"] == str(ckpt.resolve()) and run["checkpoint_sha256"] == sha
    assert run["inference"]["graph_cut"] is False and run["inference"]["mirror_tta"] is True
    assert {"pointmamba", "python", "torch", "numpy"} <= set(run["versions"])
    assert (run["scans"], run["done"], run["failed"]) == (2, 2, 0)
    code, stdout, err = predict(ckpt, SAMPLE, "--out", tmp_path / "v", "--verbose", *FAST)
    assert code == 0 and "inference: mirror_tta=True" in stdout and str(ckpt.resolve()) in stdout, stdout


def test_the_review_page_spools_inside_out(ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """predict made its ReviewPage without spool=: scans went to the system's temporary folder."""
    from pointmamba.report import ReviewPage

    spools: list[Path] = []
    real = ReviewPage.__init__

    def spy(self, *args, **kwargs) -> None:
        real(self, *args, **kwargs)
        spools.append(self._spool)

    monkeypatch.setattr(ReviewPage, "__init__", spy)
    out = tmp_path / "out"
    code, _, err = predict(ckpt, SAMPLE, "--out", out, "--report", out / "index.html", *FAST)
    assert code == 0 and (out / "index.html").is_file(), err
    assert len(spools) == 1 and spools[0].parent == out / STATE_DIR


def test_the_review_pages_chunk_pages_are_checked_up_front(ckpt: Path, tmp_path: Path) -> None:
    """The chunk pages (index-01.html ... beside index.html) were not among the outputs checked: an
    existing file of that name was silently replaced."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "index-01.html").write_text("someone's page")
    code, _, err = predict(ckpt, SAMPLE, "--out", out, "--report", out / "index.html", *FAST)
    assert one_error_line(code, err) and "index-01.html exists (not written by this run, a page of the review" in err
    assert (out / "index-01.html").read_text() == "someone's page" and not (out / "MSN022_upper.json").exists()
    # a planned output with a chunk page's name: refused always
    scan = tmp_path / "page-01.obj"
    shutil.copy(SAMPLE, scan)
    code, _, err = predict(ckpt, scan, "--jaw", "upper", "--out", tmp_path / "o2", "--report", tmp_path / "o2" / "page.png",
                           *FAST)
    assert one_error_line(code, err) and "page-01.png has the name of a page of the review page" in err, err


def test_the_chunk_page_rule_covers_every_page_the_review_page_writes(tmp_path: Path) -> None:
    """check_report_pages knows the chunk pages by a pattern: every page a large page writes beside the
    index must match it (a renamed chunk would escape the check)."""
    from pointmamba.cli.output_files import report_page_pattern
    from pointmamba.report import ReviewPage
    from pointmamba.report.review_page import PAGE_SCANS

    page = ReviewPage(spool=tmp_path)
    for k in range(2 * PAGE_SCANS + 1):
        page.add_failed(f"scan{k:03d}", "unreadable")
    index = tmp_path / "index.html"
    page.write(index)
    chunks = [p for p in page.written if p != index]
    assert len(chunks) == 3 and all(report_page_pattern(index).fullmatch(p.name) for p in chunks)
