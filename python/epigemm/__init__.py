"""epigemm: GEMMs of transformer linear layers fused with their epilogues (bias, GELU with the
pre-activation saved, the GELU gradient, bias gradients), on NumPy arrays, PyTorch tensors and
any DLPack array, on the CPU and on CUDA GPUs.

    Y = epigemm.linear_fprop(X, W, b)                                   # X W^T + b
    Y, pre = epigemm.linear_fprop(X, W, b, activation="gelu_tanh")      # and the pre-activation
    dX, db_prev = epigemm.linear_dgrad(dY, W, preact=pre_prev, activation="gelu_tanh", bias_grad=True)
    dW, db = epigemm.linear_wgrad(X, dY, bias_grad=True)
    D = epigemm.gemm(A, B, epilogue="bias", bias=b)                     # GEMM coordinates

epigemm.torch has Linear and MLP modules whose backward uses the fused epilogues. The meaning of
every call is docs/conventions.md; docs/python.md describes this package.
"""

from . import _epigemm
from ._errors import (BackendError, Error, InsufficientWorkspaceError, InternalError,
                      InvalidValueError, NotSupportedError, OutOfMemoryError)
from ._ops import (ACTIVATIONS, BACKENDS, Epilogue, backend_compiled, backend_usable, gemm,
                   last_backend, linear_dgrad, linear_fprop, linear_wgrad)

__version__ = "{}.{}.{}".format(*_epigemm.VERSION)
with_cuda = bool(_epigemm.WITH_CUDA)

__all__ = [
    "ACTIVATIONS", "BACKENDS", "BackendError", "Epilogue", "Error", "InsufficientWorkspaceError",
    "InternalError", "InvalidValueError", "NotSupportedError", "OutOfMemoryError",
    "backend_compiled", "backend_usable", "gemm", "last_backend", "linear_dgrad", "linear_fprop",
    "linear_wgrad", "with_cuda",
]
