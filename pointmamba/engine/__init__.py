"""Old home of the training and evaluation modules, now ``pointmamba.training`` and ``pointmamba.evaluation``
(``preflight`` in ``pointmamba.data``, ``output_files`` in ``pointmamba.cli``). ``import
pointmamba.engine.<name>`` still works: it returns the moved module itself (one module object, so classes
and module state are shared), for scripts and notebooks written against the old layout."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

MOVED: dict[str, str] = {
    **{m: f"pointmamba.training.{m}" for m in (
        "trainer", "hooks", "optim", "checkpoint", "warmup", "diagnostics", "data_builders", "distributed", "seed",
        "work_dir")},
    **{m: f"pointmamba.evaluation.{m}" for m in (
        "evaluate", "metrics", "teeth_metrics", "confusion_plot", "inference", "tooth_decoding", "graph_cut", "render",
        "infer_switches", "curve_distances")},
    "datasets": "pointmamba.training.data_builders",
    "preflight": "pointmamba.data.preflight",
    "output_files": "pointmamba.cli.output_files",
}
"""Old module name under ``pointmamba.engine`` -> where it lives now."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name.rpartition(".")[2]])
        self._spec = module.__spec__  # the import system sets __spec__ to the alias's; put the real one back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # already executed under its new name


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> ModuleType:  # ``from pointmamba.engine import trainer``
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
