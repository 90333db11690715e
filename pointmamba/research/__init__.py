"""Studies that measure the project's choices, run as ``python -m pointmamba.research.NAME``; their
results live in ``docs/results/``."""
