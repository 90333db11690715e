"""A lower side numbered 1, 2, 4, 5 (its canine counted as the extracted first premolar) is warned about
(pointmamba.data.lower_canine), on a real sample arch relabelled as such label files are, and through
pointmamba-check-data; the arch as labelled, the identity numbering of the same extraction and an upper jaw are not."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pointmamba.data.lower_canine import missing_canine_findings

from support.real_arch import sample_arch, sample_with_labels
from support.tools import run_tool


def _extracted(labels: np.ndarray, quadrant: int, counted: bool) -> np.ndarray:
    """``quadrant``'s first premolar gone to gingiva; ``counted``: its canine then numbered 4, as counting back
    from the molars does (else 3, by identity)."""
    out = labels.copy()
    out[labels == 10 * quadrant + 4] = 0
    if counted:
        out[labels == 10 * quadrant + 3] = 10 * quadrant + 4
    return out


def test_a_lower_canine_counted_as_the_extracted_premolar_is_warned_about() -> None:
    _, _, labels, _ = sample_arch("MSN021_lower")
    assert {32, 33, 34, 42, 43, 44} <= set(np.unique(labels).tolist())
    assert missing_canine_findings(labels, "lower") == []
    assert missing_canine_findings(_extracted(labels, 3, counted=False), "lower") == []  # 1, 2, 3, 5: the convention
    (finding,) = missing_canine_findings(_extracted(labels, 3, counted=True), "lower")
    assert finding.startswith("no canine between 32 and 34:") and "is the canine numbered 34" in finding
    both = _extracted(_extracted(labels, 3, counted=True), 4, counted=True)
    assert [f.split(":")[0] for f in missing_canine_findings(both, "lower")] == [
        "no canine between 32 and 34", "no canine between 42 and 44"]
    # an upper jaw's canine erupts last: a child's arch shows 2 and 4 without 3, so it is not checked
    assert missing_canine_findings(np.array([0, 11, 12, 14, 15, 16]), "upper") == []


def test_check_data_warns_about_such_a_file(tmp_path: Path) -> None:
    _, _, labels, _ = sample_arch("MSN021_lower")
    code, out, _ = run_tool("check_data", sample_with_labels(tmp_path, "MSN021_lower",
                                                             _extracted(labels, 4, counted=True)))
    assert code == 0 and "1 scans: 0 ok, 1 with warnings, 0 failed" in out
    assert "| warn | no canine between 42 and 44" in out
