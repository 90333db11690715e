"""Evaluation: scoring predictions against reference labels.

- ``metrics`` (confusion matrix: accuracy, IoU, Dice) and ``teeth_metrics`` (the 3DTeethSeg'22 TSA, TLA, TIR);
- ``evaluate``: the validation pass over a loader during training;
- ``split_test``: the test loop, a checkpoint scored on a split scan by scan (:func:`~.split_test.score_split`,
  what ``pointmamba-test`` writes);
- ``scan_summary``: per-scan columns and the per-group summary (source, jaw, few teeth, lone premolar, ...);
- ``confusion_plot``: the confusion-matrix picture;
- ``removal_check``: how many teeth change number when one is removed;
- ``curve_distances``: distances between consecutive points along the serialization curves;
- ``infer_switches``: every inference switch measured on its own.

Prediction itself lives in :mod:`pointmamba.inference`."""
