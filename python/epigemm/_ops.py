"""The operations: the three passes of a linear layer and the GEMM with an epilogue, on any array
epigemm can read (_arrays.py). The meaning of each is docs/conventions.md; docs/python.md says
how arrays map to it."""

import enum
import math
import threading

from . import _epigemm as _c
from ._arrays import adapter
from ._errors import error_for_status, invalid

# activation= names -> the extension's codes (None is the identity); backend= names ->
# epigemm_backend_t.
ACTIVATIONS = {None: 0, **_c.ACTIVATIONS}
BACKENDS = dict(_c.BACKENDS)


class Epilogue(enum.IntEnum):
    """The epilogues of gemm() (docs/conventions.md, "Epilogues"); gemm also takes their names
    as strings, in any case ("dgelu_bgrad"). The GELU names are the ACT ones with the activation
    gelu_tanh (gemm's default activation)."""

    DEFAULT = 0
    BIAS = 1
    ACT_AUX = 2
    ACT_AUX_BIAS = 3
    DACT = 4
    DACT_BGRAD = 5
    BGRADB = 6
    BGRADA = 7
    ACT = 8
    ACT_BIAS = 9
    GELU_AUX = 2
    GELU_AUX_BIAS = 3
    DGELU = 4
    DGELU_BGRAD = 5


_EPILOGUES = {name.lower(): e for name, e in Epilogue.__members__.items()}
_WRITES_AUX = (Epilogue.ACT_AUX, Epilogue.ACT_AUX_BIAS)
# Epilogues with a bias gradient, and whether its length is gemm_m (else gemm_n).
_BIAS_GRAD_OVER_M = {Epilogue.DACT_BGRAD: True, Epilogue.BGRADA: True, Epilogue.BGRADB: False}


class _ThreadState(threading.local):
    """A context per device (-1: host) for each thread: the C API's contexts are used by one
    thread at a time."""

    def __init__(self):
        self.contexts = {}
        self.last = None


_STATE = _ThreadState()


def _context(device, calling=True):
    """This thread's context for a device; `calling`: a call runs on it next (last_backend())."""
    state = _STATE
    ctx = state.contexts.get(device)
    if ctx is None:
        ctx = state.contexts[device] = _c.Context(device)
    if calling:
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
    return _context(-1 if device is None else device, False).backend_usable(_backend_code(backend))


def backend_compiled(backend):
    """Whether a backend is compiled into this build, whether or not it can run here."""
    return _context(-1, False).backend_compiled(_backend_code(backend))


def _backend_code(backend):
    code = BACKENDS.get(backend)
    if code is None:
        raise invalid(f"backend is {backend!r}; expected one of {', '.join(map(repr, BACKENDS))}")
    return code


def _activation_code(activation):
    try:
        code = ACTIVATIONS.get(activation)
    except TypeError:  # unhashable: a list, an array
        code = None
    if code is None:
        raise invalid(f"activation is {activation!r}; expected None, 'identity', 'gelu_tanh', 'gelu_erf', "
                      "'relu' or 'silu'")
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


def _run(ctx, method, lib, device, stream, args):
    """Calls the extension with the library's workspace (retrying once with a larger one when
    the call asks for it) and raises the library's error."""
    workspace = lib.workspace(device, stream)
    status = method(*args, workspace)
    if status == _c.NEED_WORKSPACE:
        status = method(*args, lib.grow_workspace(device, stream, ctx.workspace_needed))
    if status:
        raise error_for_status(status, ctx.last_error())


def _shape(a):
    # NumPy's shape is a tuple and PyTorch's a tuple subclass: used as they are (no copy: this
    # runs on every allocating call).
    shape = getattr(a, "shape", None)
    return () if shape is None else shape


def _rows_shape(a, features):
    """[..., features] for an array [..., k] (the extension checks what the shapes mean)."""
    return (*_shape(a)[:-1], features)


def _dim(a, axis):
    shape = _shape(a)
    return shape[axis] if len(shape) == 2 else 0


def _same_tokens(a, a_name, b, b_name):
    """b's leading dimensions (its tokens) are a's: the library sees only their product."""
    sa, sb = _shape(a), _shape(b)
    if sa and sb and tuple(sa[:-1]) != tuple(sb[:-1]):
        raise invalid(f"{b_name} has shape {tuple(sb)}; expected the leading dimensions of {a_name} "
                      f"{tuple(sa)}: {tuple(sa[:-1])}")


