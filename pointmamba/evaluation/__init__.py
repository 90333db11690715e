"""Evaluation: prediction (whole-scan inference with its test-time switches, graph cut, tooth numbering),
metrics (segmentation, Teeth3DS teeth metrics), the confusion plot, renders, neighbour distances along curves."""
