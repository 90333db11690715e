"""The tools a user runs: train, test, predict, export_model, check_data, ablate, plot_distances. Installed as
console scripts (``pointmamba-train``, ``pointmamba-test``, ...; see ``setup.py``); each also runs as
``python -m pointmamba.cli.<name>``, and train, test and predict as ``python tools/<name>.py`` from a checkout.
Each module has ``main()`` (the tool) and ``cli()`` (``main`` with clear one-line errors). The studies that
measure the project's choices are in :mod:`pointmamba.research`."""
