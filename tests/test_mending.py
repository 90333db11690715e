"""Mending a tooth split in two (``infer.mend_split``, issue 43 item 3): on real arches ending at their
first molar, that molar cut in two and its halves read by the network as two teeth (the issue's "36 + 37"),
the mend gives the whole tooth its own number, keeps every other number and flags the merge."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import class_to_fdi, fdi_to_class
from pointmamba.data.teeth3ds import instances_from_labels
from pointmamba.inference.confidence import scan_confidence
from pointmamba.inference.tooth_numbering import number_teeth

from support.real_arch import sample_arch, split_tooth


def _numbers(truth: np.ndarray, fdi: np.ndarray) -> dict[int, int]:
    """The number each true tooth carries: the most common label on its vertices."""
    return {int(t): int(np.bincount(fdi[truth == t]).argmax()) for t in np.unique(truth) if t > 0}


@pytest.mark.parametrize("name, molar", [("MSN021_lower", 46), ("MSN021_lower", 36), ("MSN022_upper", 16),
                                         ("MSN022_upper", 26)])
def test_a_first_molar_split_in_two_is_merged_back_under_its_own_number(name: str, molar: int) -> None:
    scan, aligned, labels, _ = sample_arch(name)
    truth = np.where(labels == molar + 1, 0, labels)  # the arch ends at its first molar on that side
    split = fdi_to_class(split_tooth(truth, aligned, molar), scan.jaw, 17)
    probs = np.full((len(split), 17), 0.1 / 16)
    probs[np.arange(len(split)), split] = 0.9  # the network read the halves as the molar and the one behind it
    kept, _ = number_teeth(split, probs, aligned, scan.faces, scan.jaw, 17)
    assert set(class_to_fdi(kept, scan.jaw, 17)[truth == molar]) == {molar, molar + 1}  # the failure
    mended, numbering = number_teeth(split, probs, aligned, scan.faces, scan.jaw, 17, mend_split=True)
    fdi = class_to_fdi(mended, scan.jaw, 17)
    assert (fdi[truth == molar] == molar).all()
    assert _numbers(truth, fdi) == _numbers(truth, truth)
    assert len(numbering.mended) == 1
    conf = scan_confidence(probs, mended, instances_from_labels(fdi), scan.jaw, aligned, numbering=numbering)
    assert dict(conf.findings)["mended"].startswith((f"two pieces numbered {molar} and {molar + 1} ",
                                                     f"two pieces numbered {molar + 1} and {molar} "))


def test_an_intact_arch_is_left_alone_by_the_mend() -> None:
    scan, aligned, labels, probs = sample_arch("MSN021_lower")
    classes = fdi_to_class(labels, scan.jaw, 17)
    before, _ = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17)
    after, numbering = number_teeth(classes, probs, aligned, scan.faces, scan.jaw, 17, mend_split=True)
    np.testing.assert_array_equal(after, before)
    assert numbering.mended == []
