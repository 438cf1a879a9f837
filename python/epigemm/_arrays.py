"""The array libraries epigemm works with: where an array lives, how to allocate an output of the
same library, which CUDA stream is current, and where the device workspace comes from.

The extension reads PyTorch tensors and NumPy arrays itself (python/src/epigemm_module.cpp,
"reading arrays"); describe() here reads the others (CuPy, JAX and other DLPack arrays, NumPy
arrays of ml_dtypes' bfloat16). Every library is an adapter with:
  device_of(a, name) -> -1 for host memory, else the CUDA device index (name: the argument's, for
    a message)
  empty_like_rows(like, shape) -> a new contiguous array of like's library, device and dtype
  describe(a, name, output) -> (data, dtype, shape, strides in elements, device[, holder]), where
    holder, if given, must be kept until the call is done (it keeps the memory valid)
  stream(device) -> the library's current CUDA stream on that device, as an int
  workspace(device, stream) -> None (the extension's own workspace) or (data, bytes)
  grow_workspace(device, stream, bytes) -> (data, bytes)
"""

import sys

from . import _epigemm as _c
from ._errors import invalid

F32, F16, BF16 = 0, 1, 2  # epigemm_dtype_t


def _dtype_error(name, given):
    return invalid(f"{name} has dtype {given}; expected float32, float16 or bfloat16")


class _HostArrays:
    """Arrays in host memory: no stream, the extension's own host workspace."""

    @staticmethod
    def device_of(a, name="the first operand"):
        return -1

    @staticmethod
    def stream(device):
        return 0

    @staticmethod
    def workspace(device, stream):
        return None

    grow_workspace = None


class _NumpyArrays(_HostArrays):
    """NumPy arrays. bfloat16 through the ml_dtypes package when it is installed."""

    name = "numpy"
    fast = None  # the C++ path of linear_fprop, _dgrad and _wgrad (torch tensors only)

    def __init__(self):
        import numpy

        self.np = numpy
        dtypes = [numpy.dtype(numpy.float32), numpy.dtype(numpy.float16)]
        try:
            import ml_dtypes

            dtypes.append(numpy.dtype(ml_dtypes.bfloat16))
        except ImportError:
            pass
        self.by_dtype = {d: i for i, d in enumerate(dtypes)}

    def describe(self, a, name, output=False):
        # Only what the extension's buffer-protocol reader leaves: other dtypes, bfloat16.
        dtype = self.by_dtype.get(a.dtype)
        if dtype is None:
            raise _dtype_error(name, a.dtype)
        if output and not a.flags.writeable:
            raise invalid(f"{name} is a read-only array; expected a writable output")
        itemsize = a.itemsize
        if any(s % itemsize for s in a.strides):
            raise invalid(f"{name} has byte strides {a.strides}, not multiples of its "
                          f"{itemsize}-byte elements; expected element-aligned strides")
        data = a.__array_interface__["data"][0]
        return data, dtype, a.shape, tuple(s // itemsize for s in a.strides), -1

    def empty_like_rows(self, like, shape):
        return self.np.empty(shape, like.dtype)


class _TorchTensors:
    """PyTorch tensors on the CPU or a CUDA device. Device workspaces are torch tensors from the
    caching allocator, one per (device, stream), grown when a call needs more: stream-ordered,
    and allocated from the graph's pool while a CUDA graph is being captured."""

    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        self.workspaces = {}
        raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw_stream is None:
            def raw_stream(device):
                return torch.cuda.current_stream(device).cuda_stream
        self.stream = raw_stream
        _c.set_array_types(torch.Tensor, torch.float32, torch.float16, torch.bfloat16, None)
        # linear_fprop's path for plain CUDA tensors in C++, where the package has its PyTorch
        # operators (load_torch_operators).
        self.fast = load_torch_operators()[0]

    @staticmethod
    def device_of(a, name="the first operand"):
        return a.get_device() if a.is_cuda else -1

    @staticmethod
    def empty_like_rows(like, shape):
        return like.new_empty(shape)

    def describe(self, a, name, output=False):
        # The extension reads tensors itself once registered (__init__); this serves a tensor it
        # met before.
        dtype = {self.torch.float32: F32, self.torch.float16: F16, self.torch.bfloat16: BF16}.get(a.dtype)
        if dtype is None:
            raise _dtype_error(name, a.dtype)
        if not (a.is_cuda or a.is_cpu):
            raise invalid(f"{name} is on device {a.device}; expected a CPU or CUDA tensor")
        return a.data_ptr(), dtype, tuple(a.shape), tuple(a.stride()), self.device_of(a)

    def workspace(self, device, stream):
        if device < 0:
            return None
        held = self.workspaces.get((device, stream))
        return (0, 0) if held is None else held[1]

    def grow_workspace(self, device, stream, needed):
        # Rounded up to a MiB so that nearby sizes reuse the buffer.
        nbytes = (needed + (1 << 20) - 1) >> 20 << 20
        torch = self.torch
        if stream == self.stream(device):
            buffer = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
        else:
            # Allocated on the stream that uses it (stream= not the current one), so that the
            # caching allocator reuses the block only after that stream's work when it is freed.
            with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=f"cuda:{device}")):
                buffer = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
        self.workspaces[(device, stream)] = (buffer, (buffer.data_ptr(), nbytes))
        return buffer.data_ptr(), nbytes


