"""The review flag's failure-mode checks (issue 43), each on a real arch's reference labels made into its
failure: an incisor split in two with the halves numbered as neighbours (across the arch: ``split``; along it:
``packed``), a premolar between two teeth and
a molar at the arch's end left as gingiva where the network saw a tooth, two jaws in one file; and the
unmodified references not flagged at all."""
from __future__ import annotations

import numpy as np
import pytest

from pointmamba.data import fdi_to_class
from pointmamba.data.teeth3ds import instances_from_labels
from pointmamba.inference.confidence import scan_confidence

from support.real_arch import away_from
from support.real_arch import sample_arch as _arch
from support.real_arch import split_tooth as _split

ARCHES = ["MSN021_lower", "MSN022_upper"]


def _findings(scan, aligned, labels, probs, faces=None) -> dict[str, str]:
    """{kind: text} of the review of a segmentation whose labels are ``labels`` (FDI)."""
    conf = scan_confidence(probs, fdi_to_class(labels, scan.jaw, 17), instances_from_labels(labels), scan.jaw,
                           aligned, faces=scan.faces if faces is None else faces)
    return dict(conf.findings)


@pytest.mark.parametrize("name", ARCHES)
def test_an_unmodified_reference_is_not_flagged(name: str) -> None:
    scan, aligned, labels, probs = _arch(name)
    assert _findings(scan, aligned, labels, probs) == {}


@pytest.mark.parametrize("name, tooth", [("MSN021_lower", 31), ("MSN022_upper", 11), ("MSN021_lower", 46)])
def test_a_tooth_split_in_two_and_numbered_as_neighbours_is_flagged(name: str, tooth: int) -> None:
    scan, aligned, labels, probs = _arch(name)
    found = _findings(scan, aligned, _split(labels, aligned, tooth), probs)
    assert "split" in found, found
    assert found["split"].startswith((f"teeth {tooth} and {tooth + 1} ", f"teeth {tooth + 1} and {tooth} ")), found
    assert "packed" not in found, found  # a pair the split check names is left to it


@pytest.mark.parametrize("name, tooth", [("MSN021_lower", 36), ("MSN021_lower", 46), ("MSN022_upper", 16),
                                         ("MSN022_upper", 11)])
def test_a_tooth_cut_lengthwise_into_two_numbers_is_flagged_packed(name: str, tooth: int) -> None:
    # both pieces nearly the tooth's full width, so the widths do not show the cut; their centres do
    scan, aligned, labels, probs = _arch(name)
    found = _findings(scan, aligned, _split(labels, aligned, tooth, lengthwise=True), probs)
    assert "split" not in found, found
    assert "packed" in found, found
    assert found["packed"].startswith((f"teeth {tooth} and {tooth + 1} ", f"teeth {tooth + 1} and {tooth} ")), found


@pytest.mark.parametrize("name, tooth, kind, says", [
    # a premolar between two teeth, a molar at the arch's end
    ("MSN021_lower", 35, "dropped", "(35 missing)"), ("MSN021_lower", 44, "dropped", "(44 missing)"),
    ("MSN022_upper", 14, "dropped", "(14 missing)"), ("MSN022_upper", 25, "dropped", "(25 missing)"),
    ("MSN021_lower", 37, "lost_end", "behind 36"), ("MSN021_lower", 47, "lost_end", "behind 46"),
    ("MSN022_upper", 27, "lost_end", "behind 26")])
def test_a_tooth_left_as_gingiva_where_the_network_saw_it_is_flagged(name: str, tooth: int, kind: str, says: str) -> None:
    scan, aligned, labels, probs = _arch(name)
    found = _findings(scan, aligned, np.where(labels == tooth, 0, labels), probs)
    assert kind in found and says in found[kind], found


def test_an_open_space_where_the_network_sees_no_tooth_is_not_a_dropped_tooth() -> None:
    scan, aligned, labels, probs = _arch("MSN021_lower")
    gone = labels == 35
    probs[gone] = 0.1 / 16
    probs[gone, 0] = 0.9  # the tooth is not there: the network sees gingiva in the space
    assert "dropped" not in _findings(scan, aligned, np.where(gone, 0, labels), probs)


def test_two_jaws_in_one_file_are_flagged() -> None:
    scan, aligned, labels, probs = _arch("MSN021_lower")
    other, other_aligned, other_labels, _ = _arch("MSN022_upper")
    # the upper jaw beside the lower one in the same mesh: the checks see the lower jaw's teeth, the mesh two parts
    faces = np.concatenate([scan.faces, other.faces + len(scan.vertices)])
    n = len(scan.vertices) + len(other.vertices)
    big_probs = np.zeros((n, 17))
    big_probs[:len(probs)] = probs
    big_probs[len(probs):, 0] = 1.0
    stacked = np.concatenate([aligned, other_aligned + [0.0, 0.0, 30.0]])
    both = np.concatenate([labels, np.zeros(len(other_labels), dtype=np.int64)])
    found = _findings(scan, stacked, both, big_probs, faces=faces)
    assert "parts" in found and "2 large separate parts" in found["parts"], found
    assert "parts" not in _findings(scan, aligned, labels, probs)


