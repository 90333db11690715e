"""The options of whole-scan inference (the config's ``infer`` section): their defaults and the dentition
values, beside the prediction code that reads them, as the model's defaults live beside the models. A leaf:
the config schema gathers these defaults, so this file imports nothing of the package."""
from __future__ import annotations

from typing import Any

DENTITIONS = ("auto", "permanent", "mixed")

INFER_DEFAULTS: dict[str, Any] = {
    # whole-scan inference (tools/test.py, tools/predict.py); each default measured on two splits of the
    # shared scans (docs/results/recipe_shared_scans/README.md): what helped on both is on
    "mirror_tta": True,  # also predict the mirrored scan (left/right classes swapped) and average the two
    # a model file holding several networks (inference/averaged_networks.py): average their probabilities;
    # false: its first network alone (half the network time with two)
    "average_networks": True,
    "tta_angles": [0.0],  # test-time rotations about the occlusal axis (degrees), averaged; [0.0]: none
    # number whole teeth jointly along the arch (inference/tooth_numbering.py: instances from the graph cut,
    # an exact DP with gaps allowed, order kept, each number once, width / missing-tooth / spacing priors);
    # false: the graph cut's labels as they are
    "instance_numbering": True,
    # nats per mm of an instance's width beyond 3 mm that calling it gingiva costs (false positives are
    # small fragments; inference/arch_priors.py): split A per-scan mean +0.016, split B neutral
    "numbering_fragment_cost": 0.5,
    # how many prior terms the network's mean probability over a tooth counts for in the instance numbering
    # (inference/arch_priors.py EVIDENCE_WEIGHT); lower lets the priors overrule a network sure of a wrong number
    "numbering_evidence_weight": 2.0,
    # degrees of freedom of the Student-t density of the spacing between two touching teeth (inference/
    # arch_priors.py): the lower, the cheaper a tooth-wide space read as two touching teeth. 10 (the training
    # scans' predicted spacing beyond 5 mm) by its pre-registered rule: held out the flattened removal check
    # 9.1 -> 7.3 % / 2.5 -> 2.1 % (splits A / B), split A's mean -0.001 (docs/results/review_flag); 3: as
    # first set by hand
    "numbering_touching_nu": 10.0,
    # the network's evidence for each number divided by (its class's share of the training points / the median
    # tooth class's) ** this before the numbering adds its own presence prior (inference/arch_priors.py
    # class_prior_scale): a rare class, third molars, is otherwise counted rare twice. 0.5 = 1 -
    # train.class_balance takes out what the recipe's network learned. By its pre-registered rule: held out the
    # flattened removal check 7.3 -> 5.5 % / 2.1 -> 2.1 % (splits A / B), no val scan changed
    # (docs/results/review_flag); 0: the network's probabilities as they are
    "numbering_class_prior": 0.5,
    "graph_cut": True,  # smooth labels on the mesh by alpha-expansion (inference/graph_cut.py)
    "graph_cut_smoothing": 3.0,  # weight of the cut cost against -log p (1 / 2 / 3 measured; 3 best on both)
    # on a mesh finer than the training scans (mean edge < 0.677 mm) the smoothing grows by
    # (0.677 / mean edge)^k, as much smoothing per mm as on them; k = 2 lifts split B at 4x / 16x density
    # 0.797 -> 0.826 / 0.763 -> 0.830 (docs/results/scan_density); 0: the same smoothing at every density
    "graph_cut_density_power": 2.0,
    # a mesh of 3+ vertices per 0.6 mm cell is cut on the cells first, then vertex by vertex near the
    # boundaries: 2x faster there, the same labels to 0.05 % (docs/results/scan_density); false: one cut
    "graph_cut_coarse_first": True,
    # alpha-expansion cycles of that vertex-by-vertex pass at most. 1 by its pre-registered rule: val scans
    # at 4x / 16x their vertices within 0.0005 of running to convergence (20: until a cycle changes
    # nothing, 2-4 cycles), refine of a 201k-vertex scan 1.3-1.5x faster (docs/results/predict_speed)
    "graph_cut_fine_cycles": 1,
    # an edge between two teeth costs this many times its weight, one between a tooth and the gingiva once:
    # 1 (Potts) hands a thin strip of gingiva between two teeth to one of them (one boundary instead of two);
    # 2 lets the network's evidence decide. 2 by its pre-registered rule: held out the per-scan mean 0.832 ->
    # 0.836 / 0.836 -> 0.844 (splits A / B), MSN's arches without the pattern 0.886 -> 0.892 / 0.886 -> 0.891,
    # flag, removal check and dense meshes no worse (docs/results/gum_between_teeth); 1: the Potts cut
    "graph_cut_tooth_pair_cost": 2,
    # how a side of canine, one premolar-sized tooth, then molars is numbered (inference/dentition.py):
    # permanent (premolar 5, first molar 6) | mixed (4, then primary second molar 5, first molar 6) | auto
    # (the likelier, the scan flagged with both readings). Arches without that side are numbered alike
    "dentition": "auto",
    # with the dentition given as mixed, an arch whose numbering shows a side of the pattern is numbered again
    # under a child's priors (position 5 a primary second molar, molar-wide; second molars mostly and third
    # molars never erupted: arch_priors.FITTED_MIXED), kept where it shows the pattern too. On by its
    # pre-registered rule: held out, split A's 3D-IOSSeg arches given their dentition 0.618 -> 0.677
    # (IOS004_upper 0.716 -> 0.952), split B's 0.871 -> 0.870, nothing under auto changed
    # (docs/results/review_flag). false: mixed changes the pattern's sides of the adult numbering only
    "child_priors": True,
    # surface the cut left as gingiva where the review would report a dropped tooth (a tooth's width of
    # tooth-like surface between two teeth, a number skipped) or one lost at a side's end becomes one more
    # instance, and the numbering decides what it is (inference/dropped_teeth.py; flagged "mended"). On by its
    # pre-registered rule: simulated drops restored 80 % / 90 % held out (splits A / B), no val scan changed
    # (docs/results/review_flag); false: the cut's teeth alone
    "mend_dropped": True,
    # a piece the cut made tooth that the numbering left as gingiva, where the review's unnumbered check reports
    # it, is numbered where that keeps every other tooth's number and costs at most this many nats (1000: no
    # bound in practice; flagged "mended"; inference/tooth_numbering.number_unnumbered). 0: off. On by its
    # pre-registered rule (candidate 3, session 69): held out, split A's removal check 6.4 -> 4.0 %, split B's
    # 2.1 % as it was, both means up, no flag lost (docs/results/review_flag/log.md)
    "mend_unnumbered": 1000.0,
    # ... and only with a number whose typical width (the priors') the piece reaches this share of: a narrower
    # piece is a fragment, or a tooth the scan shows in part, whose fate turns on the cut (0: any width; without
    # it split B's removal check rose 2.1 -> 7.4 %, candidates 1 and 2)
    "mend_unnumbered_width": 0.6667,
    # ... and only where the piece's area reaches this share of the number's median crown area
    # (inference/cut_teeth.CROWN_AREA_MM2): a sliver of gum behind the last molar is not a crown (0: any area). On
    # by its pre-registered rule (candidate 4, session 70): no val scan changed, a simulated drop more restored on
    # each split, in-sample MSN016_upper's phantom "18" gone
    "mend_unnumbered_area": 0.2,
    # ... and a piece touching a numbered neighbour takes only the number next to the neighbour's: no space is left
    # for a number between them (false: any free number). On by its pre-registered rule (candidate 5, session 70):
    # split A's removal check 4.0 -> 3.6 %, in-sample IOS035_upper's half second molar no longer numbered "18"
    "mend_unnumbered_touching": True,
    # two neighbouring teeth that the split or packed review check reports (one tooth cut between two numbers,
    # the teeth behind moved on one) are merged and the arch numbered again (inference/cut_teeth.py; flagged
    # "merged"). On by its pre-registered rule: held out it changed 4 val scans, all up (split A's mean
    # +0.006, B's +0.004), the removal check 10.3 -> 9.1 % / 2.5 -> 2.5 % (docs/results/review_flag); false:
    # the numbering's teeth as cut
    "merge_packed": True,
    # a pair is merged only where its area is at most this many times the larger of its numbers' typical crown
    # areas (two crowded whole crowns are not one tooth cut in two; inference/cut_teeth.py). 1.53, the 99th
    # percentile of single reference crowns, by its pre-registered rule: no held-out val scan changed, and
    # in-sample it kept MSN014_lower's crowded incisors apart (0.831 -> 0.907; docs/results/review_flag). 0: no limit
    "merge_area_limit": 1.53,
    # a model's base (a jaw exported standing on walls closed by one flat plate of at least 100 mm^2 and 5 % of
    # the scan's area; data/model_base.py): the plate and its walls are left out of the pose, the network and the
    # graph cut, their own vertices gingiva. On by its pre-registered rule: on 29 based shared scans the mean
    # 0.7503 -> 0.8722 (as they are 0.8724; 4 had come out upside down, no tooth found), none more than 0.05 below
    # itself; no plate on any of the 190 scans as they are; 3 ms on a 201k-vertex scan (docs/results/model_base);
    # false: the file as it is
    "model_base": True,
    # a mesh whose faces are wound into the jaw (the volume it encloses, each rim coned shut, negative:
    # data/face_winding.py) is segmented with every face reversed, a warning, "faces_reversed" in the JSON. On by
    # its pre-registered rule (session 67): none of the 190 meshes as they are reversed (lowest 0.059), each cue
    # within 0.001 of itself at 16x the vertices, none of 200 synthetic jaws reversed, the 29 probe scans reversed
    # and the same on a base with small holes all reversed back (29 wound inside out: 0.0466 -> 0.8724), 0.12 s at
    # 201k. The first cue, the signed bend, fell with density and misread the synthetic jaws, and was held off
    # (docs/results/face_winding); false: the file's winding as it is
    "orient_faces": True,
    # before the inside-out check, the faces of each connected part of the mesh are wound one way (those against
    # the part's larger area reversed: data/face_winding.inconsistent_faces), a warning and "faces_rewound" in the
    # JSON where any was. On by its pre-registered rule (session 68, docs/results/face_winding, pre-registration 4):
    # the 29 probe scans with half the arch, a 15 % ball or each face at random reversed 0.8724 as they are (before:
    # 0.3273 / 0.7697 / 0.0760), every scan within 0.0002 and flagged as it is; 3 of the 190 meshes as they are
    # have one face wound against its neighbours, their labels unchanged; 0.054 s at 201k where no edge disagrees,
    # 0.230 s where some do; false: the file's winding as it is
    "consistent_winding": True,
    # in a scan the review flags, every tooth's reported confidence is its number's posterior times this (the
    # posterior stays beside it; the flag is decided first): a whole arch counted one off has every posterior
    # high, and only the flag sees it (inference/confidence.py). 0.89 (no tooth of a flagged scan reads as
    # sure, >= 0.9) by its pre-registered rule: held out the tooth AUC 0.821 -> 0.950 / 0.942 -> 0.951
    # (splits A / B), no flag changed (docs/results/review_flag); 1.0: the posterior as it is
    "flagged_confidence_scale": 0.89,
}


def infer_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``infer`` section of ``cfg`` over its defaults (checkpoints older than it have none)."""
    return {**INFER_DEFAULTS, **(cfg.get("infer") or {})}


def check_dentition(value: object, where: str = "dentition") -> str:
    """``value`` if it is one of :data:`DENTITIONS`, else ValueError naming ``where``."""
    if value not in DENTITIONS:
        raise ValueError(f"{where}: unknown dentition {value!r}: expected one of {', '.join(DENTITIONS)}")
    return str(value)
