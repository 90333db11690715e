"""How sure the model is of each tooth's number, and whether a person should review the scan.

Per tooth (one instance of the segmentation):

* its class posterior ``q`` over the tooth numbers of the scan's jaw: the caller's per-instance posterior
  where it has one (``instance_probs``: an instance-level numbering's), else the mean of its vertices'
  probabilities; either way restricted to the jaw's tooth classes and renormalized, so gingiva mass does
  not lower a tooth's confidence;
* ``confidence = q[assigned number]``, and the runner-up: the most probable other number, with ``q`` of it;
* its width along the arch (mm), measured in the canonical frame, against the typical width of its number;
* in a scan the review flags, ``confidence`` is ``q`` times ``flagged_scale`` (``infer.flagged_confidence_scale``;
  ``q`` stays as ``posterior``): a whole arch counted one position off has every ``q`` high, and only the
  scan's findings see it. The findings are decided from ``q``. A scan whose findings are all about how much of a
  tooth was found (:data:`EXTENT_FINDINGS`: ``narrow_end``, ``lost_end``) keeps its ``q``: no number moved.

Per scan: the lowest tooth confidence, and ``review`` with one reason per finding (:class:`ReviewRules`):

* a tooth's confidence below ``review_below`` ("tooth 35 (0.52; 34: 0.41)");
* a number carried by two teeth;
* a tooth much wider than its number's typical width (two teeth under one number: one looks missing) or
  much narrower (a fragment: an extra tooth); a side's last molar narrower than ``narrow_end`` of its typical
  width (part of it left as gingiva: the network's evidence fades at the back of the arch);
* a premolar as wide as a molar (numbers shifted by one along the arch, each molar called by the number in
  front of it, as where a premolar was extracted; or a child's primary molar);
* neighbours along the arch with room for a tooth between them (a missing tooth, or numbers shifted), or
  a number skipped between neighbours that touch (the skipped tooth is not missing: numbers shifted?);
* no tooth found, or fewer than ``few_teeth`` (an edentulous or nearly edentulous arch: teeth found on bare
  gingiva, or real ones missed, are the likely errors there);
* a side of the lone-premolar pattern read under ``auto`` dentition (both readings named; :mod:`.dentition`);
* a tooth split in two (across the arch: ``split``, along it: ``packed``), a tooth dropped between two teeth
  or at the arch's end, a tooth the cut found that the numbering left as gingiva (``unnumbered``), a mesh of
  several large parts (:mod:`.review_checks`); a tooth added back where one was dropped (``mended``,
  :mod:`.dropped_teeth`), two pieces of one tooth merged (``merged``, :mod:`.cut_teeth`);
* a jaw told from the teeth by a thin margin, or a named jaw the teeth contradict (:mod:`.jaw_from_teeth`);
* a mesh wound inside out and segmented with its faces reversed (``reversed``, ``infer.orient_faces``; at least
  3/4 of its area inside out where ``infer.consistent_winding`` wound part of it back): a mirror image of a jaw is
  wound so too, and comes out with each side's teeth numbered as the other side's.

A side read under a given dentition is not flagged for what that dentition explains (a molar-sized "5"
under ``mixed``, a skipped 4 under ``permanent``).

The thresholds were chosen on validation scans; ``python -m pointmamba.research.calibrate_confidence`` measures them (reliability
plot, how often a flagged and an unflagged scan were wrong): ``docs/results/confidence/``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

from ..data.fdi import LOWER_FDI, UPPER_FDI, check_jaw, class_to_fdi, fdi_to_class
from ..data.arch import TEXTBOOK_WIDTH_MM, crown_widths, side_position, skipped_between


@dataclass(frozen=True)
class ReviewRules:
    """When a scan is flagged for review (see the module doc); measured in ``docs/results/confidence/``."""

    # a tooth whose number has a lower confidence; 0.65 since the split-pair fix (0.5 before): teeth under
    # 0.65 were wrong more often than right on split A's val, and 0.65 caught every wrong scan there
    review_below: float = 0.65
    wide: float = 1.6  # a tooth wider than this times its number's typical width ...
    wide_mm: float = 5.0  # ... and by at least this much (room for a second tooth)
    narrow: float = 0.35  # a tooth narrower than this times its typical width (a fragment)
    # a side's last tooth, a molar, narrower than this times its typical width: part of it left as gingiva (None: off;
    # docs/results/review_flag/log.md, session 70)
    narrow_end: float | None = 0.65
    # a premolar at least this wide (mm, measured as :func:`scan_confidence` does) is molar-sized. Premolars
    # measured 6-8.6 mm on 56 val scans; the 9.9-10.5 mm "premolars" were molars numbered one position
    # forward (3 scans, none of them flagged otherwise) or primary molars (9.0-10 mm alike: docs/results/confidence)
    premolar_mm: float = 9.5
    room: float = 1.6  # neighbours' centroids further apart than this times their typical half-widths' sum
    touch: float = 1.25  # a number skipped between neighbours closer than this times that sum
    few_teeth: int = 6  # fewer teeth than this: a person checks (no val arch has under 11)
    # inference/review_checks.py; chosen before any val figure (docs/results/review_flag/README.md).
    # split: two touching neighbours each narrower than split_half x their number's typical width, together
    # at most split_sum x the wider one's (reference teeth: 1st percentile of width / typical 0.80)
    split_half: float = 0.7
    split_sum: float = 1.4
    split_gap_mm: float = 1.0  # "touching": their nearest vertices closer than this (about an edge of a decimated scan)
    # packed: neighbours with adjacent numbers whose centroids are closer than this x the mean of their typical
    # widths (reference pairs of the 187 shared scans: 0.1st percentile 0.749, median 1.11)
    packed: float = 0.75
    # dropped: a space of at least dropped_gap x the narrowest skipped tooth's typical width, across which the
    # network's tooth-like gingiva spans at least tooth_share x that width
    dropped_gap: float = 0.6
    tooth_share: float = 0.5
    end_share: float = 0.5  # lost_end: tooth-like gingiva behind a side's last tooth along this x the next tooth's width
    # lost_end and the mend of a lost tooth look behind the last tooth along its own direction, not by angle
    # around the arch frame's centre (review_checks.end_region_along; docs/results/review_flag/log.md)
    end_along_tangent: bool = True
    # unnumbered: a cut piece numbered gingiva at least this x the jaw's narrowest typical tooth width wide that the
    # network calls tooth (the dropped check's share of a tooth; None: off; docs/results/review_flag/log.md, session 64)
    unnumbered_width: float | None = 0.6
    second_part: float = 0.2  # parts: a second connected part of at least this share of the vertices (data/integrity.py)


@dataclass
class ToothConfidence:
    """One tooth: its number, how sure, the runner-up, its size."""

    fdi: int
    instance: int
    confidence: float
    runner_up: int
    runner_up_confidence: float
    vertices: int
    width_mm: float | None = None
    alternative: int | None = None  # its number under the other reading of the dentition (auto; None: the same)
    primary: bool = False  # a primary molar: 4 or 5 of a side of the pattern read as a mixed dentition
    # the number's posterior where ``confidence`` was lowered because the scan is flagged (None: not lowered)
    posterior: float | None = None

    @property
    def number_posterior(self) -> float:
        """The number's posterior, from which the review decides: ``confidence`` before a flag lowered it."""
        return self.confidence if self.posterior is None else self.posterior

    def describe(self) -> str:
        return f"tooth {self.fdi} ({self.number_posterior:.2f}; {self.runner_up}: {self.runner_up_confidence:.2f})"


