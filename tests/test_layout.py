"""Package layout: no import shims, no attribute hiding a submodule, the trainer's imports one-way."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import types
from pathlib import Path

import pytest

import pointmamba

PACKAGE = Path(pointmamba.__file__).parent


def _packages() -> list[str]:
    return ["pointmamba"] + [m.name for m in pkgutil.walk_packages(pointmamba.__path__, "pointmamba.") if m.ispkg]


@pytest.mark.parametrize("package", _packages())
def test_no_package_attribute_hides_a_submodule(package: str) -> None:
    """``pointmamba.data.grid_sample`` was the function, so the module of that name could not be reached as
    an attribute; every submodule's name must give the submodule (or nothing)."""
    pkg = importlib.import_module(package)
    for sub in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{sub.name}")
        value = getattr(pkg, sub.name, module)
        assert isinstance(value, types.ModuleType) and value is module, \
            f"{package}.{sub.name} is {type(value).__name__} {value!r}, hiding the submodule"


@pytest.mark.parametrize("old", ["pointmamba.engine", "pointmamba.engine.trainer", "pointmamba.models.block",
                                 "pointmamba.data.grid_sample",
                                 # moved by the renovation (issue 44): no shim stayed behind
                                 "pointmamba.evaluation.inference", "pointmamba.evaluation.tooth_numbering",
                                 "pointmamba.evaluation.confidence", "pointmamba.evaluation.graph_cut",
                                 "pointmamba.evaluation.tooth_decoding", "pointmamba.evaluation.tooth_shape",
                                 "pointmamba.segmenter", "pointmamba.segmentation", "pointmamba.structure",
                                 "pointmamba.segment", "pointmamba.sequence", "pointmamba.serialization",
                                 "pointmamba.curve_orders", "pointmamba.atomic_file", "pointmamba.timing",
                                 "pointmamba.pretrained", "pointmamba.training.checkpoint",
                                 "pointmamba.data.closed_extractions"])
def test_old_module_paths_are_gone(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def _imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, anywhere in it (TYPE_CHECKING blocks and functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return found


def test_trainer_hooks_imports_are_one_way() -> None:
    """The trainer imports hooks, warm-up and diagnostics; none of them imports the trainer (not even for
    type hints: they see it as ``hooks.TrainerView``)."""
    training = PACKAGE / "training"
    for name in ("hooks", "warmup", "diagnostics"):
        imported = _imported_modules(training / f"{name}.py", "pointmamba.training")
        assert "pointmamba.training.trainer" not in imported, f"training/{name}.py imports the trainer"
    trainer = _imported_modules(training / "trainer.py", "pointmamba.training")
    assert {"pointmamba.training.hooks", "pointmamba.training.warmup"} <= trainer


def test_ops_names_are_the_functions() -> None:
    import pointmamba.ops as ops

    assert callable(ops.selective_scan) and callable(ops.causal_conv1d) and callable(ops.sparse_conv)
    assert not isinstance(ops.selective_scan, type(ops))
