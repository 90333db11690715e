"""Backend-dispatching ops: each picks the CUDA library or our CPU implementation behind one function."""
from .sparse_conv import SubMConv3d, sparse_conv  # noqa: F401 - torch only, cheap to import
