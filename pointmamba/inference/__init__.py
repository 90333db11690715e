"""Prediction: load the networks, predict, refine (graph cut), number the teeth, confidence and review; the Segmenter API and its result."""
