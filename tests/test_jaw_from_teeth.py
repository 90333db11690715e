"""The jaw told from the teeth (issue 47 item 3): a scan without a jaw in its name gets the right one from
the shipped model and is numbered as if named; a named jaw the teeth contradict is flagged; the margin
and where the jaw came from are in the JSON."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointmamba.data.mesh import read_obj
from pointmamba.inference.jaw_from_teeth import DISAGREE_NATS, UNSURE_NATS, JawCall, call_jaw

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def shipped():
    from pointmamba import Segmenter

    return Segmenter(device="cpu")


@pytest.mark.parametrize("name", ["MSN021_lower", "MSN022_upper"])
def test_an_unnamed_scan_gets_its_jaw_from_its_teeth_and_the_named_numbering(shipped, name: str) -> None:
    path = SAMPLES / name.split("_")[0] / f"{name}.obj"
    named = shipped(path)
    unnamed = shipped(read_obj(path), units="mm", name="scan from the scanner")
    call = unnamed.to_json()["confidence"]["jaw"]
    assert unnamed.jaw == named.jaw == name.split("_")[1]
    assert call["source"] == "teeth" and call["teeth"] == unnamed.jaw and call["margin_nats"] > UNSURE_NATS
    np.testing.assert_array_equal(unnamed.labels, named.labels)
    assert not any(kind == "jaw" for kind, _ in unnamed.confidence.findings)


def test_a_named_jaw_the_teeth_contradict_is_flagged(shipped) -> None:
    path = SAMPLES / "MSN021" / "MSN021_lower.obj"
    wrong = shipped(read_obj(path), units="mm", jaw="upper", name="MSN021")
    call = wrong.to_json()["confidence"]["jaw"]
    assert wrong.jaw == "upper" and call["source"] == "given" and call["teeth"] == "lower"
    assert wrong.review and "teeth read as lower" in dict(wrong.confidence.findings)["jaw"]


def test_the_call_and_its_findings() -> None:
    told = call_jaw({"upper": 10.0, "lower": 14.5}, None)
    assert (told.used, told.source, told.teeth, told.nats) == ("upper", "teeth", "upper", 4.5) and told.finding() is None
    thin = call_jaw({"upper": 10.0, "lower": 10.0 + UNSURE_NATS / 2}, None)
    assert thin.finding()[0] == "jaw" and "only 0.5 nats" in thin.finding()[1]
    assert call_jaw({"upper": 10.0, "lower": 10.0 + DISAGREE_NATS / 2}, "lower").finding() is None  # within doubt
    contradicted = call_jaw({"upper": 10.0, "lower": 10.0 + 2 * DISAGREE_NATS}, "lower")
    assert contradicted.used == "lower" and contradicted.finding()[0] == "jaw"
    assert JawCall("lower", "given", "lower", 9.0).to_json() == {"used": "lower", "source": "given", "teeth": "lower",
                                                                 "margin_nats": 9.0}


def test_tools_test_reports_the_jaw_finding_as_predict_does(shipped) -> None:
    """tools/test.py's review columns carry the jaw check's finding: the scores it reports for the flag are
    the flag a user of tools/predict.py sees."""
    import dataclasses

    import torch

    from pointmamba.data import load_scan
    from pointmamba.evaluation.scan_summary import review_columns
    from pointmamba.inference.pipeline import segment_scan

    scan = dataclasses.replace(load_scan(SAMPLES / "MSN021" / "MSN021_lower.obj"), jaw="upper")
    pred = segment_scan(shipped.model, scan, shipped.config, torch.device("cpu"))
    columns = review_columns(pred, scan)
    seen = shipped(read_obj(SAMPLES / "MSN021" / "MSN021_lower.obj"), units="mm", jaw="upper", name="MSN021")
    assert columns["review"] and "jaw" in columns["findings"].split()
    assert columns["findings"] == " ".join(sorted({kind for kind, _ in seen.confidence.findings}))
