"""Evaluation: prediction (whole-scan inference with its test-time switches, tooth decoding, graph cut),
metrics (segmentation, Teeth3DS teeth metrics), the confusion plot, renders, neighbour distances along curves."""