def _line_tooth(start: float, stop: float, direction: np.ndarray, rng: np.random.Generator, n: int = 200) -> np.ndarray:
    """(n, 3) points of a tooth from ``start`` to ``stop`` mm along ``direction`` from the frame's centre
    (0, 0), 8 mm wide across it."""
    across = np.array([-direction[1], direction[0]])
    t = rng.uniform(start, stop, n)
    s = rng.uniform(-4, 4, n)
    xy = t[:, None] * direction + s[:, None] * across
    return np.c_[xy, np.zeros(n)]


def test_a_molar_behind_the_last_one_further_out_is_found_along_its_direction() -> None:
    """At the back of the arch the arch runs away from the frame's centre: a third molar behind the second
    lies further out at about its angles. By angle and radius the check does not see it; along the second
    molar's own direction it does, and a molar beside it across the arch or in front of its edge is not it."""
    from pointmamba.data.arch import ArchFrame, Instance
    from pointmamba.inference.confidence import ReviewRules
    from pointmamba.inference.review_checks import end_region, end_region_along, lost_behind

    rng = np.random.default_rng(0)
    d = np.array([0.98, 0.2]) / np.linalg.norm([0.98, 0.2])  # +x side (angles above the incisors'), nearly radial
    last_pts = _line_tooth(30.0, 40.0, d, rng)
    behind = _line_tooth(40.5, 49.5, d, rng)  # a 9 mm molar behind it
    beside = _line_tooth(30.0, 40.0, d, rng) + np.r_[12 * np.array([-d[1], d[0]]), 0.0]  # across the arch
    xyz = np.concatenate([last_pts, behind, beside])
    last = Instance(np.arange(200), last_pts, 0.0, 0, d.copy(), 10.0)
    tooth_like = np.r_[np.zeros(200, bool), np.ones(400, bool)]
    theta, radius = ArchFrame(np.zeros(2)).polar(xyz[:, :2])
    by_angle = end_region(last, 1.0, 9.0, theta, radius, tooth_like)
    along, _ = end_region_along(last, 1.0, 9.0, xyz[:, :2], tooth_like)
    assert by_angle[200:400].mean() < 0.2  # the molar behind: mostly missed by angle
    assert along[200:400].mean() > 0.95 and not along[400:].any() and not along[:200].any()
    assert lost_behind(last, 1.0, 9.0, theta, radius, xyz[:, :2], tooth_like, ReviewRules(end_along_tangent=False)) is None
    hit = lost_behind(last, 1.0, 9.0, theta, radius, xyz[:, :2], tooth_like, ReviewRules())
    assert hit is not None and 7.0 < hit[0] < 9.5  # its extent along the direction: about its 9 mm
    # the other side of the arch: the same tooth seen from its mesial end (side -1) has nothing behind it
    assert not end_region_along(last, -1.0, 9.0, xyz[:, :2], tooth_like)[0][200:400].any()


def _numbered_review(scan, aligned, cut_fdi, probs, rules=None):
    """(findings {kind: text}, FDI labels) of ``cut_fdi`` numbered as the pipeline numbers a cut, and reviewed."""
    from pointmamba.data import class_to_fdi
    from pointmamba.data.mesh import vertex_areas
    from pointmamba.inference.confidence import ReviewRules
    from pointmamba.inference.tooth_numbering import number_teeth, numbered_instances

    out, numbering = number_teeth(fdi_to_class(cut_fdi, scan.jaw, 17), probs, aligned, scan.faces, scan.jaw, 17,
                                  areas=vertex_areas(aligned, scan.faces))
    instances, instance_probs = numbered_instances(numbering, out, 17, scan.jaw)
    conf = scan_confidence(probs, out, instances, scan.jaw, aligned, instance_probs, faces=scan.faces,
                           numbering=numbering, rules=rules or ReviewRules())
    return dict(conf.findings), class_to_fdi(out, scan.jaw, 17)


@pytest.mark.parametrize("name, gone, behind", [("MSN021_lower", 36, 37), ("MSN021_lower", 46, 47),
                                                ("MSN022_upper", 26, 27), ("MSN022_upper", 16, 17)])
def test_a_molar_the_cut_found_but_the_numbering_left_as_gingiva_is_flagged(name: str, gone: int, behind: int) -> None:
    """A first molar missing, its space open: the network reads the second molar behind the space as the
    missing first molar (it counts), so neither number fits it and the numbering calls it gingiva. The cut
    found it; the flag must say a tooth was lost. A piece the network calls gingiva is not reported."""
    from pointmamba.inference.confidence import ReviewRules

    scan, aligned, labels, probs = _arch(name)
    space, molar = labels == gone, labels == behind
    probs[space] = 0.1 / 16
    probs[space, 0] = 0.9  # the space: gingiva
    cls = fdi_to_class(np.array([gone]), scan.jaw, 17)[0]
    probs[molar] = 0.1 / 15
    probs[molar, cls], probs[molar, 0] = 0.6, 0.3  # the molar read as the tooth in front of the space
    cut = np.where(space, 0, np.where(molar, gone, labels))
    found, fdi = _numbered_review(scan, aligned, cut, probs)
    assert (fdi[molar] == 0).mean() > 0.95, np.unique(fdi[molar], return_counts=True)  # the failure is made
    assert "unnumbered" in found and "numbered as gingiva" in found["unnumbered"], found
    assert f" wide behind {gone - 1} that" in found["unnumbered"], found  # where: the tooth in front of the space
    assert "unnumbered" not in _numbered_review(scan, aligned, cut, probs, ReviewRules(unnumbered_width=None))[0]
    probs[molar, cls], probs[molar, 0] = 0.3, 0.6  # the network calls the piece gingiva: no tooth lost
    found, fdi = _numbered_review(scan, aligned, cut, probs)
    assert (fdi[molar] == 0).all() and "unnumbered" not in found, found


