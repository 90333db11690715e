"""Config keys retired with their code (``config.RETIRED``): a config file or ``--set`` naming one is refused
in one line; a checkpoint's stored config holding them still loads, silently where the stored value is what
the code left does, with one warning otherwise."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pointmamba.config import RETIRED, ConfigError, defaults, flatten, load_config, resolve_infer
from pointmamba.checkpoints.checkpoint import checkpoint_config, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_every_retired_key_is_gone_from_the_defaults_and_names_where_its_code_is() -> None:
    keys = set(flatten(defaults()))
    for key, reason in RETIRED.items():
        assert key not in keys and not any(k.startswith(key + ".") for k in keys)
        assert ("pre-renovation" in reason or "commit" in reason) and "\n" not in reason


@pytest.mark.parametrize("text, key", [("infer:\n  tooth_decoding: false\n", "infer.tooth_decoding"),
                                       ("data:\n  missing_teeth: {p: 0.5, close: 0.3}\n", "data.missing_teeth.close"),
                                       ("data:\n  augment: {shift_mm: 2.0}\n", "data.augment.shift_mm")])
def test_a_config_file_setting_a_retired_key_fails_naming_key_file_and_reason(tmp_path: Path, text: str,
                                                                             key: str) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(text)
    child = tmp_path / "child.yaml"
    child.write_text("_base_: base.yaml\n")
    with pytest.raises(ConfigError) as exc:
        load_config(child)
    message = str(exc.value)
    assert "\n" not in message and str(base) in message and repr(key) in message and RETIRED[key] in message


def test_a_set_override_or_an_infer_dict_with_a_retired_key_fails() -> None:
    with pytest.raises(ConfigError, match=r"--set infer.max_input_points=8000: config key 'infer.max_input_points'"):
        load_config(None, ["infer.max_input_points=8000"])
    with pytest.raises(ConfigError, match=r"'infer.shape_weight' no longer exists \(retired after tag pre-renovation"):
        resolve_infer({"shape_weight": 2.0})


def _stored(infer: dict, data: dict | None = None, train: dict | None = None) -> dict:
    cfg = defaults()
    return {"config": {"model": cfg["model"], "data": {**cfg["data"], **(data or {})},
                       "train": {**cfg["train"], **(train or {})}, "infer": {**cfg["infer"], **infer}}}


def test_a_checkpoint_config_with_retired_keys_at_their_old_defaults_loads_silently() -> None:
    state = _stored({"tooth_decoding": False, "tooth_relabel": True, "decoding_width_weight": 0.1,
                     "shape_weight": None, "shape_model": None, "shape_floor": 0.0, "tooth_weight": None,
                     "max_input_points": None, "graph_cut_density_angles": False},
                    {"relabel_closed_extractions": False, "relabel_counted_sides": False, "scan_repeats": {},
                     "missing_teeth": {"close": 0.0, "close_min": 0.6}, "augment": {"shift_mm": 0.0}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = checkpoint_config(state, "old.pth")
    assert cfg["data"]["missing_teeth"] == {} and cfg["data"]["augment"] == {}
    assert "tooth_decoding" not in cfg["infer"] and cfg["infer"]["instance_numbering"] is True


def test_a_checkpoint_config_with_a_retired_key_switched_on_loads_with_one_warning() -> None:
    state = _stored({"tooth_decoding": True, "graph_cut_density_angles": True, "decoding_width_weight": 0.1},
                    {"augment": {"shift_mm": 2.0}})
    with pytest.warns(UserWarning) as record:
        cfg = checkpoint_config(state, "old.pth")
    assert len(record) == 1
    message = str(record[0].message)
    assert "infer.tooth_decoding=True" in message and "infer.graph_cut_density_angles=True" in message
    assert "data.augment.shift_mm=2.0" in message and "decoding_width_weight" not in message
    assert "shift_mm" not in cfg["data"]["augment"] and "graph_cut_density_angles" not in cfg["infer"]
    # the relabel did something only where the instance numbering was off
    with pytest.warns(UserWarning, match="infer.tooth_relabel=True"):
        checkpoint_config(_stored({"tooth_relabel": True, "instance_numbering": False}), "old.pth")


def test_a_distilled_students_checkpoint_loads_warning_of_its_teacher_alone() -> None:
    """train.distill_*: the student's own weights load, with one warning naming what its teacher did; a weight
    or temperature stored without a teacher did nothing, and says nothing."""
    with pytest.warns(UserWarning) as record:
        cfg = checkpoint_config(_stored({}, train={"distill_from": "pair.pth", "distill_weight": 0.5,
                                                   "distill_temperature": 2.0}), "student.pth")
    message = str(record[0].message)
    assert len(record) == 1 and "train.distill_from='pair.pth'" in message and "distill_temperature=2.0" in message
    assert not any(k.startswith("distill_") for k in cfg["train"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_config(_stored({}, train={"distill_from": None, "distill_weight": 0.3}), "plain.pth")


def test_the_shipped_model_loads_without_warnings() -> None:
    path = ROOT / "pointmamba" / "checkpoints" / "teeth17_shared_data.pth"
    state = load_checkpoint(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_config(state, path)
        for member in state.get("average_with") or []:
            checkpoint_config(member, path)