TOOTH_FINDINGS = ("uncertain", "twice", "wide", "narrow", "narrow_end", "molar_sized", "room", "skipped", "none",
                  "few")
"""The kinds :func:`review_findings` makes from the teeth's confidences, widths and spacing."""
FINDINGS = TOOTH_FINDINGS + ("dentition", "split", "packed", "dropped", "lost_end", "unnumbered", "parts", "mended",
                             "merged", "jaw", "reversed")
"""Kinds of review finding, in the order of the module doc."""
EXTENT_FINDINGS = ("narrow_end", "lost_end")
"""Findings about how much of a tooth was found, not its number (a last molar found in part, a tooth lost behind the
last one: no other tooth's number moves): alone they leave the teeth's confidences."""


@dataclass
class ScanConfidence:
    """Every tooth's confidence, the scan's lowest, and the findings that call for review (none: no review):
    ``findings`` are ``(kind, text)`` pairs, kind one of :data:`FINDINGS`."""

    teeth: list[ToothConfidence]
    findings: list[tuple[str, str]] = field(default_factory=list)
    rules: ReviewRules = field(default_factory=ReviewRules)
    dentition: dict[str, Any] | None = None  # how the lone-premolar pattern was read (DentitionReading.to_json)
    jaw: dict[str, Any] | None = None  # where the jaw came from and what the teeth say (JawCall.to_json)
    flagged_scale: float = 1.0  # what every tooth's confidence was multiplied by because the scan is flagged

    @property
    def reasons(self) -> list[str]:
        """The findings as text, e.g. ``"tooth 35 (0.52; 34: 0.41)"``."""
        return [text for _, text in self.findings]

    @property
    def min_confidence(self) -> float | None:
        return min((t.confidence for t in self.teeth), default=None)

    @property
    def review(self) -> bool:
        return bool(self.findings)

    def tooth(self, fdi: int) -> ToothConfidence | None:
        return next((t for t in self.teeth if t.fdi == fdi), None)

    def review_line(self, name: str) -> str | None:
        """``"MSN023_lower: review tooth 35 (0.52; 34: 0.41)"``, or None when nothing needs review."""
        return f"{name}: review {'; '.join(self.reasons)}" if self.reasons else None

    def to_json(self) -> dict[str, Any]:
        """Plain data for the prediction's JSON (beside the Teeth3DS keys)."""
        m = self.min_confidence
        out = {"review": self.review, "findings": [{"kind": k, "text": t} for k, t in self.findings],
               "min_confidence": None if m is None else round(m, 4),
               "review_below": self.rules.review_below,
               "teeth": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(t).items()
                          if (k not in ("alternative", "posterior") or v is not None) and (k != "primary" or v)}
                         for t in self.teeth]}
        if self.flagged_scale != 1.0:
            out["flagged_confidence_scale"] = self.flagged_scale
        if self.dentition is not None:
            out["dentition"] = self.dentition
        if self.jaw is not None:
            out["jaw"] = self.jaw
        return out


