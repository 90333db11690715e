"""Studies that measure the project's choices, each run as ``python -m pointmamba.research.<name>``:
calibrate_confidence, removal_check, fit_arch_priors, probe_distance, jaw_accuracy. Their results live in
``docs/results/``. (The user tools are in :mod:`pointmamba.cli`.)"""