def linear_fprop(X, W, bias=None, *, activation=None, save_preact=True, out=None, preact_out=None,
                 backend="auto", allow_tf32=False, stream=None):
    """Y[..., out] = act(X[..., in] W[out, in]^T + bias[out]).

    With an activation, also the pre-activation X W^T + bias (what linear_dgrad needs), unless
    save_preact=False. Returns Y, or (Y, preact) when the pre-activation is saved. Outputs given
    by out= / preact_out= are written in place; otherwise they are allocated (same library,
    device and dtype as X)."""
    save_preact = _bool(save_preact, "save_preact")
    lib = adapter(X)
    fast = lib.fast
    if fast is not None and stream is None:
        # Plain 2-d torch tensors, outputs to allocate or given as such, the current stream: read
        # and allocated in C++ (python/src/torch_ops.cpp); None when it does not take the call,
        # which then runs here.
        result = fast.linear_fprop(X, W, bias, _activation_code(activation), save_preact,
                                   BACKENDS.get(backend), _bool(allow_tf32, "allow_tf32"), out, preact_out)
        if result is not None:
            _STATE.last = fast  # its last_backend() reports this thread's calls on that path
            return result
    device = lib.device_of(X, "X")
    act = _activation_code(activation)
    rows_shape = None
    if out is None:
        rows_shape = _rows_shape(X, _dim(W, 0))
        out = lib.empty_like_rows(X, rows_shape)
    else:
        _same_tokens(X, "X", out, "out")
    if preact_out is not None:
        _same_tokens(X, "X", preact_out, "preact_out")
    if act:
        # Without save_preact and preact_out the pre-activation is not written at all (ACT_BIAS).
        if preact_out is None and save_preact:
            preact_out = lib.empty_like_rows(X, rows_shape or _rows_shape(X, _dim(W, 0)))
    elif preact_out is not None:
        raise invalid(f"preact_out is given with activation {activation!r}; expected no pre-activation output "
                      "(an activation saves one)")
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_fprop, lib, device, stream,
         (X, W, bias, preact_out, out, act, _backend_code(backend), _bool(allow_tf32, "allow_tf32"), stream))
    if act and preact_out is not None:
        return out, preact_out
    return out


def linear_dgrad(dY, W, *, preact=None, activation=None, bias_grad=False, out=None, backend="auto",
                 allow_tf32=False, stream=None):
    """dX[..., in] = (dY[..., out] W[out, in]) * act'(preact[..., in]).

    preact is the previous layer's saved pre-activation (with its activation); bias_grad=True
    (or an output vector [in]) also gives that layer's bias gradient, the sum of dX over tokens.
    Returns dX, or (dX, bias_grad)."""
    lib = adapter(dY)
    act = _activation_code(activation)
    fast = lib.fast
    if fast is not None and stream is None:
        # As linear_fprop's: plain 2-d torch tensors, read in C++ (None: not taken, run here).
        result = fast.linear_dgrad(dY, W, preact, act, _flag_or_output(bias_grad), out, BACKENDS.get(backend),
                                   _bool(allow_tf32, "allow_tf32"))
        if result is not None:
            _STATE.last = fast
            return result
    device = lib.device_of(dY, "dY")
    in_features = _dim(W, 1)
    if out is None:
        out = lib.empty_like_rows(dY, _rows_shape(dY, in_features))
    else:
        _same_tokens(dY, "dY", out, "out")
    if preact is not None:
        _same_tokens(dY, "dY", preact, "preact")
    bias_grad = _output_or_flag(bias_grad, lambda: lib.empty_like_rows(dY, (in_features,)))
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_dgrad, lib, device, stream,
         (dY, W, preact, bias_grad, out, act, _backend_code(backend), _bool(allow_tf32, "allow_tf32"), stream))
    return out if bias_grad is None else (out, bias_grad)