def scan_confidence(probs: np.ndarray, classes: np.ndarray, instances: np.ndarray, jaw: str,
                    aligned: np.ndarray | None = None,
                    instance_probs: Mapping[int, np.ndarray] | None = None,
                    rules: ReviewRules = ReviewRules(), faces: np.ndarray | None = None,
                    dentition: Any = None, numbering: Any = None, jaw_call: Any = None,
                    flagged_scale: float = 1.0, faces_reversed: bool = False) -> ScanConfidence:
    """Per-tooth confidence and the scan's review reasons (see the module doc).

    ``probs`` (V, C) per-vertex class probabilities (C = 17 or 33); ``classes`` (V,) the final class of
    every vertex; ``instances`` (V,) 0 = gingiva, 1..k one per tooth (a tooth's number is its vertices'
    most common class); ``aligned`` (V, 3) the vertices in the canonical frame in mm (width and spacing
    checks; skipped without); ``instance_probs`` ``{instance id: (C,) posterior}`` replaces the mean of
    the vertices' probabilities for the instances it names; ``faces`` (F, 3) the mesh (the ``parts``
    check; skipped without); ``dentition`` the numbering's :class:`~.dentition.DentitionReading` (its
    finding, each tooth's ``alternative`` number, and what a given dentition explains); ``numbering`` the
    instance numbering (:class:`~.tooth_numbering.Numbering`): its dentition where ``dentition`` is None;
    ``jaw_call`` where the
    jaw came from and what the teeth say (:class:`~.jaw_from_teeth.JawCall`: its finding, and
    ``ScanConfidence.jaw``); ``flagged_scale`` in (0, 1]: a flagged scan's teeth's confidence is their
    posterior times it; ``faces_reversed``: the mesh was segmented with its faces reversed (``reversed``).
    """
    check_jaw(jaw)
    if not 0.0 < flagged_scale <= 1.0:
        raise ValueError(f"scan_confidence: flagged_scale must be in (0, 1], got {flagged_scale}")
    probs = np.asarray(probs, dtype=np.float64)
    classes = np.asarray(classes)
    instances = np.asarray(instances)
    num_classes = probs.shape[1]
    if classes.shape != (len(probs),) or instances.shape != (len(probs),):
        raise ValueError(f"scan_confidence: probs {probs.shape}, classes {classes.shape} and instances "
                         f"{instances.shape} must agree on the vertex count")
    jaw_fdi = np.array(UPPER_FDI if jaw == "upper" else LOWER_FDI)
    tooth_classes = fdi_to_class(jaw_fdi, jaw, num_classes)  # column of each of the jaw's numbers
    ids = [int(i) for i in np.unique(instances) if i > 0]
    members = [np.flatnonzero(instances == i) for i in ids]
    teeth: list[ToothConfidence] = []
    for inst, rows in zip(ids, members):
        cls = np.bincount(classes[rows], minlength=num_classes).argmax()
        row = instance_probs.get(inst) if instance_probs is not None else None
        q = np.asarray(row, dtype=np.float64) if row is not None else probs[rows].mean(0)
        q = q[tooth_classes]
        q = q / max(float(q.sum()), 1e-12)
        fdi = int(class_to_fdi([cls], jaw, num_classes)[0])
        if fdi == 0:  # an instance whose vertices are mostly gingiva: no number to be sure of
            continue
        own = int(np.flatnonzero(jaw_fdi == fdi)[0])
        other = q.copy()
        other[own] = -1.0
        second = int(other.argmax())
        teeth.append(ToothConfidence(fdi, inst, float(q[own]), int(jaw_fdi[second]), float(q[second]), len(rows)))
    if aligned is not None and teeth:
        by_inst = dict(zip(ids, members))
        for tooth, width in zip(teeth, crown_widths(np.asarray(aligned, dtype=np.float64),
                                               [by_inst[t.instance] for t in teeth])):
            tooth.width_mm = width
    teeth.sort(key=lambda t: side_position(t.fdi))
    if dentition is None and numbering is not None:
        dentition = getattr(numbering, "dentition", None)
    explained: set[int] = set()
    if dentition is not None and (dentition.used is not None or dentition.neither):
        if dentition.alternative is not None:
            other = class_to_fdi(dentition.alternative, jaw, num_classes)
            for t in teeth:
                values, counts = np.unique(other[instances == t.instance], return_counts=True)
                alt = int(values[counts.argmax()])
                t.alternative = alt if alt not in (0, t.fdi) else None
        used = {f for side in dentition.sides.values() for f in side.get(dentition.used, [])}
        for t in teeth:  # read as mixed, the pattern side's 4 and 5 are primary molars under their successors' numbers
            t.primary = dentition.used == "mixed" and t.fdi in used and t.fdi % 10 in (4, 5)
        if dentition.requested != "auto":
            explained = used
    from .review_checks import failure_findings, parts_finding, unnumbered_findings

    findings = review_findings(teeth, jaw, aligned, instances, rules, explained)
    if aligned is not None:
        findings += failure_findings(teeth, jaw, aligned, instances, probs, rules)
    findings += unnumbered_findings(numbering, probs, jaw, rules)
    findings += parts_finding(len(probs), faces, rules)
    mended = list(getattr(numbering, "mended", None) or [])
    if mended:
        from ..data.arch import fdi_of_index

        names = ", ".join(str(fdi_of_index(a, jaw)) for a in mended)
        findings.append(("mended", f"tooth {names} had been left as gingiva where the network saw a tooth, and was "
                                   "numbered from its evidence (infer.mend_dropped, infer.mend_unnumbered): check it"))
    merged = list(getattr(numbering, "merged", None) or [])
    if merged:
        from ..data.arch import fdi_of_index

        names = "; ".join(f"{fdi_of_index(a, jaw)} + {fdi_of_index(b, jaw)}" for a, b in merged)
        findings.append(("merged", f"teeth numbered {names} looked like one tooth cut in two and were merged, the "
                                   "arch numbered again (infer.merge_packed): check it"))
    text = dentition.finding() if dentition is not None else None
    if text:
        findings.append(("dentition", text))
    jaw_finding = jaw_call.finding() if jaw_call is not None else None
    if jaw_finding is not None:
        findings.append(jaw_finding)
    if faces_reversed:
        findings.append(("reversed", "the mesh's faces were wound inside out and were reversed to segment it "
                                     "(infer.orient_faces); if the file is a mirror image of the jaw, each side's "
                                     "teeth are numbered as the other side's: check the sides"))
    about_numbers = any(kind not in EXTENT_FINDINGS for kind, _ in findings)
    applied = flagged_scale if about_numbers and flagged_scale != 1.0 else 1.0
    if applied != 1.0:
        for t in teeth:
            t.posterior = t.confidence
            t.confidence = t.confidence * applied
    return ScanConfidence(teeth, findings, rules, None if dentition is None else dentition.to_json(),
                          None if jaw_call is None else jaw_call.to_json(), applied)


