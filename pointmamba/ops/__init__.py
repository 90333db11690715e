"""Backend-dispatching ops: each picks the CUDA library, torch or our numba kernels behind one function
(``backend.py`` decides, reports and takes overrides)."""
from .backend import BackendError, backends, report as backend_report  # noqa: F401
from .sparse_conv import SubMConv3d  # noqa: F401 - (not the function: it would shadow the submodule)
from .causal_conv1d import causal_conv1d, conv_backend  # noqa: F401 - torch only; CUDA libs load lazily
from .selective_scan import scan_backend, selective_scan  # noqa: F401 - numba loads on the first CPU scan