def linear_wgrad(X, dY, *, out=None, accumulate=False, bias_grad=False, backend="auto",
                 allow_tf32=False, stream=None):
    """dW[out, in] (+)= dY[..., out]^T X[..., in]; accumulate=True adds to out.

    bias_grad=True (or an output vector [out]) also gives the layer's bias gradient, the sum of
    dY over tokens. Returns dW, or (dW, bias_grad)."""
    accumulate = _bool(accumulate, "accumulate")
    lib = adapter(X)
    fast = lib.fast
    if fast is not None and stream is None:
        # As linear_fprop's: plain 2-d torch tensors, read in C++ (None: not taken, run here).
        result = fast.linear_wgrad(X, dY, out, accumulate, _flag_or_output(bias_grad), BACKENDS.get(backend),
                                   _bool(allow_tf32, "allow_tf32"))
        if result is not None:
            _STATE.last = fast
            return result
    device = lib.device_of(X, "X")
    out_features = (_shape(dY) or (0,))[-1]
    _same_tokens(X, "X", dY, "dY")
    if out is None:
        if accumulate:
            raise invalid("accumulate=True without out; expected the dW to add to")
        out = lib.empty_like_rows(X, (out_features, (_shape(X) or (0,))[-1]))
    bias_grad = _output_or_flag(bias_grad, lambda: lib.empty_like_rows(X, (out_features,)))
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.linear_wgrad, lib, device, stream,
         (X, dY, out, accumulate, bias_grad, _backend_code(backend), _bool(allow_tf32, "allow_tf32"), stream))
    return out if bias_grad is None else (out, bias_grad)


def _is_numpy_bool(value):
    kind = type(value)  # numpy.bool (numpy.bool_ before NumPy 2)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")


def _flag_or_output(value):
    """A bias_grad= argument as the C++ path takes it: True (allocate), None (none) or the output
    given (anything else: that path leaves the call to the generic one)."""
    if value is True or value is False or _is_numpy_bool(value):
        return True if value else None
    return value


def _output_or_flag(value, allocate):
    """An output argument that may also be a yes/no (bias_grad=True: allocate it): the output,
    a new one (True, NumPy's True too), or None (False)."""
    if value is True or value is False or _is_numpy_bool(value):
        return allocate() if value else None
    return value


def _bool(value, name):
    """A yes/no argument: a bool (NumPy's too), 0 or 1."""
    if value is True or value is False:
        return value
    try:
        if value in (0, 1) and not isinstance(value, str):
            return bool(value)
    except (TypeError, ValueError):  # an array: no single truth value
        pass
    raise invalid(f"{name} is {value!r}; expected False or True")


def _flag(value, name):
    try:
        if value in (False, True, 0, 1) and not isinstance(value, str):
            return bool(value)
    except (TypeError, ValueError):  # an array: no single truth value
        raise invalid(f"{name} is {value!r}; expected False/True or 'N'/'T'") from None
    text = str(value).upper()
    if text in ("N", "T"):
        return text == "T"
    raise invalid(f"{name} is {value!r}; expected False/True or 'N'/'T'")


# alpha and beta are float32 in the C API. A double rounds to float32's largest finite value below
# _FLOAT32_MAX + half its spacing (2^103) and to Inf from there; to 0 at or below 2^-150, half the
# smallest subnormal (2^-149, about 1.4e-45).
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_ROUNDS_TO_INF = _FLOAT32_MAX + 2.0 ** 103
_FLOAT32_ROUNDS_TO_ZERO = 2.0 ** -150


def _scalar(value, name):
    try:
        x = float(value)
    except OverflowError:  # an integer beyond the doubles
        raise invalid(f"{name} is {value!r}, which float32 rounds to Inf; expected a magnitude of at most "
                      f"{_FLOAT32_MAX!r} (float32's largest)") from None
    except (TypeError, ValueError):
        raise invalid(f"{name} is {value!r}; expected a real number") from None
    if math.isfinite(x) and abs(x) >= _FLOAT32_ROUNDS_TO_INF:
        raise invalid(f"{name} is {value!r}, which float32 rounds to Inf; expected a magnitude of at most "
                      f"{_FLOAT32_MAX!r} (float32's largest)")
    if x != 0 and abs(x) <= _FLOAT32_ROUNDS_TO_ZERO:
        raise invalid(f"{name} is {value!r}, which float32 rounds to 0; expected 0 or a magnitude of at least "
                      f"{2.0 ** -149:.4g} (float32's smallest)")
    return x


