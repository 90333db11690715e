"""Segmentation's small API: a one-line repr, and to_trimesh() where trimesh is installed."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support.tiny import untrained_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):
    from pointmamba import Segmenter
    from pointmamba.data import synthetic_jaw

    segmenter = Segmenter(untrained_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pth"), device="cpu",
                          infer={"graph_cut": False, "mirror_tta": False})
    scan = synthetic_jaw(3, "upper", 3000)
    return segmenter((scan.vertices, scan.faces), jaw="upper", name="patient7_upper")


def test_repr_is_one_short_line(result) -> None:
    text = repr(result)
    assert text.startswith("Segmentation('patient7_upper', jaw=upper, ") and "\n" not in text
    assert f"{len(result.labels)} vertices" in text and f"teeth {result.teeth}" in text
    assert len(text) < 200  # the dataclass repr printed every array: about 4,500 characters


def test_to_trimesh_keeps_the_scan_and_its_labels(result) -> None:
    trimesh = pytest.importorskip("trimesh")
    mesh = result.to_trimesh()
    assert isinstance(mesh, trimesh.Trimesh)
    assert np.array_equal(mesh.vertices, result.vertices) and np.array_equal(mesh.faces, result.faces)
    assert np.array_equal(mesh.vertex_attributes["label"], result.labels)
    assert np.array_equal(mesh.vertex_attributes["instance"], result.instances)
    from pointmamba.data import class_colors

    assert np.array_equal(mesh.visual.vertex_colors[:, :3], class_colors(17)[result.classes])
    assert mesh.metadata["jaw"] == "upper" and mesh.metadata["teeth"] == result.teeth


def test_to_trimesh_without_trimesh_says_what_to_install(result, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trimesh", None)  # an import of it fails, as where it is not installed
    with pytest.raises(ImportError, match="pip install trimesh"):
        result.to_trimesh()
