"""The tools behave alike: a positional config (``--config`` an alias) in train and test, ``--out`` everywhere
(``--work-dir`` an alias in train), ``--verbose`` and ``--no-progress`` in every tool; and pointmamba-ablate's
verdicts (val mIoU with the seed spread beside the loss ratio), whole-epoch ticks and time estimate."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.tiny import TINY_MODEL, tiny_overrides, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def _console_tools() -> list[str]:
    text = (ROOT / "setup.py").read_text()
    return sorted(set(re.findall(r'"pointmamba-[\w-]+ = (pointmamba\.cli\.\w+):cli"', text)))


RESEARCH_TOOLS = [f"pointmamba.research.{name}" for name in
                  ("calibrate_confidence", "fit_arch_priors", "probe_distance", "removal_check")]
"""The studies built on the tools' plumbing (``python -m pointmamba.research.NAME``)."""


@pytest.mark.parametrize("tool", _console_tools() + RESEARCH_TOOLS)
def test_every_tool_has_verbose_no_progress_and_out(tool: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [tool, "--help"])
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(tool).main()
    assert exit_.value.code == 0
    usage = capsys.readouterr().out
    for flag in ("--verbose", "--no-progress", "--out"):
        assert flag in usage, f"{tool}: no {flag}"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"))


def _train(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pointmamba.cli import train

    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    train.main()


def test_train_takes_a_positional_config_and_out_with_their_old_names(synth: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text("train:\n  epochs: 1\n")
    sets = [o for o in tiny_overrides(synth, tmp_path / "unused", epochs=1) if not o.startswith("work_dir=")
            and not o.startswith("train.epochs")] + ["train.max_steps_per_epoch=1", "train.val_interval=0",
                                                      "train.progress=true"]
    _train([str(config), "--out", str(tmp_path / "new"), "--no-progress", "--set", *sets], monkeypatch)
    _train(["--config", str(config), "--work-dir", str(tmp_path / "old"), "--set", *sets], monkeypatch)
    assert (tmp_path / "new" / "last.pth").is_file() and (tmp_path / "old" / "last.pth").is_file()
    assert "progress: false" in (tmp_path / "new" / "config.yaml").read_text()  # --no-progress
    assert "progress: true" in (tmp_path / "old" / "config.yaml").read_text()
    with pytest.raises(SystemExit) as exit_:  # two different configs: one line, not a guess
        _train([str(config), "--config", str(tmp_path / "other.yaml"), "--out", str(tmp_path / "x")], monkeypatch)
    assert exit_.value.code == 2


# ---------------------------------------------------------------------------------------------- ablate
def _seed_run(stem: str, seed: int, miou: float, loss: float = 1.0) -> dict:
    records = [{"epoch": e, "train_loss": loss + 1.0 / e, "val_miou": miou * e / 2} for e in (1, 2)]
    return {"stem": stem, "seed": seed, "name": f"{stem} seed {seed}", "status": "done", "records": records, "cfg": {}}


def test_ablation_verdict_is_on_val_miou_with_the_seed_spread(tmp_path: Path) -> None:
    from pointmamba.cli import ablate

    runs = [_seed_run("cpe", 0, 0.50), _seed_run("cpe", 1, 0.60), _seed_run("cpe", 2, 0.55),
            _seed_run("up", 0, 0.56), _seed_run("up", 1, 0.65), _seed_run("up", 2, 0.62),  # +0.06 +0.05 +0.07
            _seed_run("noise", 0, 0.53), _seed_run("noise", 1, 0.57), _seed_run("noise", 2, 0.56)]  # +0.03 -0.03 +0.01
    rows, meta, notes = ablate.summarize_seeds(runs, "cpe")
    agg = {a["config"]: a for a in ablate.aggregate(rows)}
    assert agg["up"]["miou_delta_mean"] == pytest.approx(0.06) and agg["up"]["miou_delta_std"] == pytest.approx(0.01)
    assert agg["up"]["miou_verdict"] == "better" and agg["noise"]["miou_verdict"] == "within the seed spread"
    assert agg["up"]["verdict"] == "acceptable"  # the loss ratio's verdict stays beside it
    ablate.write_seed_tables(rows, list(agg.values()), meta, runs, tmp_path, notes)
    md = (tmp_path / "results.md").read_text()
    assert "Verdict on validation" in md and "| +0.0600 ± 0.0100 | better |" in md
    assert "| `cpe` (baseline) | 3/3 |" in md and "| baseline |" in md

    single, meta = ablate.summarize([_seed_run("cpe", 0, 0.5), _seed_run("up", 0, 0.6)], "cpe")
    assert single[1]["miou_delta"] == pytest.approx(0.1) and single[1]["miou_verdict"] == "one seed: no spread"


def test_curves_have_whole_epoch_ticks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pointmamba.cli import ablate

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig) or close(fig))
    runs = [_seed_run("cpe", 0, 0.5), _seed_run("up", 0, 0.6)]
    ablate.plot_curves(runs, ablate.summarize(runs, "cpe")[1], tmp_path / "curves.png")
    rows, meta, _ = ablate.summarize_seeds(runs, "cpe")
    ablate.plot_seed_curves(runs, meta, tmp_path / "seed_curves.png")
    assert len(figures) == 2
    for fig in figures:
        fig.canvas.draw()
        for ax in fig.axes:
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_ablate_prints_a_time_estimate_before_the_runs(synth: Path, tmp_path: Path) -> None:
    (tmp_path / "cpe.yaml").write_text("model:\n  position: cpe\n")
    sets = TINY_MODEL + [f"data.root={synth}", "data.train_names=[SYN00000, SYN00001]", "data.val_names=[SYN00002_upper]",
                         "data.grid_size=0.8", "data.max_points=600", f"data.cache_dir={synth / '.cache'}",
                         "train.epochs=1", "train.batch_size=1", "train.max_steps_per_epoch=1"]
    proc = subprocess.run([sys.executable, "-m", "pointmamba.cli.ablate", str(tmp_path / "cpe.yaml"), "--out",
                           str(tmp_path / "out"), "--no-progress", "--set", *sets],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    estimate = next(i for i, ln in enumerate(lines) if ln.startswith("[ablate] time estimate: about "))
    started = next(i for i, ln in enumerate(lines) if ln.startswith("[ablate] cpe: training 1 epochs"))
    assert estimate < started and "one training step of cpe took" in lines[estimate]
    command = next(ln for ln in lines if ln.startswith("[ablate] $ "))
    assert "--out" in command and "--work-dir" not in command and "--no-progress" in command
    assert "it/s]" not in proc.stderr  # the run's bars are off too


def test_the_criterion_is_stated_in_the_docs_not_credited_elsewhere() -> None:
    from pointmamba.cli import ablate

    assert "design notes" not in ablate.__doc__
    text = (ROOT / "docs" / "ablations.md").read_text()
    for words in ("best val mIoU", "seed", "1.1", "1.2", "epoch 10"):
        assert words in text, words
