"""Merging a tooth cut between two numbers (``infer.merge_cut_teeth``, issue 43 item 3), on real arches made
into the failure the squeezed check was built for (IOS096, shipped model): the network itself reading a
molar's halves as a premolar and a molar. The halves become one tooth with the molar's number, the other
teeth keep theirs, and the scan says what was merged; a sound arch is left alone."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import class_to_fdi, fdi_to_class
from pointmamba.data.mesh import vertex_areas
from pointmamba.inference.confidence import scan_confidence
from pointmamba.inference.tooth_numbering import number_teeth, numbered_instances

from support.real_arch import sample_arch
from support.real_arch import split_tooth


def _failure(labels: np.ndarray, aligned: np.ndarray, molar: int) -> np.ndarray:
    """The first premolar gone, the second numbered as the first, the molar's mesial half as the second
    premolar and its distal half as the molar (the teeth behind kept)."""
    cut = split_tooth(labels, aligned, molar)
    out = labels.copy()
    out[labels == molar - 2] = 0
    out[labels == molar - 1] = molar - 2
    out[cut == molar] = molar - 1
    out[cut == molar + 1] = molar
    return out


def _probs_of(labels: np.ndarray, jaw: str) -> np.ndarray:
    """The network's probabilities reading ``labels``: 0.9 on each vertex's label."""
    classes = fdi_to_class(labels, jaw, 17)
    probs = np.full((len(labels), 17), 0.1 / 16)
    probs[np.arange(len(labels)), classes] = 0.9
    return probs


@pytest.mark.parametrize("name, molar", [("MSN021_lower", 46), ("MSN021_lower", 36), ("MSN022_upper", 26)])
def test_a_molar_cut_between_two_numbers_is_merged_back_under_its_number(name: str, molar: int) -> None:
    scan, aligned, labels, _ = sample_arch(name)
    failed = _failure(labels, aligned, molar)
    probs = _probs_of(failed, scan.jaw)
    cut = fdi_to_class(failed, scan.jaw, 17)
    areas = vertex_areas(aligned, scan.faces)
    plain, _ = number_teeth(cut, probs, aligned, scan.faces, scan.jaw, 17, areas=areas)
    merged, numbering = number_teeth(cut, probs, aligned, scan.faces, scan.jaw, 17, areas=areas, merge_cut_teeth=True)
    before, after = class_to_fdi(plain, scan.jaw, 17), class_to_fdi(merged, scan.jaw, 17)
    whole = labels == molar
    assert (before[whole] == molar).mean() < 0.8  # numbered as the failure: two numbers on the molar
    assert (after[whole] == molar).mean() >= 0.95
    others = (labels > 0) & ~whole
    assert np.array_equal(after[others], before[others])
    assert numbering.merged and all(b == a + 1 for a, b in numbering.merged)
    instances, instance_probs = numbered_instances(numbering, merged, 17, scan.jaw)
    conf = scan_confidence(probs, merged, instances, scan.jaw, aligned, instance_probs, faces=scan.faces,
                           numbering=numbering)
    found = dict(conf.findings)
    assert "merged" in found and any(f"{x} + {y}" in found["merged"] for x, y in ((molar - 1, molar), (molar, molar - 1))), found


@pytest.mark.parametrize("name", ["MSN021_lower", "MSN022_upper"])
def test_a_sound_arch_is_not_merged(name: str) -> None:
    scan, aligned, labels, probs = sample_arch(name)
    cut = fdi_to_class(labels, scan.jaw, 17)
    areas = vertex_areas(aligned, scan.faces)
    plain, _ = number_teeth(cut, probs, aligned, scan.faces, scan.jaw, 17, areas=areas)
    merged, numbering = number_teeth(cut, probs, aligned, scan.faces, scan.jaw, 17, areas=areas, merge_cut_teeth=True)
    assert np.array_equal(plain, merged) and numbering.merged == []


def test_the_inference_switch_merges_through_the_pipeline() -> None:
    """``infer.merge_cut_teeth`` as tools/predict.py and tools/test.py pass it (refine_numbered, the jaw given)."""
    from pointmamba.inference.pipeline import refine_numbered

    scan, aligned, labels, _ = sample_arch("MSN021_lower")
    failed = _failure(labels, aligned, 46)
    probs = _probs_of(failed, scan.jaw)
    options = {"graph_cut": False}  # the argmax is the failure itself
    plain, _ = refine_numbered(probs, aligned, scan.faces, np.zeros_like(aligned), "lower", 17, options)
    merged, numbering = refine_numbered(probs, aligned, scan.faces, np.zeros_like(aligned), "lower", 17,
                                        {**options, "merge_cut_teeth": True})
    whole = labels == 46
    assert (class_to_fdi(plain, "lower", 17)[whole] == 46).mean() < 0.8
    assert (class_to_fdi(merged, "lower", 17)[whole] == 46).mean() >= 0.95 and numbering.merged