def _check_gemm_k(A, B, ta, tb):
    """op(A)'s gemm_k against op(B)'s, before any output is allocated: D is gemm_n x gemm_m, which
    operands of disagreeing gemm_k can make of any size (A [100000, 8] and B [100000, 4], both
    transposed the wrong way, ask for 40 GB), and the call is refused anyway. The library's
    message for the same mismatch (src/core/validate.cpp)."""
    if len(_shape(A)) != 2 or len(_shape(B)) != 2:
        return  # the library names the dimensions
    a_rows, a_cols = _dim(A, 1), _dim(A, 0)  # column-major: the reverse of the row-major shape
    b_rows, b_cols = _dim(B, 1), _dim(B, 0)
    gemm_k = a_rows if ta else a_cols
    b_k = b_cols if tb else b_rows
    if b_k != gemm_k:
        raise invalid(f"B has {b_k} {'columns' if tb else 'rows'}; transb = {'T' if tb else 'N'} needs "
                      f"gemm_k = {gemm_k} (the {'rows' if ta else 'columns'} of A, transa = {'T' if ta else 'N'})")


def gemm(A, B, D=None, *, transa=False, transb=False, alpha=1.0, beta=0.0, epilogue="default",
         activation="gelu_tanh", bias=None, aux=None, bias_grad=None, allow_tf32=False,
         backend="auto", stream=None):
    """D (gemm_m x gemm_n) = epilogue(alpha op(A) op(B) + beta D), in GEMM coordinates.

    Column-major semantics, as the C API: a row-major array of shape [r, c] is the column-major
    c x r matrix (leading dimension its row stride). So for row-major X [tokens, in] and
    W [out, in], Y [tokens, out] = X W^T is gemm(W, X, transa=True). transa / transb are bools
    or 'N' / 'T'; epilogue an Epilogue or its name; activation (for ACT, ACT_BIAS, ACT_AUX(_BIAS),
    DACT(_BGRAD)) "gelu_tanh" (default), "gelu_erf", "relu", "silu" or None. Outputs not given are
    allocated (as A): D (needs beta == 0), aux for ACT_AUX / ACT_AUX_BIAS, bias_grad for
    DACT_BGRAD / BGRADB / BGRADA. Returns D, or (D, aux) for ACT_AUX / ACT_AUX_BIAS, or
    (D, bias_grad) for DACT_BGRAD / BGRADB / BGRADA."""
    lib = adapter(A)
    device = lib.device_of(A, "A")
    ta, tb = _flag(transa, "transa"), _flag(transb, "transb")
    alpha, beta = _scalar(alpha, "alpha"), _scalar(beta, "beta")
    ep = None
    if isinstance(epilogue, str):
        ep = _EPILOGUES.get(epilogue.lower())
    elif not isinstance(epilogue, bool):
        try:
            ep = Epilogue(epilogue)
        except (TypeError, ValueError):
            pass
    if ep is None:
        raise invalid(f"epilogue is {epilogue!r}; expected an Epilogue or one of {', '.join(_EPILOGUES)}")
    # Column-major rows x cols of A and B: the reverse of their row-major shapes.
    a_rows, a_cols = _dim(A, 1), _dim(A, 0)
    b_rows, b_cols = _dim(B, 1), _dim(B, 0)
    gemm_m = a_cols if ta else a_rows
    gemm_n = b_rows if tb else b_cols
    _check_gemm_k(A, B, ta, tb)
    if D is None:
        if beta != 0:
            raise invalid(f"beta is {beta} without D; expected D to read (or beta = 0)")
        D = lib.empty_like_rows(A, (gemm_n, gemm_m))
    extra = None
    if ep in _WRITES_AUX:
        if aux is None:
            aux = lib.empty_like_rows(A, (gemm_n, gemm_m))
        extra = aux
    if ep in _BIAS_GRAD_OVER_M:
        if bias_grad is None:
            bias_grad = lib.empty_like_rows(A, (gemm_m if _BIAS_GRAD_OVER_M[ep] else gemm_n,))
        extra = bias_grad
    act = _activation_code(activation)
    stream = _stream_of(lib, stream, device)
    ctx = _context(device)
    _run(ctx, ctx.gemm, lib, device, stream,
         (A, B, D, ta, tb, alpha, beta, int(ep), act, bias, aux, ep in _WRITES_AUX,
          bias_grad, _backend_code(backend), _bool(allow_tf32, "allow_tf32"), stream))
    return D if extra is None else (D, extra)