@pytest.mark.parametrize("name", ARCHES)
def test_a_reference_numbered_as_the_pipeline_numbers_it_has_nothing_unnumbered(name: str) -> None:
    scan, aligned, labels, probs = _arch(name)
    found, fdi = _numbered_review(scan, aligned, labels, probs)
    assert (fdi == labels).mean() > 0.99 and found == {}, found


def test_a_tooth_between_two_numbered_teeth_numbered_as_gingiva_is_named_by_them() -> None:
    # a premolar whose evidence names a tooth that cannot sit there (a molar of the other side): gingiva
    scan, aligned, labels, probs = _arch("MSN021_lower")
    tooth = labels == 35
    probs[tooth] = 0.1 / 15
    probs[tooth, fdi_to_class(np.array([46]), scan.jaw, 17)[0]], probs[tooth, 0] = 0.6, 0.3
    found, fdi = _numbered_review(scan, aligned, labels, probs)
    assert (fdi[tooth] == 0).mean() > 0.95, np.unique(fdi[tooth], return_counts=True)
    assert "unnumbered" in found and " between 36 and 34 " in found["unnumbered"], found


@pytest.mark.parametrize("name, front, last", [("MSN021_lower", 36, 37), ("MSN021_lower", 46, 47)])
def test_a_last_molar_left_half_as_gingiva_is_flagged_and_a_whole_one_is_not(name: str, front: int, last: int) -> None:
    # IOS013_lower (split A val, 0.901, unflagged before): the distal 44 % of its 47 left as gingiva (0.52 of its
    # typical width left), where the network's tooth probability is about 0.5 (ReviewRules.narrow_end)
    from pointmamba.inference.confidence import ReviewRules

    scan, aligned, labels, probs = _arch(name)
    molar = labels == last
    proj, _ = away_from(aligned, molar, labels == front)
    distal = molar & (proj > np.percentile(proj[molar], 40))  # the distal 60 %: about 0.6 of its width left
    mine = fdi_to_class(np.array([last]), scan.jaw, 17)[0]
    probs[distal] = 0.0
    probs[distal, 0], probs[distal, mine] = 0.55, 0.45  # the network unsure there, as on IOS013_lower
    cut = np.where(distal, 0, labels)

    def review(labels: np.ndarray, rules: ReviewRules = ReviewRules()):
        return scan_confidence(probs, fdi_to_class(labels, scan.jaw, 17), instances_from_labels(labels), scan.jaw,
                               aligned, faces=scan.faces, rules=rules, flagged_scale=0.89)

    conf = review(cut)
    found = dict(conf.findings)
    assert list(found) == ["narrow_end"] and found["narrow_end"].startswith(f"tooth {last} "), found
    # about how much of the tooth was found, not its number: the numbers keep their confidence
    assert conf.review and all(t.posterior is None for t in conf.teeth)
    # a sixth of it gone: still a molar's width; and the half molar with the check off
    sixth = molar & (proj > np.percentile(proj[molar], 84))
    assert "narrow_end" not in dict(review(np.where(sixth, 0, labels)).findings)
    assert dict(review(cut, ReviewRules(narrow_end=None)).findings) == {}
    # with a finding about the numbers beside it, the scan is scaled as before
    both = review(np.where(cut == front, 0, cut))
    assert "narrow_end" not in dict(both.findings) or len(both.findings) > 1
    assert all(t.posterior is not None for t in both.teeth)


def test_a_tooth_lost_at_the_end_leaves_the_numbers_confidence_and_one_lost_between_teeth_lowers_it() -> None:
    # lost_end moves no other tooth's number (EXTENT_FINDINGS); a tooth dropped between two can mean numbers shifted
    scan, aligned, labels, probs = _arch("MSN021_lower")

    def review(gone: int):
        cut = np.where(labels == gone, 0, labels)
        return scan_confidence(probs, fdi_to_class(cut, scan.jaw, 17), instances_from_labels(cut), scan.jaw, aligned,
                               faces=scan.faces, flagged_scale=0.89)

    end, between = review(37), review(35)
    assert [kind for kind, _ in end.findings] == ["lost_end"] and end.review
    assert end.flagged_scale == 1.0 and all(t.posterior is None for t in end.teeth)
    assert "dropped" in dict(between.findings)
    assert between.flagged_scale == 0.89 and all(t.posterior is not None for t in between.teeth)
