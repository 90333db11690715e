"""Backend-dispatching ops: each picks the CUDA library, torch or our numba kernels behind one function
(``backend.py`` decides, reports and takes overrides).

Modules are named apart from the functions they hold, so ``pointmamba.ops.selective_scan`` is always the
function: ``scan.py`` (``selective_scan``), ``conv1d.py`` (``causal_conv1d``), ``submconv.py``
(``sparse_conv``, ``SubMConv3d``); each has a ``*_backend(tensor)`` reporter.
"""
from .backend import BackendError, backends, report as backend_report  # noqa: F401
from .conv1d import causal_conv1d, conv1d_backend  # noqa: F401 - torch only; CUDA libs load lazily
from .scan import scan_backend, selective_scan  # noqa: F401 - numba loads on the first CPU scan
from .submconv import SubMConv3d, sparse_conv, sparse_conv_backend  # noqa: F401
