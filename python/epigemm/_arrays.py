"""How epigemm reads an array of NumPy, PyTorch, CuPy or any DLPack library: its address, dtype,
shape, strides and device, as plain integers for the extension (no DLPack capsule per call for
NumPy and PyTorch: reading a few attributes is several times cheaper), and how it allocates an
output of the same library on the same device.

Every library is an adapter with:
  describe(a, name) -> (data, dtype, shape, strides in elements, device)   device -1: host memory
  empty(like, shape, dtype) -> a new array of like's library and device
  data_ptr(a) -> the address of an array this adapter allocated
  stream(device) -> the library's current CUDA stream on that device, as an int
  workspace(device, stream) -> None (the extension's own workspace) or (data, bytes)
  grow_workspace(device, stream, bytes) -> (data, bytes)
"""

import sys

from . import _epigemm as _c
from ._errors import invalid

F32, F16, BF16 = 0, 1, 2  # epigemm_dtype_t
DTYPE_NAMES = ("float32", "float16", "bfloat16")
HOST, DEVICE = 0, 1  # epigemm_memory_t


def _dtype_error(name, given):
    return invalid(f"{name} has dtype {given}; expected float32, float16 or bfloat16")


class _NumpyArrays:
    """NumPy arrays (host memory). bfloat16 through the ml_dtypes package when it is installed."""

    name = "numpy"

    def __init__(self):
        import numpy

        self.np = numpy
        # Buffer-protocol format characters (native byte order) -> epigemm dtype.
        self.formats = {"f": F32, "<f": F32, "=f": F32, "e": F16, "<e": F16, "=e": F16}
        self.np_dtypes = [numpy.dtype(numpy.float32), numpy.dtype(numpy.float16), None]
        try:
            import ml_dtypes

            self.np_dtypes[BF16] = numpy.dtype(ml_dtypes.bfloat16)
        except ImportError:
            pass
        self.by_dtype = {d: i for i, d in enumerate(self.np_dtypes) if d is not None}

    def describe(self, a, name, output=False):
        info = _c.buffer_describe(a)
        if info is None:
            return self._describe_slow(a, name, output)
        data, fmt, itemsize, shape, byte_strides, readonly = info
        dtype = self.formats.get(fmt)
        if dtype is None:
            return self._describe_slow(a, name, output)
        if output and readonly:
            raise invalid(f"{name} is a read-only array; expected a writable output")
        strides = tuple(s // itemsize for s in byte_strides)
        if any(s % itemsize for s in byte_strides):
            raise invalid(f"{name} has byte strides {byte_strides}, not multiples of its "
                          f"{itemsize}-byte elements; expected element-aligned strides")
        return data, dtype, shape, strides, -1

    def _describe_slow(self, a, name, output):
        # dtypes the buffer protocol does not carry (ml_dtypes' bfloat16).
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

    def data_ptr(self, a):
        info = _c.buffer_describe(a)
        return a.__array_interface__["data"][0] if info is None else info[0]

    def empty(self, like, shape, dtype):
        np_dtype = self.np_dtypes[dtype]
        if np_dtype is None:
            raise invalid("a bfloat16 NumPy output needs the ml_dtypes package (pip install ml_dtypes); "
                          "expected ml_dtypes installed or a float32/float16 output")
        return self.np.empty(shape, np_dtype)

    def stream(self, device):
        return 0

    def workspace(self, device, stream):
        return None

    grow_workspace = None


class _TorchTensors:
    """PyTorch tensors on the CPU or a CUDA device. Device workspaces are torch tensors from the
    caching allocator, one per (device, stream), grown when a call needs more: stream-ordered
    and allowed while a CUDA graph is being captured."""

    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        self.dtypes = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}
        self.torch_dtypes = (torch.float32, torch.float16, torch.bfloat16)
        self.workspaces = {}
        raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw_stream is None:
            def raw_stream(device):
                return torch.cuda.current_stream(device).cuda_stream
        self.raw_stream = raw_stream

    def describe(self, a, name, output=False):
        dtype = self.dtypes.get(a.dtype)
        if dtype is None:
            raise _dtype_error(name, a.dtype)
        device = a.get_device()
        if device >= 0:
            if not a.is_cuda:
                raise invalid(f"{name} is on device {a.device}; expected a CPU or CUDA tensor")
        elif a.device.type != "cpu":
            raise invalid(f"{name} is on device {a.device}; expected a CPU or CUDA tensor")
        return a.data_ptr(), dtype, a.shape, a.stride(), device

    def empty(self, like, shape, dtype):
        return like.new_empty(shape, dtype=self.torch_dtypes[dtype])

    @staticmethod
    def data_ptr(a):
        return a.data_ptr()

    def stream(self, device):
        return self.raw_stream(device)

    def workspace(self, device, stream):
        if device < 0:
            return None
        held = self.workspaces.get((device, stream))
        return (0, 0) if held is None else held[1]

    def grow_workspace(self, device, stream, needed):
        # Rounded up so that nearby sizes reuse the buffer.
        nbytes = (needed + (1 << 20) - 1) >> 20 << 20
        buffer = self.torch.empty(nbytes, dtype=self.torch.uint8, device=f"cuda:{device}")
        self.workspaces[(device, stream)] = (buffer, (buffer.data_ptr(), nbytes))
        return buffer.data_ptr(), nbytes


