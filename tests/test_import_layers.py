"""The package's layers: a module imports only from its own layer or the layers below, and no two modules
import each other in a circle. Imports inside functions count: a lazy import is still a dependency.

Lowest layer first. A module belongs to the longest prefix listed. The config schema gathers each section's
defaults from where they live (``models.config``, ``inference.config``: leaves that import nothing above
``utils``), so ``inference.config`` sits with it, below the prediction code that reads it. The metrics are
pure functions of labels that a prediction's ``compare`` and the evaluation loop both score with.
Imports for type hints only (under ``if TYPE_CHECKING:``) never run, and are not counted.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pointmamba"
LAYERS = [
    ["pointmamba.utils"],
    ["pointmamba.point"],
    ["pointmamba.ops"],
    ["pointmamba.models"],
    ["pointmamba.data"],
    ["pointmamba.evaluation.metrics", "pointmamba.evaluation.teeth_metrics"],
    ["pointmamba.config", "pointmamba.config_ranges", "pointmamba.inference.config"],
    ["pointmamba.checkpoints"],
    ["pointmamba.inference"],
    ["pointmamba.evaluation"],
    ["pointmamba.training", "pointmamba.report"],
    ["pointmamba.research", "pointmamba.cli", "pointmamba"],
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports (``from x import name`` counts ``x.name`` where that is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    hints_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _type_checking(block.test)
                  for n in ast.walk(block)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in hints_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target + "." + a.name for a in node.names if target + "." + a.name in modules] or [target]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def layer(module: str) -> int:
    best, found = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, found = len(p), i
    assert found >= 0, f"{module}: in no layer of LAYERS"
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: imports(p, set(files)) for m, p in files.items()}


def test_no_module_imports_one_above_its_layer() -> None:
    upward = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
              for m, targets in sorted(graph().items()) for t in sorted(targets)
              if layer(t) > layer(m) and not m.startswith(t + ".")]
    assert not upward, "\n".join(upward)


def test_no_import_circles() -> None:
    g = graph()
    # a package's __init__ that re-exports its modules is imported by them only as their parent: not a circle
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in g.items()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


def test_the_check_sees_a_circle_and_an_upward_import(tmp_path: Path, monkeypatch) -> None:
    """The checks above can fail: a package with a circle and an upward import is caught."""
    pkg = tmp_path / "pointmamba"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "a.py").write_text("from . import b\nfrom ..models import net\n")
    (pkg / "utils" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
                                        "def f():\n    from .a import x\n")
    (pkg / "utils" / "c.py").write_text("from . import b\n")  # b's import of c is for type hints only
    (pkg / "models").mkdir()
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "net.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    g = graph()
    assert g["pointmamba.utils.a"] == {"pointmamba.utils.b", "pointmamba.models.net"}
    assert g["pointmamba.utils.b"] == {"pointmamba.utils.a"}
    for check in (test_no_module_imports_one_above_its_layer, test_no_import_circles):
        try:
            check()
        except AssertionError:
            continue
        raise AssertionError(f"{check.__name__} passed a bad package")
