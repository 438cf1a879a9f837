"""The operations: the three passes of a linear layer and the GEMM with an epilogue, on any array
epigemm can read (_arrays.py). The meaning of each is docs/conventions.md; docs/python.md says
how arrays map to it."""

import enum
import threading

from . import _epigemm as _c
from ._arrays import DEVICE, DTYPE_NAMES, HOST, adapter
from ._errors import error_for_status, invalid

# activation= names -> codes of the extension (python/src/epigemm_module.cpp, Activation).
ACTIVATIONS = {None: 0, "identity": 0, "gelu_tanh": 1, "gelu_erf": 2, "relu": 3, "silu": 4}
# backend= names -> epigemm_backend_t.
BACKENDS = {"auto": 0, "reference": 1, "cpu": 2, "cuda": 3, "cublaslt": 4}
_BACKEND_NAMES = {code: name for name, code in BACKENDS.items()}


class Epilogue(enum.IntEnum):
    """The epilogues of gemm() (docs/conventions.md, "Epilogues"); gemm also takes their names
    as strings, in any case ("dgelu_bgrad")."""

    DEFAULT = 0
    BIAS = 1
    GELU_AUX = 2
    GELU_AUX_BIAS = 3
    DGELU = 4
    DGELU_BGRAD = 5
    BGRADB = 6


_EPILOGUES = {e.name.lower(): e for e in Epilogue}
_WRITES_AUX = (Epilogue.GELU_AUX, Epilogue.GELU_AUX_BIAS)
_READS_AUX = (Epilogue.DGELU, Epilogue.DGELU_BGRAD)


class _ThreadState(threading.local):
    """A context per device (-1: host) for each thread: the C API's contexts are used by one
    thread at a time."""

    def __init__(self):
        self.contexts = {}
        self.last = None


_STATE = _ThreadState()


def _context(device):
    state = _STATE
    ctx = state.contexts.get(device)
    if ctx is None:
        ctx = state.contexts[device] = _c.Context(device)
    state.last = ctx
    return ctx


def last_backend():
    """(name, reason): which backend ran this thread's last successful call and why the
    dispatcher chose it, e.g. ("cpu", "auto: cpu has the highest priority ...")."""
    ctx = _STATE.last
    if ctx is None:
        return ("", "no call has run on this thread")
    return ctx.last_backend()


def backend_usable(backend, device=None):
    """Whether a backend ("cpu", "cuda", ...) is compiled in and can run here (on `device`, a
    CUDA device index, or the host when None)."""
    return _context(-1 if device is None else device).backend_usable(_backend_code(backend))


def backend_compiled(backend):
    """Whether a backend is compiled into this build, whether or not it can run here."""
    return _context(-1).backend_compiled(_backend_code(backend))


def _backend_code(backend):
    code = BACKENDS.get(backend)
    if code is None:
        raise invalid(f"backend is {backend!r}; expected one of {', '.join(map(repr, BACKENDS))}")
    return code


def _activation_code(activation):
    code = ACTIVATIONS.get(activation)
    if code is None:
        raise invalid(f"activation is {activation!r}; expected None, 'gelu_tanh', 'gelu_erf', 'relu' or 'silu'")
    return code


def _stream_of(lib, stream, device):
    if device < 0:
        return 0
    if stream is None:
        return lib.stream(device)
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch.cuda.Stream, cupy Stream, ...
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise invalid(f"stream is a {type(stream).__name__}; expected None, an int (a cudaStream_t) "
                  "or a stream object with .cuda_stream or .ptr")


def _check_device(name, device, expected):
    if device != expected:
        where = "host memory" if expected < 0 else f"CUDA device {expected}"
        here = "host memory" if device < 0 else f"CUDA device {device}"
        raise invalid(f"{name} is in {here}; expected {where}, where the first operand is")