class _CupyArrays:
    """CuPy arrays (CUDA device memory)."""

    name = "cupy"

    def __init__(self):
        import cupy
        import numpy

        self.cupy = cupy
        self.dtypes = {numpy.dtype(numpy.float32): F32, numpy.dtype(numpy.float16): F16}
        self.np_dtypes = (numpy.float32, numpy.float16, None)

    def describe(self, a, name, output=False):
        dtype = self.dtypes.get(a.dtype)
        if dtype is None:
            raise _dtype_error(name, a.dtype)
        itemsize = a.itemsize
        return a.data.ptr, dtype, a.shape, tuple(s // itemsize for s in a.strides), a.device.id

    def empty(self, like, shape, dtype):
        if self.np_dtypes[dtype] is None:
            raise _dtype_error("a CuPy output", "bfloat16")
        with like.device:
            return self.cupy.empty(shape, self.np_dtypes[dtype])

    @staticmethod
    def data_ptr(a):
        return a.data.ptr

    def stream(self, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.cuda.get_current_stream().ptr

    def workspace(self, device, stream):
        return None

    grow_workspace = None


# DLPack device types (dlpack.h): where the memory of a DLPack array lives.
_DLPACK_HOST_TYPES = (1, 3)  # kDLCPU, kDLCUDAHost (pinned host memory)
_DLPACK_CUDA_TYPES = (2, 13)  # kDLCUDA, kDLCUDAManaged


class _DlpackArrays:
    """Any other array exporting DLPack (JAX, ...) or the buffer protocol, read through the
    extension. Its outputs cannot be allocated here: pass them with out=."""

    name = "dlpack"

    def describe(self, a, name, output=False):
        try:
            data, dtype, shape, strides, device_type, device_id, text = _c.dlpack_describe(a)
        except TypeError:
            raise invalid(f"{name} is a {type(a).__module__}.{type(a).__name__}; expected an array "
                          "(NumPy, PyTorch, CuPy or any DLPack array)") from None
        if dtype < 0:
            raise _dtype_error(name, text)
        if device_type in _DLPACK_HOST_TYPES:
            device = -1
        elif device_type in _DLPACK_CUDA_TYPES:
            device = device_id
        else:
            raise invalid(f"{name} is on DLPack device type {device_type}; expected CPU or CUDA memory")
        return data, dtype, shape, strides, device

    def empty(self, like, shape, dtype):
        raise invalid(f"epigemm allocates outputs as NumPy, PyTorch or CuPy arrays, not as "
                      f"{type(like).__module__}.{type(like).__name__}; expected the outputs passed with out=")

    def stream(self, device):
        return 0

    def workspace(self, device, stream):
        return None

    grow_workspace = None


_DLPACK = _DlpackArrays()
_BY_TYPE = {}  # type -> adapter, filled on first sight of each type


def adapter(a):
    """The adapter of an array's library (cached by type)."""
    found = _BY_TYPE.get(type(a))
    if found is not None:
        return found
    return _adapter_slow(a)


def _adapter_slow(a):
    # A library's arrays can only come from a library already imported.
    found = _DLPACK
    for module, type_name, cls in (("numpy", "ndarray", _NumpyArrays), ("torch", "Tensor", _TorchTensors),
                                   ("cupy", "ndarray", _CupyArrays)):
        library = sys.modules.get(module)
        if library is not None and isinstance(a, getattr(library, type_name)):
            found = _shared(module, cls)
            break
    _BY_TYPE[type(a)] = found
    return found


_SHARED = {}


def _shared(name, cls):
    if name not in _SHARED:
        _SHARED[name] = cls()
    return _SHARED[name]


def torch_adapter():
    """The PyTorch adapter (epigemm.torch uses it directly)."""
    return _shared("torch", _TorchTensors)
