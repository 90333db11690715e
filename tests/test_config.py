"""Config loading: inheritance, overrides, and clear errors for keys and types that do not fit."""
from __future__ import annotations

from pathlib import Path

import pytest

from pointmamba.config import ConfigError, load_config, parse_override

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_and_override_types(tmp_path: Path) -> None:
    cfg = load_config(None, ["train.epochs=3", "train.lr=1e-3", "data.train_names=[A_upper, B_lower]"])
    assert cfg["train"]["epochs"] == 3 and cfg["train"]["lr"] == pytest.approx(1e-3)
    assert cfg["data"]["train_names"] == ["A_upper", "B_lower"]
    assert cfg["work_dir"] == str(Path("work_dirs") / "default")


def test_inheritance_and_precedence(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "train:\n  epochs: 7\n  lr: 0.01\n")
    child = write(tmp_path / "child.yaml", "_base_: base.yaml\ntrain:\n  lr: 0.5\n")
    cfg = load_config(child, ["train.lr=0.25"])
    assert cfg["train"]["epochs"] == 7  # from the base
    assert cfg["train"]["lr"] == 0.25  # the override beats the file, which beats the base
    assert cfg["work_dir"] == str(Path("work_dirs") / "child")


@pytest.mark.parametrize("text, overrides, message", [
    ("train:\n  epoch: 3\n", [], r"unknown config key 'train.epoch'.*valid keys under train:.*epochs"),
    (None, ["modle.channels=3"], r"unknown config key 'modle'"),
    ("train:\n  epochs: three\n", [], r"'train.epochs' must be of type int.*got str 'three'"),
    (None, ["data.align=5"], r"'data.align' must be of type bool"),
    (None, ["train=5"], r"'train' must be a mapping"),
])
def test_an_unknown_key_or_a_wrong_type_is_named(tmp_path: Path, text: str | None, overrides: list[str],
                                                 message: str) -> None:
    path = write(tmp_path / "bad.yaml", text) if text else None
    with pytest.raises(ConfigError, match=message):
        load_config(path, overrides)


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = write(tmp_path / "broken.yaml", "train: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: malformed YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"config file not found: .*nope.yaml"):
        load_config(tmp_path / "nope.yaml")
    loop = write(tmp_path / "loop.yaml", "_base_: loop.yaml\n")
    with pytest.raises(ConfigError, match="circular"):
        load_config(loop)
    with pytest.raises(ConfigError, match="key.subkey=value"):
        parse_override("train.epochs")


@pytest.mark.parametrize("path", sorted((ROOT / "configs").rglob("*.yaml")), ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg["model"] and cfg["data"]["root"]


def test_model_and_data_num_classes_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"model.num_classes \(33\) must equal data.num_classes \(17\)"):
        load_config(None, ["model.num_classes=33"])
    cfg = load_config(None, ["model.num_classes=33", "data.num_classes=33"])
    assert cfg["model"]["num_classes"] == cfg["data"]["num_classes"] == 33


@pytest.mark.parametrize("text, message", [
    ("_base_: 5\n", "_base_ must be a file name or a list of file names, got 5"),
    ("_base_: [[a.yaml]]\n", "_base_ must be a file name or a list of file names, got [['a.yaml']]"),
    ("train:\n  betas: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("train:\n  epochs: 2024-13-45\n", "unreadable value"),
])
def test_odd_yaml_is_one_line_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    bad = write(tmp_path / "odd.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value).startswith(f"{bad}: ") and message in str(info.value) and "\n" not in str(info.value)


def test_non_utf8_config_names_the_file_and_byte(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("# Zähne\ntrain:\n  epochs: 2\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.yaml: not UTF-8 text \(byte 0xe4 at offset 3\)"):
        load_config(bad)
    write(tmp_path / "null_base.yaml", "_base_:\ntrain:\n  epochs: 2\n")  # an empty _base_ is no base
    assert load_config(tmp_path / "null_base.yaml")["train"]["epochs"] == 2
