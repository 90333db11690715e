"""Old import paths keep working after the layout cleanup (issue 16): they give the moved module itself."""
from __future__ import annotations

import importlib

import pytest

from pointmamba.engine import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_engine_paths_are_the_moved_modules(old: str) -> None:
    assert importlib.import_module(f"pointmamba.engine.{old}") is importlib.import_module(MOVED[old])
    assert importlib.import_module(MOVED[old]).__spec__.name == MOVED[old]


def test_old_model_block_path() -> None:
    from pointmamba.models.block import MambaBlock
    from pointmamba.models.mamba_block import MambaBlock as New

    assert MambaBlock is New


def test_ops_names_are_the_functions() -> None:
    import pointmamba.ops as ops

    assert callable(ops.selective_scan) and callable(ops.causal_conv1d) and callable(ops.sparse_conv)
    assert not isinstance(ops.selective_scan, type(ops))
