"""Network parts. ``build_model`` / ``count_parameters`` load lazily so ``pointmamba.models.config`` stays light."""


def __getattr__(name: str):  # noqa: ANN202 - PEP 562 lazy re-export
    if name in ("build_model", "count_parameters", "PointMambaSeg"):
        from . import network

        return getattr(network, name)
    raise AttributeError(f"module 'pointmamba.models' has no attribute {name!r}")
