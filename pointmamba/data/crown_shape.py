"""A crown's shape against its number: an upper canine numbered as a first premolar, or the reverse.

Where a first premolar was extracted and its space closed, the canine stands next to the second premolar. Label
files then sometimes number the canine "4", counting back from the molars (or, where a canine is missing, the
first premolar "3"). Every other check passes such a file, and a model trained or scored on it learns or is
marked against the wrong number.

The upper canine and first premolar differ plainly in one measure: the crown's **bucco-lingual width** (across
the arch, in the occlusal plane). A canine has one cusp and a cingulum, a first premolar a buccal and a palatal
cusp. On the 187 shared references (``../shared/data``, both sources, every upper 3 and 4; 2026-11-28,
``docs/results/crown_shape/``), with the width between the 3rd and 97th percentiles of the crown's vertices:

- upper canines (185): median 6.99 mm, robust sd (IQR / 1.349) 0.65 mm;
- upper first premolars (184): median 9.17 mm, robust sd 0.47 mm.

A tooth is flagged where its width is at least e^5 (about 150) times likelier under the other number's normal
fit than under its own (:data:`LOG_RATIO`): a "4" narrower than about 7.6 mm, a "3" wider than about 9.0 mm.
The value was read off these references. It flags three of the 187: IOS078_upper (both "4"s, 6.3 and 6.4
mm; the same patient's lower jaw is numbered canine 3, premolar 5, as after a premolar extraction),
MSN023_upper (whose reference is one tooth off, known before) and IOS068_upper.
Lower canines and first premolars overlap (bucco-lingual 5.6-7.3 mm against 7.1-8.3 mm, 10th to 90th
percentiles), so the lower jaw is not checked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .arch import labelled_teeth

UPPER_BUCCO_LINGUAL_MM = {3: (6.99, 0.65), 4: (9.17, 0.47)}
"""(median, robust sd) of the bucco-lingual crown width, mm, of upper canines (3) and first premolars (4)."""

LOG_RATIO = 5.0
"""Flag a tooth whose width is at least exp(LOG_RATIO) times likelier under the other number's fit."""

CHECKED_JAW = "upper"
"""The one jaw checked (lower canines and first premolars overlap in width: see the module doc)."""

_OTHER = {3: 4, 4: 3}
_NAMES = {3: "canine", 4: "first premolar"}


@dataclass(frozen=True)
class CrownWidth:
    """A crown's extents in the occlusal plane, mm: along the arch (mesio-distal) and across it (bucco-lingual)."""

    fdi: int
    mesio_distal: float
    bucco_lingual: float


def crown_extents(aligned: np.ndarray, labels: np.ndarray) -> dict[int, CrownWidth]:
    """Each tooth's :class:`CrownWidth` from vertices in the canonical frame (:func:`~.pose.canonical_pose`: z
    occlusal), along and across the arch direction the numbering measures at it (:func:`~.arch.labelled_teeth`:
    from the centre of the tooth before it to that of the tooth after it); each extent is the 3rd to 97th
    percentile of the vertices' projections (not the numbering's 5th to 95th: the thresholds were read with this)."""
    teeth, _ = labelled_teeth(aligned, labels)
    out = {}
    for t, inst in teeth.items():
        across = np.array([-inst.tangent[1], inst.tangent[0]])
        xy = inst.points[:, :2]
        extent = [float(np.subtract(*np.percentile(xy @ d, [97, 3]))) for d in (inst.tangent, across)]
        out[t] = CrownWidth(t, *extent)
    return out


def _log_density(x: float, median: float, sd: float) -> float:
    return -0.5 * ((x - median) / sd) ** 2 - math.log(sd)


def number_shape_findings(aligned: np.ndarray, labels: np.ndarray, jaw: str) -> list[str]:
    """One line per upper canine or first premolar whose bucco-lingual width says it is the other
    (see the module doc); none for a lower jaw."""
    if jaw != CHECKED_JAW:
        return []
    findings = []
    for t, width in crown_extents(aligned, labels).items():
        kind = t % 10
        if kind not in _OTHER:
            continue
        own, other = UPPER_BUCCO_LINGUAL_MM[kind], UPPER_BUCCO_LINGUAL_MM[_OTHER[kind]]
        if _log_density(width.bucco_lingual, *other) - _log_density(width.bucco_lingual, *own) >= LOG_RATIO:
            canine, premolar = UPPER_BUCCO_LINGUAL_MM[3][0], UPPER_BUCCO_LINGUAL_MM[4][0]
            findings.append(f"tooth {t} is shaped as a {_NAMES[_OTHER[kind]]}, not a {_NAMES[kind]}: "
                            f"{width.bucco_lingual:.1f} mm bucco-lingually (upper canines {canine:.1f} mm, first "
                            f"premolars {premolar:.1f} mm): numbered one tooth off?")
    return findings
