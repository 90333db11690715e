"""The command-line tools, installed as console scripts (``pointmamba-train``, ``pointmamba-test``, ...;
see ``setup.py``) and still runnable from a checkout as ``python tools/<name>.py``. Each module has
``main()`` (the tool) and ``cli()`` (``main`` with clear one-line errors), and runs with ``python -m``."""
