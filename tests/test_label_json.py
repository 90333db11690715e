"""Label JSON that Python's json cannot turn into labels (an integer beyond 64 bits, a 5,000-digit number,
arrays nested 100k deep) stops every tool in one line naming the JSON, never a traceback."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pointmamba.data import ScanFormatError, read_labels

from support.tiny import tiny_overrides, write_synthetic
from support.tools import run_tool

pytestmark = pytest.mark.usefixtures("one_thread")

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "MSN022"

CASES = {
    "beyond 64 bits": ("18446744073709551617", "labels: must be a list of 64-bit integers; entry 0 is 18446744073709551617"),
    "5,000 digits": ("9" * 5000, "json: unreadable number: Exceeds the limit (4300 digits)"),
    "100k deep": (None, "json: arrays or objects nested too deeply"),
}


def bad_labels(path: Path, case: str, n: int) -> Path:
    first, _ = CASES[case]
    labels = "[" * 100_000 + "]" * 100_000 if first is None else "[" + ",".join([first] + ["0"] * (n - 1)) + "]"
    path.write_text('{"id_patient": "MSN022", "jaw": "upper", "labels": ' + labels + "}")
    return path


def one_error_line(code: int, err: str) -> bool:
    return code == 2 and "Traceback" not in err and len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1


@pytest.mark.parametrize("case", CASES)
def test_read_labels_names_the_file(tmp_path: Path, case: str) -> None:
    n = len(json.loads((SAMPLE / "MSN022_upper.json").read_text())["labels"])
    path = bad_labels(tmp_path / "MSN022_upper.json", case, n)
    with pytest.raises(ScanFormatError) as info:
        read_labels(path, n)
    assert str(info.value).startswith(f"{path}: ") and CASES[case][1] in str(info.value)


@pytest.mark.parametrize("case", CASES)
def test_check_data_and_predict_report_one_line(tmp_path: Path, case: str) -> None:
    """check_data marks the scan FAIL; predict --reference and a label file beside the scan give one line
    (or, for the beside-the-scan file predict only reads for the jaw, no error at all)."""
    from pointmamba import build_model
    from pointmamba.config import load_config
    from pointmamba.checkpoints.checkpoint import save_checkpoint

    from support.tiny import TINY_MODEL

    root = tmp_path / "data" / "MSN022"
    shutil.copytree(SAMPLE, root)
    n = len(json.loads((root / "MSN022_upper.json").read_text())["labels"])
    bad = bad_labels(root / "MSN022_upper.json", case, n)
    code, out, err = run_tool("check_data", tmp_path / "data")
    assert code == 1 and "FAIL" in out and CASES[case][1].split(": ", 1)[1][:30] in out and "Traceback" not in err

    cfg = load_config(None, TINY_MODEL + ["data.grid_size=0.6"])
    ckpt = tmp_path / "tiny.pth"
    save_checkpoint({"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}}, ckpt)
    code, _, err = run_tool("predict", SAMPLE / "MSN022_upper.obj", "--reference", bad, "--checkpoint", ckpt,
                            "--out", tmp_path / "o")
    assert one_error_line(code, err) and f"error: {bad}: " in err
    scan = tmp_path / "mine" / "scan.obj"  # no jaw in the name: predict reads the file beside it for the jaw
    scan.parent.mkdir()
    shutil.copy(SAMPLE / "MSN022_upper.obj", scan)
    shutil.copy(bad, scan.with_suffix(".json"))
    code, _, err = run_tool("predict", scan, "--checkpoint", ckpt, "--out", tmp_path / "o2")
    assert "Traceback" not in err and (code == 0 or one_error_line(code, err))


def test_training_stops_in_one_line_naming_the_json(tmp_path: Path) -> None:
    root = write_synthetic(tmp_path / "synth")
    labels = root / "SYN00001" / "SYN00001_upper.json"
    doc = json.loads(labels.read_text())
    doc["labels"][5] = 2**70
    labels.write_text(json.dumps(doc))
    config = tmp_path / "c.yaml"
    config.write_text("")
    code, _, err = run_tool("train", "--config", config, "--set", *tiny_overrides(root, tmp_path / "w", epochs=1))
    assert one_error_line(code, err) and f"{labels}: labels: must be a list of 64-bit integers; entry 5" in err