def _layer_tensor(a, name):
    """A row-major tensor [..., cols] of the layer calls: its C description
    (data, dtype, rows, cols, row_stride), leading shape and device. Leading dimensions are
    flattened into rows when their strides allow it without a copy."""
    data, dtype, shape, strides, device = adapter(a).describe(a, name)
    nd = len(shape)
    if nd == 2:
        rows, cols = shape
        row_stride, col_stride = strides
        lead = (rows,)
        if rows <= 1:
            row_stride = max(cols, 1)
    elif nd == 0:
        raise invalid(f"{name} is a 0-d array; expected at least one dimension ([..., features])")
    else:
        cols, col_stride = shape[-1], strides[-1]
        lead = tuple(shape[:-1])
        rows = 1
        for size in lead:
            rows *= size
        # The row stride is the stride of the innermost leading dimension longer than 1; every
        # outer one must step over whole blocks of the inner ones.
        row_stride = None
        span = 0
        for size, stride in zip(reversed(lead), reversed(strides[:-1])):
            if size == 1:
                continue
            if row_stride is None:
                row_stride = stride
            elif stride != span:
                raise invalid(f"{name} has shape {tuple(shape)} and strides {tuple(strides)} (elements): "
                              "its leading dimensions cannot be flattened into rows without a copy; "
                              "expected them contiguous (call .contiguous() or np.ascontiguousarray)")
            span = stride * size
        if row_stride is None:
            row_stride = max(cols, 1)
    if col_stride != 1 and cols > 1:
        raise invalid(f"{name} has shape {tuple(shape)} and strides {tuple(strides)} (elements); "
                      "expected a unit stride in the last dimension (row-major rows): make it "
                      "contiguous first")
    return (data, dtype, rows, cols, row_stride), lead, device


def _vector(a, name, device, output=False):
    data, dtype, shape, strides, where = adapter(a).describe(a, name, output)
    _check_device(name, where, device)
    if len(shape) != 1:
        raise invalid(f"{name} has shape {tuple(shape)}; expected a 1-d array")
    if strides[0] != 1 and shape[0] > 1:
        raise invalid(f"{name} has stride {strides[0]} (elements); expected a contiguous vector")
    return (data, dtype, shape[0])


def _output(lib, like, given, name, device, shape, dtype):
    """(array, C description) of an output of `shape`: the caller's (written in place, which must
    have exactly that shape), or a new contiguous one of like's library and device in `dtype`."""
    if given is None:
        new = lib.empty(like, shape, dtype)
        cols = shape[-1]
        rows = 1
        for size in shape[:-1]:
            rows *= size
        return new, (lib.data_ptr(new), dtype, rows, cols, max(cols, 1))
    adapter(given).describe(given, name, True)  # refuses read-only outputs
    desc, lead, where = _layer_tensor(given, name)
    _check_device(name, where, device)
    if tuple(lead) + (desc[3],) != tuple(shape):
        got = tuple(adapter(given).describe(given, name)[2])
        raise invalid(f"{name} has shape {got}; expected {tuple(shape)}")
    return given, desc


def _run(ctx, method, lib, device, stream, args):
    """Calls the extension with the library's workspace (retrying once with a larger one when
    the call asks for it) and raises the library's error."""
    workspace = lib.workspace(device, stream)
    status = method(*args, workspace)
    if status == _c.NEED_WORKSPACE:
        status = method(*args, lib.grow_workspace(device, stream, ctx.workspace_needed))
    if status:
        raise error_for_status(status, ctx.last_error())


def linear_fprop(X, W, bias=None, *, activation=None, save_preact=True, out=None, preact_out=None,
                 backend="auto", allow_tf32=False, stream=None):
    """Y[..., out] = act(X[..., in] W[out, in]^T + bias[out]).

    With an activation, also the pre-activation X W^T + bias (what linear_dgrad needs), unless
    save_preact=False. Returns Y, or (Y, preact) when the pre-activation is saved. Outputs given
    by out= / preact_out= are written in place; otherwise they are allocated (same library,
    device and dtype as X)."""
    lib = adapter(X)
    x, lead, device = _layer_tensor(X, "X")
    w, w_lead, w_device = _layer_tensor(W, "W")
    _check_device("W", w_device, device)
    if len(w_lead) != 1:
        raise invalid(f"W has {len(w_lead) + 1} dimensions; expected 2 ([out_features, in_features])")
    act = ACTIVATIONS.get(activation)
    if act is None:
        act = _activation_code(activation)
    b = None if bias is None else _vector(bias, "bias", device)
    out_shape = lead + (w[2],)
    out, y = _output(lib, X, out, "out", device, out_shape, x[1])
    pre = None
    if act:
        preact_out, pre = _output(lib, X, preact_out, "preact_out", device, out_shape, y[1])
    elif preact_out is not None:
        raise invalid("preact_out is given with activation None; expected no pre-activation output")
    memory = HOST if device < 0 else DEVICE
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_fprop, lib, device, stream,
         (x, w, b, pre, y, act, memory, _backend_code(backend), allow_tf32, stream))
    if act and save_preact:
        return out, preact_out
    return out


