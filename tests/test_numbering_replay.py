"""The numbering replay (``pointmamba.research.numbering_replay``): a stored cut numbered again gives what the
whole prediction gives, under the stored options and under a changed numbering option, and the replay tool
scores it as tools/test.py (the review flag included) and the removal check do."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from support.tiny import TINY_MODEL, untrained_checkpoint
from support.tools import run_tool

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def shipped():
    import torch

    from pointmamba.checkpoints.shipped import resolve_checkpoint
    from pointmamba.inference.pipeline import load_trained

    model, cfg = load_trained(resolve_checkpoint(None), torch.device("cpu"))
    return model, cfg


def _prediction(model, cfg, scan, **infer):
    import torch

    from pointmamba.inference.pipeline import segment_scan

    return segment_scan(model, scan, {**cfg, "infer": {**(cfg.get("infer") or {}), **infer}}, torch.device("cpu"))


def _predict(model, cfg, scan, **infer) -> np.ndarray:
    return _prediction(model, cfg, scan, **infer).fdi


def test_a_replayed_cut_is_numbered_as_the_whole_prediction_numbers_it(shipped, tmp_path: Path) -> None:
    import torch

    from pointmamba.data import load_scan
    from pointmamba.evaluation.removal_check import without_tooth
    from pointmamba.evaluation.scan_summary import review_columns
    from pointmamba.research.numbering_replay import cache_scan, replay_file

    from pointmamba import Segmenter

    model, cfg = shipped
    segmenter = Segmenter()
    scan = load_scan(SAMPLES / "MSN022" / "MSN022_upper.obj")
    for name, case in (("whole", scan), ("without_24", without_tooth(scan, 24, "flatten"))):
        path = tmp_path / f"{name}.npz"
        cached = cache_scan(path, case, model, cfg, torch.device("cpu"))
        whole = _predict(model, cfg, case)
        np.testing.assert_array_equal(cached, whole)
        replayed = replay_file(path, {}, review=True)
        np.testing.assert_array_equal(replayed.fdi, whole)
        np.testing.assert_array_equal(replayed.reference, case.labels)
        assert replayed.jaw == "upper"
        # its teeth as the user's path reports them: numbers, runner-ups and each tooth's vertices
        result = segmenter(case)
        assert [(t.fdi, t.runner_up) for t in replayed.teeth] == [(t.fdi, t.runner_up) for t in result.confidence.teeth]
        for mine, theirs in zip(replayed.teeth, result.confidence.teeth):
            np.testing.assert_array_equal(replayed.instances == mine.instance, result.instances == theirs.instance)
        # an option after the cut: the replay follows the whole prediction under it, its review flag too
        for infer in ({"numbering_touching_nu": 3.0}, {"merge_packed": False, "numbering_evidence_weight": 0.5},
                      {"dentition": "mixed"}):
            pred = _prediction(model, cfg, case, **infer)
            replayed = replay_file(path, infer, review=True)
            np.testing.assert_array_equal(replayed.fdi, pred.fdi)
            assert (replayed.review, replayed.findings) == tuple(review_columns(pred, case).values())
        assert replay_file(path, {}).review is None  # not asked


def test_an_option_before_the_cut_is_refused_in_one_line(shipped, tmp_path: Path) -> None:
    import torch

    from pointmamba.data import load_scan
    from pointmamba.research.numbering_replay import cache_scan, replay_file

    model, cfg = shipped
    path = tmp_path / "MSN021_lower.npz"
    cache_scan(path, load_scan(SAMPLES / "MSN021" / "MSN021_lower.obj"), model, cfg, torch.device("cpu"))
    replay_file(path, {"mirror_tta": True})  # the stored value itself is no change
    with pytest.raises(ValueError, match=r"MSN021_lower\.npz: infer\.mirror_tta acts on the network's probabilities"):
        replay_file(path, {"mirror_tta": False})


def test_a_graph_cut_option_cuts_the_stored_probabilities_again_as_the_whole_prediction_does(shipped, tmp_path: Path) -> None:
    import torch

    from pointmamba.data import load_scan
    from pointmamba.research.numbering_replay import cache_scan, replay_file

    model, cfg = shipped
    scan = load_scan(SAMPLES / "MSN021" / "MSN021_lower.obj")
    path = tmp_path / "MSN021_lower.npz"
    default = cache_scan(path, scan, model, cfg, torch.device("cpu"))  # the whole prediction, default options
    for infer in ({"graph_cut_smoothing": 1.0}, {"graph_cut_smoothing": 0.5}, {"graph_cut": False}):
        whole = _predict(model, cfg, scan, **infer)
        np.testing.assert_array_equal(replay_file(path, infer).fdi, whole)
    assert not np.array_equal(whole, default)  # without the cut the labels differ: the replay did cut again


@pytest.mark.parametrize("mode", ["flatten", "close"])
def test_cache_then_replay_scores_as_the_test_tool_and_the_removal_check(tmp_path: Path, mode: str) -> None:
    ckpt = untrained_checkpoint(tmp_path / "tiny.pth")
    config = tmp_path / "config.yaml"
    config.write_text("train:\n  device: cpu\n")
    sets = [f"data.root={SAMPLES}", "data.val_names=[MSN021_lower,MSN022_upper]", "data.grid_size=0.6", *TINY_MODEL]
    code, _, err = run_tool("test", config, "--checkpoint", ckpt, "--split", "val", "--no-progress", "--set", *sets,
                            "--out", tmp_path / "test")
    assert code == 0, err[-2000:]
    code, _, err = run_tool("removal_check", "--config", config, "--checkpoint", ckpt, "--split", "val",
                            "--mode", mode, "--no-progress", "--set", *sets, "--out", tmp_path / "removal")
    assert code == 0, err[-2000:]
    code, _, err = run_tool("numbering_replay", "cache", "--config", config, "--checkpoint", ckpt, "--split", "val",
                            "--removals", "--removal-mode", mode, "--no-progress", "--set", *sets, "--out",
                            tmp_path / "cache")
    assert code == 0, err[-2000:]
    code, out, err = run_tool("numbering_replay", "replay", tmp_path / "cache", "--no-progress", "--out",
                              tmp_path / "replay")
    assert code == 0, err[-2000:]

    def rows(path: Path) -> list[dict[str, str]]:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    scored = lambda r: (float(r["miou"]), r["review"], r["findings"])  # noqa: E731
    tested = {r["name"]: scored(r) for r in rows(tmp_path / "test" / "per_scan.csv")}
    assert {r["name"]: scored(r) for r in rows(tmp_path / "replay" / "per_scan.csv")} == tested
    key = lambda r: (r["scan"], r["removed"])  # noqa: E731
    assert sorted(rows(tmp_path / "replay" / "removals.csv"), key=key) == sorted(rows(tmp_path / "removal" / "removals.csv"), key=key)
    assert len(rows(tmp_path / "removal" / "removals.csv")) > 0
    # an empty or missing cache: one line naming the folder
    code, _, err = run_tool("numbering_replay", "replay", tmp_path / "nothing", "--out", tmp_path / "r2")
    assert code == 2 and "nothing: no cached scan" in err


def test_a_cache_from_before_the_tooth_pair_cost_is_cut_again_under_todays_default(shipped, tmp_path: Path) -> None:
    """A cache written before ``infer.graph_cut_tooth_pair_cost`` existed stores a Potts cut and no such option:
    replayed without options it is cut again (today's default, as the whole prediction), and given 1 its own
    cut is numbered."""
    import json

    import torch

    from pointmamba.data import load_scan
    from pointmamba.research.numbering_replay import cache_scan, replay_file

    model, cfg = shipped
    scan = load_scan(SAMPLES / "MSN021" / "MSN021_lower.obj")
    path = tmp_path / "old.npz"
    potts_cfg = {**cfg, "infer": {**(cfg.get("infer") or {}), "graph_cut_tooth_pair_cost": 1}}
    cache_scan(path, scan, model, potts_cfg, torch.device("cpu"))
    with np.load(path) as d:
        arrays = {k: d[k] for k in d.files}
    options = json.loads(str(arrays["options"]))
    del options["graph_cut_tooth_pair_cost"]  # as the caches of before it store their options
    arrays["options"] = np.array(json.dumps(options))
    np.savez(path, **arrays)
    today, potts = _predict(model, cfg, scan), _predict(model, cfg, scan, graph_cut_tooth_pair_cost=1)
    assert not np.array_equal(today, potts)
    np.testing.assert_array_equal(replay_file(path, {}).fdi, today)
    np.testing.assert_array_equal(replay_file(path, {"graph_cut_tooth_pair_cost": 1}).fdi, potts)


def test_a_cache_made_under_an_old_default_says_so_and_the_json_keeps_it(shipped, tmp_path: Path) -> None:
    """A cache stores the options its scans were made with; one made before a default changed replays under the
    old value (as asked of it), and the replay says so in one line naming the option, both values and --set."""
    import json

    import torch

    from pointmamba.data import load_scan
    from pointmamba.inference.config import INFER_DEFAULTS
    from pointmamba.research.numbering_replay import cache_scan

    model, cfg = shipped
    old = 0.0 if INFER_DEFAULTS["numbering_class_prior"] else 0.5
    scan = load_scan(SAMPLES / "MSN021" / "MSN021_lower.obj")
    cache = tmp_path / "cache"
    cache.mkdir()
    cache_scan(cache / "MSN021_lower.npz", scan, model,
               {**cfg, "infer": {**(cfg.get("infer") or {}), "numbering_class_prior": old}}, torch.device("cpu"))
    code, _, err = run_tool("numbering_replay", "replay", cache, "--no-progress", "--out", tmp_path / "r1")
    assert code == 0, err[-2000:]
    note = [line for line in err.splitlines() if line.startswith("note:")]
    today = INFER_DEFAULTS["numbering_class_prior"]
    assert len(note) == 1 and f"numbering_class_prior={old} (today {today})" in note[0] and "--set" in note[0]
    stored = json.loads((tmp_path / "r1" / "replay.json").read_text())["stored_not_default"]
    assert stored == {"numbering_class_prior": old}
    code, _, err = run_tool("numbering_replay", "replay", cache, "--no-progress", "--out", tmp_path / "r2", "--set",
                            f"infer.numbering_class_prior={today}")
    assert code == 0 and "note:" not in err, err[-2000:]