def review_findings(teeth: list[ToothConfidence], jaw: str, aligned: np.ndarray | None, instances: np.ndarray,
                    rules: ReviewRules, explained: set[int] = frozenset()) -> list[tuple[str, str]]:
    """``(kind, text)`` for every finding of the tooth confidence and the width and spacing checks (see the
    module doc); ``explained``: FDI numbers of a side read under a given dentition, whose molar-sized
    premolar or skipped premolar that dentition explains."""
    if not teeth:
        return [("none", "no tooth found")]
    reasons = [("uncertain", t.describe()) for t in teeth if t.number_posterior < rules.review_below]
    if len(teeth) < rules.few_teeth:
        reasons.append(("few", f"only {len(teeth)} teeth found: teeth on bare gingiva, or teeth missed?"))
    numbers = [t.fdi for t in teeth]
    reasons += [("twice", f"tooth {f} twice") for f in sorted({f for f in numbers if numbers.count(f) > 1})]
    if aligned is None:
        return reasons
    typical = TEXTBOOK_WIDTH_MM[jaw]
    for t in teeth:
        w, expect = t.width_mm, typical[t.fdi % 10 - 1]
        if w is not None and w > rules.wide * expect and w - expect > rules.wide_mm:
            reasons.append(("wide", f"tooth {t.fdi} {w:.1f} mm wide (typical {expect:.1f}): two teeth?"))
        elif w is not None and t.fdi % 10 in (4, 5) and w >= rules.premolar_mm and t.fdi not in explained:
            reasons.append(("molar_sized", f"tooth {t.fdi} {w:.1f} mm wide, a molar's width (typical {expect:.1f}): "
                                           "numbers shifted, or a primary molar?"))
        elif w is not None and w < rules.narrow * expect:
            reasons.append(("narrow", f"tooth {t.fdi} {w:.1f} mm wide (typical {expect:.1f}): a fragment?"))
    if rules.narrow_end is not None:
        for side in sorted({t.fdi // 10 for t in teeth}):
            last = max((t for t in teeth if t.fdi // 10 == side), key=lambda t: t.fdi % 10)
            w, expect = last.width_mm, typical[last.fdi % 10 - 1]
            if last.fdi % 10 >= 6 and w is not None and rules.narrow * expect <= w < rules.narrow_end * expect:
                reasons.append(("narrow_end", f"tooth {last.fdi} {w:.1f} mm wide, {w / expect:.2f} of a typical "
                                              f"{last.fdi}: part of it left as gingiva?"))
    aligned = np.asarray(aligned, dtype=np.float64)
    centroid = {t.instance: aligned[instances == t.instance, :2].mean(0) for t in teeth}
    for a, b in zip(teeth, teeth[1:]):
        if a.fdi == b.fdi:
            continue
        gap = float(np.linalg.norm(centroid[a.instance] - centroid[b.instance]))
        adjacent = (typical[a.fdi % 10 - 1] + typical[b.fdi % 10 - 1]) / 2
        skipped = skipped_between(a.fdi, b.fdi)
        if not skipped and gap > rules.room * adjacent:
            reasons.append(("room", f"room for a tooth between {a.fdi} and {b.fdi} ({gap:.1f} mm apart, "
                                    f"typical {adjacent:.1f})"))
        elif skipped and gap < rules.touch * adjacent and not {a.fdi, b.fdi} <= explained:
            missing = ", ".join(map(str, skipped))
            reasons.append(("skipped", f"{missing} missing but {a.fdi} and {b.fdi} touch ({gap:.1f} mm apart): "
                                       "numbers shifted?"))
    return reasons


def tooth_truth(instances: np.ndarray, reference: np.ndarray) -> dict[int, int]:
    """The reference's majority FDI label on each predicted instance's vertices ({instance: FDI}): a
    tooth is wrong when it differs from the predicted number (docs/results/confidence/)."""
    instances = np.asarray(instances)
    reference = np.asarray(reference)
    out = {}
    for inst in np.unique(instances):
        if inst <= 0:
            continue
        values, counts = np.unique(reference[instances == inst], return_counts=True)
        out[int(inst)] = int(values[counts.argmax()])
    return out