class _CupyArrays:
    """CuPy arrays (CUDA device memory); the extension's own device workspace, one per stream."""

    name = "cupy"
    fast = None  # the C++ path of linear_fprop, _dgrad and _wgrad (torch tensors only)

    def __init__(self):
        import cupy
        import numpy

        self.cupy = cupy
        self.dtypes = {numpy.dtype(numpy.float32): F32, numpy.dtype(numpy.float16): F16}

    @staticmethod
    def device_of(a, name="the first operand"):
        return a.device.id

    def empty_like_rows(self, like, shape):
        with like.device:
            return self.cupy.empty(shape, like.dtype)

    def describe(self, a, name, output=False):
        dtype = self.dtypes.get(a.dtype)
        if dtype is None:
            raise _dtype_error(name, a.dtype)
        itemsize = a.itemsize
        return a.data.ptr, dtype, a.shape, tuple(s // itemsize for s in a.strides), a.device.id

    def stream(self, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.cuda.get_current_stream().ptr

    @staticmethod
    def workspace(device, stream):
        return None

    grow_workspace = None


# DLPack device types (dlpack.h): where the memory of a DLPack array lives.
_DLPACK_HOST_TYPES = (1, 3)  # kDLCPU, kDLCUDAHost (pinned host memory)
_DLPACK_CUDA_TYPES = (2, 13)  # kDLCUDA, kDLCUDAManaged


class _DlpackArrays(_HostArrays):
    """Any other array exporting DLPack (JAX, ...), read through the extension's DLPack import.
    Its outputs cannot be allocated here (JAX arrays are immutable): pass them with out=. The
    stream is the legacy default stream unless stream= says otherwise, and the workspace the
    extension's own, as for host arrays (_HostArrays' stream, workspace and grow_workspace)."""

    name = "dlpack"
    fast = None  # the C++ path of linear_fprop, _dgrad and _wgrad (torch tensors only)

    def device_of(self, a, name="the first operand"):
        return self.describe(a, name)[4]

    def describe(self, a, name, output=False):
        try:
            data, dtype, shape, strides, device_type, device_id, text, writable, held = _c.dlpack_describe(a, output)
        except TypeError:
            raise invalid(f"{name} is a {type(a).__module__}.{type(a).__name__}; expected an array "
                          "(NumPy, PyTorch, CuPy or any DLPack array)") from None
        if dtype < 0:
            raise _dtype_error(name, text)
        if not writable:
            raise invalid(f"{name} is a read-only array; expected a writable output")
        if device_type in _DLPACK_HOST_TYPES:
            device = -1
        elif device_type in _DLPACK_CUDA_TYPES:
            device = device_id
        else:
            raise invalid(f"{name} is on DLPack device type {device_type}; expected CPU or CUDA memory")
        return data, dtype, shape, strides, device, held

    @staticmethod
    def empty_like_rows(like, shape):
        raise invalid(f"epigemm allocates outputs as NumPy, PyTorch or CuPy arrays, not as "
                      f"{type(like).__module__}.{type(like).__name__}; expected the outputs passed with out=")


_DLPACK = _DlpackArrays()
_BY_TYPE = {}  # type -> adapter, filled on first sight of each type
_SHARED = {}


def adapter(a):
    """The adapter of an array's library (cached by type)."""
    found = _BY_TYPE.get(type(a))
    if found is not None:
        return found
    return _adapter_slow(a)


def _adapter_slow(a):
    # A library's arrays can only come from a library already imported.
    found = _DLPACK
    # (NumPy's scalars, numpy.float32(1.0), are NumPy's: the extension reads them as 0-d arrays.)
    for module, type_names, cls in (("numpy", ("ndarray", "generic"), _NumpyArrays), ("torch", ("Tensor",), _TorchTensors),
                                    ("cupy", ("ndarray",), _CupyArrays)):
        library = sys.modules.get(module)
        if library is not None and isinstance(a, tuple(getattr(library, name) for name in type_names)):
            if module not in _SHARED:
                _SHARED[module] = cls()
            found = _SHARED[module]
            break
    _BY_TYPE[type(a)] = found
    return found


_TORCH_OPERATORS = []  # [(module or None, why not)] once loaded


def load_torch_operators():
    """Loads the package's PyTorch operators in C++ (python/src/torch_ops.cpp, built against the
    installed torch) once: (module, "") with its Python entry points, or (None, why they are not
    used). EPIGEMM_TORCH_CPP_OPS=0 in the environment leaves them unloaded."""
    if not _TORCH_OPERATORS:
        _TORCH_OPERATORS.append(_load_torch_operators())
    return _TORCH_OPERATORS[0]


def _load_torch_operators():
    import importlib
    import os

    import torch

    if os.environ.get("EPIGEMM_TORCH_CPP_OPS", "1") == "0":
        return None, "EPIGEMM_TORCH_CPP_OPS=0"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_epigemm_torch_ops.so")
    if not os.path.exists(path):
        return None, "not built (the package was built without torch's headers: pip install --no-build-isolation)"
    try:
        torch.ops.load_library(path)
        # The same file is a Python module too (one copy: the dynamic loader returns the library
        # torch loaded).
        module = importlib.import_module(__package__ + "._epigemm_torch_ops")
    except (OSError, RuntimeError, ImportError) as error:  # built against another torch
        return None, f"{path} did not load: {error}"
    return module, ""


def torch_adapter():
    """The PyTorch adapter (registers torch.Tensor with the extension)."""
    import torch

    return adapter(torch.empty(0))


def describe(a, name, output):
    """The extension's reader for arrays it does not read itself."""
    return adapter(a).describe(a, name, output)


_c.set_array_types(None, None, None, None, describe)