def linear_dgrad(dY, W, *, preact=None, activation=None, bias_grad=False, out=None, backend="auto",
                 allow_tf32=False, stream=None):
    """dX[..., in] = (dY[..., out] W[out, in]) * act'(preact[..., in]).

    preact is the previous layer's saved pre-activation (with its activation); bias_grad=True
    (or an output vector [in]) also gives that layer's bias gradient, the sum of dX over tokens.
    Returns dX, or (dX, bias_grad)."""
    lib = adapter(dY)
    dy, lead, device = _layer_tensor(dY, "dY")
    w, w_lead, w_device = _layer_tensor(W, "W")
    _check_device("W", w_device, device)
    if len(w_lead) != 1:
        raise invalid(f"W has {len(w_lead) + 1} dimensions; expected 2 ([out_features, in_features])")
    act = ACTIVATIONS.get(activation)
    if act is None:
        act = _activation_code(activation)
    pre = None
    if preact is not None:
        pre, _, pre_device = _layer_tensor(preact, "preact")
        _check_device("preact", pre_device, device)
    out, dx = _output(lib, dY, out, "out", device, lead + (w[3],), dy[1])
    grad, grad_out = _bias_grad_output(lib, dY, bias_grad, w[3], dx[1], device)
    memory = HOST if device < 0 else DEVICE
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_dgrad, lib, device, stream,
         (dy, w, pre, grad, dx, act, memory, _backend_code(backend), allow_tf32, stream))
    return out if grad is None else (out, grad_out)


def linear_wgrad(X, dY, *, out=None, accumulate=False, bias_grad=False, backend="auto",
                 allow_tf32=False, stream=None):
    """dW[out, in] (+)= dY[..., out]^T X[..., in]; accumulate=True adds to out.

    bias_grad=True (or an output vector [out]) also gives the layer's bias gradient, the sum of
    dY over tokens. Returns dW, or (dW, bias_grad)."""
    lib = adapter(X)
    x, _, device = _layer_tensor(X, "X")
    dy, _, dy_device = _layer_tensor(dY, "dY")
    _check_device("dY", dy_device, device)
    if out is None and accumulate:
        raise invalid("accumulate=True without out; expected the dW to add to")
    out, dw = _output(lib, X, out, "out", device, (dy[3], x[3]), x[1])
    grad, grad_out = _bias_grad_output(lib, X, bias_grad, dy[3], dw[1], device)
    memory = HOST if device < 0 else DEVICE
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_wgrad, lib, device, stream,
         (x, dy, dw, bool(accumulate), grad, memory, _backend_code(backend), allow_tf32, stream))
    return out if grad is None else (out, grad_out)


def _bias_grad_output(lib, like, bias_grad, length, dtype, device):
    """(C description, array) of a requested bias gradient: bias_grad is False/None, True
    (allocate one of `length` in `dtype`) or an output vector."""
    if bias_grad is None or bias_grad is False:
        return None, None
    if bias_grad is True:
        bias_grad = lib.empty(like, (length,), dtype)
    return _vector(bias_grad, "bias_grad", device, output=True), bias_grad


def _matrix(a, name, device):
    """The column-major matrix of a 2-d array: a row-major [r, c] array (unit stride in its last
    dimension) is the column-major c x r matrix with leading dimension its row stride."""
    data, dtype, shape, strides, where = adapter(a).describe(a, name)
    _check_device(name, where, device)
    if len(shape) != 2:
        raise invalid(f"{name} has shape {tuple(shape)}; expected a 2-d array")
    r, c = shape
    if strides[1] != 1 and c > 1:
        raise invalid(f"{name} has shape {tuple(shape)} and strides {tuple(strides)} (elements); "
                      "expected a unit stride in the last dimension (a row-major [r, c] array, "
                      "the column-major c x r matrix)")
    ld = strides[0] if r > 1 else max(c, 1)
    return (data, dtype, c, r, ld)


def _flag(value, name):
    if value in (False, True, 0, 1):
        return bool(value)
    text = str(value).upper()
    if text in ("N", "T"):
        return text == "T"
    raise invalid(f"{name} is {value!r}; expected False/True or 'N'/'T'")


def gemm(A, B, D=None, *, transa=False, transb=False, alpha=1.0, beta=0.0, epilogue="default",
         bias=None, aux=None, bias_grad=None, allow_tf32=False, backend="auto", stream=None):
    """D (gemm_m x gemm_n) = epilogue(alpha op(A) op(B) + beta D), in GEMM coordinates.

    Column-major semantics, as the C API: a row-major array of shape [r, c] is the column-major
    c x r matrix (leading dimension its row stride). So for row-major X [tokens, in] and
    W [out, in], Y [tokens, out] = X W^T is gemm(W, X, transa=True). transa / transb are bools
    or 'N' / 'T'; epilogue an Epilogue or its name. Outputs not given are allocated (as A):
    D (needs beta == 0), aux for GELU_AUX / GELU_AUX_BIAS, bias_grad for DGELU_BGRAD / BGRADB.
    Returns D, or (D, aux) for GELU_AUX / GELU_AUX_BIAS, or (D, bias_grad) for DGELU_BGRAD /
    BGRADB."""
    lib = adapter(A)
    device = lib.describe(A, "A")[4]
    a = _matrix(A, "A", device)
    b = _matrix(B, "B", device)
    ta, tb = _flag(transa, "transa"), _flag(transb, "transb")
    if isinstance(epilogue, str):
        ep = _EPILOGUES.get(epilogue.lower())
        if ep is None:
            raise invalid(f"epilogue is {epilogue!r}; expected one of {', '.join(_EPILOGUES)}")
    else:
        ep = Epilogue(epilogue)
    gemm_m = a[3] if ta else a[2]
    gemm_n = b[2] if tb else b[3]
    if D is None:
        if beta != 0:
            raise invalid(f"beta is {beta} without D; expected D to read (or beta = 0)")
        D = lib.empty(A, (gemm_n, gemm_m), a[1])
    adapter(D).describe(D, "D", True)
    d = _matrix(D, "D", device)
    extra = None
    v = None if bias is None else _vector(bias, "bias", device)
    x = None
    if aux is None and ep in _WRITES_AUX:
        aux = lib.empty(A, (gemm_n, gemm_m), d[1])
    if aux is not None:
        if ep in _WRITES_AUX:
            adapter(aux).describe(aux, "aux", True)
        x = _matrix(aux, "aux", device)
    if ep in _WRITES_AUX:
        extra = aux
    g = None
    if ep in (Epilogue.DGELU_BGRAD, Epilogue.BGRADB):
        if bias_grad is None:
            bias_grad = lib.empty(A, (gemm_m if ep == Epilogue.DGELU_BGRAD else gemm_n,), d[1])
        extra = bias_grad
    if bias_grad is not None:
        g = _vector(bias_grad, "bias_grad", device, output=True)
    memory = HOST if device < 0 else DEVICE
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.gemm, lib, device, stream,
         (a, b, d, ta, tb, float(alpha), float(beta), int(ep), v, x, g, memory,
          _backend_code(backend), bool(allow_tf32), stream))
    return D if extra is None else (D, extra)


def dtype_name(code):
    return DTYPE_NAMES[code]


def backend_name(code):
    return _BACKEND_NAMES[code]
