"""The operations on NumPy arrays (host memory) against float64 computations of their definitions;
bad arguments raise epigemm errors with the library's message and leave outputs untouched."""

import importlib.metadata
import pathlib
import re
import zlib

import numpy as np
import pytest

import epigemm
import reference as ref
from concurrent_calls import failures_in_threads

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

DTYPES = ["float32", "float16", "bfloat16"]
# (tokens, in_features, out_features): small, odd, one token, a k of 1.
SHAPES = [(5, 7, 3), (33, 17, 65), (1, 8, 4), (64, 1, 9)]


def rng_for(*case):
    """A generator seeded by the test case (the same numbers on every run)."""
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def np_dtype(name):
    if name == "bfloat16":
        if ml_dtypes is None:
            pytest.skip("bfloat16 NumPy arrays need the ml_dtypes package (pip install ml_dtypes)")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def random(rng, shape, dtype, scale=1.0):
    """Values exactly representable in dtype (so the float64 reference sees the same inputs)."""
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def f64(a):
    return np.asarray(a).astype(np.float64)


def assert_within(got, want, bound, what):
    err = np.abs(f64(got) - want)
    worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.size else ()
    assert np.all(err <= bound), (f"{what}: error {err[worst]:.3g} above bound {bound[worst]:.3g} at "
                                  f"{worst} (got {f64(got)[worst]}, want {want[worst]})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("activation", [None, "gelu_tanh", "gelu_erf", "relu", "silu"])
def test_linear_fprop(dtype, shape, with_bias, activation):
    tokens, in_f, out_f = shape
    rng = rng_for(dtype, shape, with_bias, activation)
    X, W = random(rng, (tokens, in_f), dtype), random(rng, (out_f, in_f), dtype)
    b = random(rng, (out_f,), dtype) if with_bias else None
    result = epigemm.linear_fprop(X, W, b, activation=activation)
    y_want, pre_want = ref.fprop(f64(X), f64(W), None if b is None else f64(b), activation)
    magnitude = np.abs(f64(X)) @ np.abs(f64(W)).T + (0.0 if b is None else np.abs(f64(b)))
    bound = ref.product_bound(dtype, in_f, magnitude)
    if activation is None:
        Y = result
    else:
        Y, P = result
        assert P.shape == (tokens, out_f) and P.dtype == X.dtype
        assert_within(P, pre_want, bound, "pre-activation")
    assert isinstance(Y, np.ndarray) and Y.shape == (tokens, out_f) and Y.dtype == X.dtype
    # |act'| <= 1.13 for every activation: the pre-activation's error passes through at most that
    # amplified.
    assert_within(Y, y_want, 1.13 * bound, "Y")
    if activation is not None:
        # Without saving the pre-activation only Y comes back (the ACT_BIAS epilogue).
        Y2 = epigemm.linear_fprop(X, W, b, activation=activation, save_preact=False)
        assert isinstance(Y2, np.ndarray)
        assert_within(Y2, y_want, 1.13 * bound, "Y without the pre-activation")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("activation,with_bias_grad",
                         [(None, False)] + [(a, g) for a in ("gelu_tanh", "gelu_erf", "relu", "silu")
                                            for g in (False, True)])
def test_linear_dgrad(dtype, shape, activation, with_bias_grad):
    tokens, in_f, out_f = shape
    rng = rng_for(dtype, shape, activation, with_bias_grad)
    dY, W = random(rng, (tokens, out_f), dtype), random(rng, (out_f, in_f), dtype)
    pre = random(rng, (tokens, in_f), dtype, scale=2.0) if activation else None
    result = epigemm.linear_dgrad(dY, W, preact=pre, activation=activation, bias_grad=with_bias_grad)
    dx_want, bg_want = ref.dgrad(f64(dY), f64(W), None if pre is None else f64(pre), activation)
    act_grad = np.abs(ref.ACTIVATIONS[activation][1](f64(pre))) if activation else 1.0
    magnitude = (np.abs(f64(dY)) @ np.abs(f64(W))) * act_grad
    bound = ref.product_bound(dtype, out_f, magnitude)
    dX = result[0] if with_bias_grad else result
    assert dX.shape == (tokens, in_f) and dX.dtype == dY.dtype
    assert_within(dX, dx_want, bound, "dX")
    if with_bias_grad:
        bg = result[1]
        assert bg.shape == (in_f,)
        # The sum of the unrounded g: each term within its fp32 bound, then tokens more
        # additions and one rounding to the output dtype.
        bg_bound = (ref.product_bound("float32", out_f, magnitude).sum(axis=0)
                    + ref.product_bound(dtype, tokens, np.abs(dx_want).sum(axis=0)))
        assert_within(bg, bg_want, bg_bound, "bias gradient")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias_grad", [True, False])
@pytest.mark.parametrize("accumulate", [False, True])
def test_linear_wgrad(dtype, shape, with_bias_grad, accumulate):
    tokens, in_f, out_f = shape
    rng = rng_for(dtype, shape, with_bias_grad, accumulate)
    X, dY = random(rng, (tokens, in_f), dtype), random(rng, (tokens, out_f), dtype)
    out = random(rng, (out_f, in_f), dtype) if accumulate else None
    dw_old = f64(out) if accumulate else 0.0
    result = epigemm.linear_wgrad(X, dY, out=out, accumulate=accumulate, bias_grad=with_bias_grad)
    dw_want, bg_want = ref.wgrad(f64(X), f64(dY))
    dw_want = dw_want + dw_old
    magnitude = np.abs(f64(dY)).T @ np.abs(f64(X)) + np.abs(dw_old)
    dW = result[0] if with_bias_grad else result
    assert dW.shape == (out_f, in_f)
    if accumulate:
        assert dW is out
    assert_within(dW, dw_want, ref.product_bound(dtype, tokens + 1, magnitude), "dW")
    if with_bias_grad:
        assert_within(result[1], bg_want, ref.product_bound(dtype, tokens, np.abs(f64(dY)).sum(axis=0)),
                      "bias gradient")


def epilogue_reference(ep, acc, bias, aux, activation="gelu_tanh"):
    """(D, aux written, bias gradient) in GEMM coordinates (gemm_m x gemm_n), float64."""
    act, act_grad = ref.ACTIVATIONS[activation]
    if ep == "default":
        return acc, None, None
    if ep == "bias":
        return acc + bias[:, None], None, None
    if ep == "act":
        return act(acc), None, None
    if ep == "act_bias":
        return act(acc + bias[:, None]), None, None
    if ep in ("gelu_aux", "act_aux"):
        return act(acc), acc, None
    if ep in ("gelu_aux_bias", "act_aux_bias"):
        z = acc + bias[:, None]
        return act(z), z, None
    if ep in ("dgelu", "dact"):
        return acc * act_grad(aux), None, None
    if ep in ("dgelu_bgrad", "dact_bgrad"):
        g = acc * act_grad(aux)
        return g, None, g.sum(axis=1)
    raise AssertionError(ep)


GEMM_CASES = ([(ep, "gelu_tanh") for ep in ("default", "bias", "gelu_aux", "gelu_aux_bias", "dgelu",
                                           "dgelu_bgrad", "bgradb", "bgrada", "act", "act_bias")]
              + [(ep, act) for act in (None, "gelu_erf", "relu", "silu")
                 for ep in ("act", "act_bias", "act_aux", "act_aux_bias", "dact", "dact_bgrad")])


@pytest.mark.parametrize("ep,activation", GEMM_CASES)
@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gemm_epilogues(ep, activation, transa, transb, dtype):
    gemm_m, gemm_n, gemm_k = 13, 6, 21
    rng = rng_for(ep, activation, transa, transb, dtype)
    # A row-major [r, c] array is the column-major c x r matrix: A stored gemm_m x gemm_k (N) or
    # gemm_k x gemm_m (T) is the row-major array of the reverse shape.
    A = random(rng, (gemm_m, gemm_k) if transa else (gemm_k, gemm_m), dtype)
    B = random(rng, (gemm_k, gemm_n) if transb else (gemm_n, gemm_k), dtype)
    matrix_a, matrix_b = f64(A).T, f64(B).T
    op_a = matrix_a.T if transa else matrix_a
    op_b = matrix_b.T if transb else matrix_b
    acc = op_a @ op_b
    bias = random(rng, (gemm_m,), dtype) if ep in ("bias", "gelu_aux_bias", "act_bias", "act_aux_bias") else None
    reads_aux = ep in ("dgelu", "dgelu_bgrad", "dact", "dact_bgrad")
    aux_in = random(rng, (gemm_n, gemm_m), dtype, 2.0) if reads_aux else None
    result = epigemm.gemm(A, B, transa="T" if transa else "N", transb=transb, epilogue=ep,
                          activation=activation, bias=bias, aux=aux_in)
    magnitude = np.abs(op_a) @ np.abs(op_b) + (0.0 if bias is None else np.abs(f64(bias))[:, None])
    bound = 1.13 * ref.product_bound(dtype, gemm_k, magnitude)
    if ep in ("bgradb", "bgrada"):
        D, bg = result
        assert_within(D.T, acc, bound, "D")
        summed = op_b.sum(axis=0) if ep == "bgradb" else op_a.sum(axis=1)
        summed_magnitude = np.abs(op_b).sum(axis=0) if ep == "bgradb" else np.abs(op_a).sum(axis=1)
        assert_within(bg, summed, ref.product_bound(dtype, gemm_k, summed_magnitude), "bias gradient")
        return
    d_want, aux_want, bg_want = epilogue_reference(ep, acc, None if bias is None else f64(bias),
                                                   None if aux_in is None else f64(aux_in).T,
                                                   activation)
    if aux_want is not None:
        D, aux = result
        assert aux.shape == (gemm_n, gemm_m)
        assert_within(aux.T, aux_want, bound, "aux")
    elif bg_want is not None:
        D, bg = result
        if aux_in is not None:
            magnitude = magnitude * np.abs(ref.ACTIVATIONS[activation][1](f64(aux_in).T))
        assert_within(bg, bg_want, ref.product_bound(dtype, gemm_k + gemm_n, magnitude.sum(axis=1)),
                      "bias gradient")
    else:
        D = result
    assert D.shape == (gemm_n, gemm_m)
    if aux_in is not None:
        bound = ref.product_bound(dtype, gemm_k, magnitude)
    assert_within(D.T, d_want, bound, "D")


def test_gemm_is_the_layer_mapping():
    """Y [tokens, out] = X W^T + b is gemm(W, X, transa=T) with the BIAS epilogue (conventions.md)."""
    rng = np.random.default_rng(1)
    X, W, b = random(rng, (9, 5), "float32"), random(rng, (4, 5), "float32"), random(rng, (4,), "float32")
    np.testing.assert_array_equal(epigemm.gemm(W, X, transa=True, epilogue=epigemm.Epilogue.BIAS, bias=b),
                                  epigemm.linear_fprop(X, W, b))


def test_gemm_alpha_beta_read_d():
    rng = np.random.default_rng(2)
    A, B = random(rng, (6, 4), "float32"), random(rng, (3, 6), "float32")
    D = random(rng, (3, 4), "float32")
    want = 0.5 * (f64(A).T @ f64(B).T).T + 2.0 * f64(D)
    got = epigemm.gemm(A, B, D, alpha=0.5, beta=2.0)
    assert got is D
    assert_within(D, want, ref.product_bound("float32", 8, np.abs(want) + 1.0), "D")


def test_leading_dims_and_one_dimensional_input():
    rng = np.random.default_rng(3)
    X, W, b = random(rng, (2, 3, 8), "float32"), random(rng, (5, 8), "float32"), random(rng, (5,), "float32")
    Y = epigemm.linear_fprop(X, W, b)
    assert Y.shape == (2, 3, 5)
    np.testing.assert_array_equal(Y.reshape(6, 5), epigemm.linear_fprop(X.reshape(6, 8), W, b))
    y1 = epigemm.linear_fprop(X[0, 0], W, b)
    assert y1.shape == (5,)
    # One token is another GEMM shape for the BLAS (another blocking, other roundings).
    np.testing.assert_allclose(y1, Y[0, 0], rtol=1e-6, atol=1e-6)


def test_row_strided_arrays_run_without_a_copy():
    """A view of every other row (row stride 2 x cols) is a valid row-major tensor."""
    rng = np.random.default_rng(4)
    big = random(rng, (10, 8), "float32")
    X = big[::2]
    W = random(rng, (3, 8), "float32")
    out = np.zeros((10, 3), np.float32)[::2]
    epigemm.linear_fprop(X, W, out=out)
    np.testing.assert_array_equal(out, epigemm.linear_fprop(np.ascontiguousarray(X), W))


def test_out_is_written_in_place():
    rng = np.random.default_rng(5)
    X, W = random(rng, (4, 6), "float32"), random(rng, (3, 6), "float32")
    out, pre = np.empty((4, 3), np.float32), np.empty((4, 3), np.float32)
    y, p = epigemm.linear_fprop(X, W, activation="gelu_tanh", out=out, preact_out=pre)
    assert y is out and p is pre
    assert epigemm.linear_fprop(X, W, activation="gelu_tanh", save_preact=False).shape == (4, 3)


def sentinel(shape, dtype=np.float32):
    return np.full(shape, 7.25, dtype)


def expect_error(cls, pattern, call, *outputs):
    before = [o.copy() for o in outputs]
    with pytest.raises(cls, match=pattern) as info:
        call()
    for o, b in zip(outputs, before):
        np.testing.assert_array_equal(o, b)  # outputs untouched
    assert isinstance(info.value, epigemm.Error) and info.value.message == str(info.value)
    return info.value


def test_wrong_shapes_raise_the_library_message():
    rng = np.random.default_rng(6)
    X, W = random(rng, (5, 7), "float32"), random(rng, (3, 6), "float32")
    out = sentinel((5, 3))
    e = expect_error(epigemm.InvalidValueError, "W has 6 columns.*in_features = 7",
                     lambda: epigemm.linear_fprop(X, W, out=out), out)
    assert e.status == 1 and isinstance(e, ValueError)
    W = random(rng, (3, 7), "float32")
    bias = random(rng, (4,), "float32")
    expect_error(epigemm.InvalidValueError, "bias has 4 elements",
                 lambda: epigemm.linear_fprop(X, W, bias, out=out), out)
    out_bad = sentinel((5, 4))
    expect_error(epigemm.InvalidValueError, "Y has 4 columns; fprop needs out_features = 3",
                 lambda: epigemm.linear_fprop(X, W, out=out_bad), out_bad)
    dY, dX, g = random(rng, (5, 3), "float32"), sentinel((5, 7)), sentinel((6,))
    expect_error(epigemm.InvalidValueError, "bias_grad has 6 elements",
                 lambda: epigemm.linear_dgrad(dY, W, preact=random(rng, (5, 7), "float32"),
                                              activation="gelu_tanh", bias_grad=g, out=dX), dX, g)


def test_gemm_k_mismatch_is_refused_before_outputs_are_allocated():
    """D is gemm_n x gemm_m whatever gemm_k is: operands whose gemm_k disagree are refused with
    the library's message before D, aux or bias_grad is allocated. Here D would be 2^31 x 2^31
    (A and B hold no memory: a shape with no elements and a broadcast view)."""
    A = np.empty((2 ** 31, 0), np.float32)  # transa = T: gemm_m = 2^31, gemm_k = 0
    B = np.broadcast_to(np.float32(0), (2 ** 31, 1))  # transb = N: gemm_k = 1, gemm_n = 2^31
    for epilogue in ("default", "gelu_aux", "bgradb"):
        expect_error(epigemm.InvalidValueError,
                     r"^B has 1 rows; transb = N needs gemm_k = 0 \(the rows of A, transa = T\)$",
                     lambda: epigemm.gemm(A, B, transa=True, epilogue=epilogue))
    A, D = np.ones((3, 4), np.float32), sentinel((5, 3))
    expect_error(epigemm.InvalidValueError,
                 r"^B has 2 rows; transb = N needs gemm_k = 3 \(the columns of A, transa = N\)$",
                 lambda: epigemm.gemm(A, np.ones((5, 2), np.float32), D), D)
    expect_error(epigemm.InvalidValueError,
                 r"^B has 2 columns; transb = T needs gemm_k = 4 \(the rows of A, transa = T\)$",
                 lambda: epigemm.gemm(A, np.ones((2, 5), np.float32), transa=True, transb=True))
    # An operand that is not 2-d is left to the extension's own message.
    expect_error(epigemm.InvalidValueError, r"B has shape \(1, 5, 2\); expected a 2-d array",
                 lambda: epigemm.gemm(A, np.ones((1, 5, 2), np.float32)))


@pytest.mark.parametrize("transa", [False, True])
@pytest.mark.parametrize("transb", [False, True])
def test_gemm_k_message_is_the_library_s(transa, transb, monkeypatch):
    """The package's early gemm_k check says what the library says of the same operands (its check
    switched off, the call reaches the library, whose message must be the same)."""
    from epigemm import _ops
    A = np.ones((3, 4), np.float32)  # op(A): gemm_k = 3 (transa = N) or 4 (transa = T)
    B = np.ones((2, 5), np.float32) if transb else np.ones((5, 2), np.float32)  # gemm_k = 2
    call = lambda: epigemm.gemm(A, B, transa=transa, transb=transb)  # noqa: E731
    with pytest.raises(epigemm.InvalidValueError) as ours:
        call()
    monkeypatch.setattr(_ops, "_check_gemm_k", lambda *args: None)
    with pytest.raises(epigemm.InvalidValueError) as library:
        call()
    assert "needs gemm_k" in str(library.value) and str(ours.value) == str(library.value)


def test_wrong_dtypes():
    X = np.ones((4, 6))  # float64
    W = np.ones((3, 6), np.float32)
    out = sentinel((4, 3))
    expect_error(epigemm.InvalidValueError, "X has dtype float64; expected float32, float16 or bfloat16",
                 lambda: epigemm.linear_fprop(X, W, out=out), out)
    expect_error(epigemm.InvalidValueError, "W",
                 lambda: epigemm.linear_fprop(X.astype(np.float32), W.astype(np.float16), out=out), out)
    expect_error(epigemm.InvalidValueError, "int",
                 lambda: epigemm.linear_fprop(X.astype(np.float32), W.astype(np.int32), out=out), out)


def test_non_contiguous_arrays():
    rng = np.random.default_rng(7)
    X, W = random(rng, (6, 4), "float32"), random(rng, (3, 4), "float32")
    out = sentinel((4, 3))
    expect_error(epigemm.InvalidValueError, "X has shape \\(4, 6\\) and strides \\(1, 4\\).*unit stride",
                 lambda: epigemm.linear_fprop(X.T, random(rng, (3, 6), "float32"), out=out), out)
    expect_error(epigemm.InvalidValueError, "W has shape \\(3, 2\\) and strides \\(4, 2\\)",
                 lambda: epigemm.linear_fprop(X[:, :2], W[:, ::2], out=sentinel((6, 3))))
    X3 = random(rng, (2, 4, 4), "float32")[:, ::2]  # strides (16, 8, 1): rows 8 apart, flattened
    assert epigemm.linear_fprop(X3, W).shape == (2, 2, 3)
    X3 = random(rng, (4, 2, 4), "float32").transpose(1, 0, 2)  # rows of 4 at strides (4, 8)
    expect_error(epigemm.InvalidValueError, "cannot be flattened", lambda: epigemm.linear_fprop(X3, W))
    b = random(rng, (6,), "float32")[::2]
    expect_error(epigemm.InvalidValueError, "bias has stride 2",
                 lambda: epigemm.linear_fprop(X, W, b, out=sentinel((6, 3))))


def test_negative_strides_are_refused_and_nothing_is_written():
    """Rows at decreasing addresses (a reversed view) are refused, inputs and outputs alike: read
    as packed rows they would be read and written outside the array."""
    X, W = np.arange(12, dtype=np.float32).reshape(4, 3), np.eye(3, dtype=np.float32)
    out = sentinel((4, 3))
    expect_error(epigemm.InvalidValueError, r"X has shape \(4, 3\) and strides \(-3, 1\).*positive row stride",
                 lambda: epigemm.linear_fprop(X[::-1], W, out=out), out)
    expect_error(epigemm.InvalidValueError, r"W has shape \(3, 3\) and strides \(-3, 1\)",
                 lambda: epigemm.linear_fprop(X, W[::-1], out=out), out)
    X3 = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    expect_error(epigemm.InvalidValueError, r"X has shape \(2, 4, 3\) and strides \(12, -3, 1\)",
                 lambda: epigemm.linear_fprop(X3[:, ::-1], W))
    base = sentinel((12, 3))
    expect_error(epigemm.InvalidValueError, r"out has shape \(4, 3\) and strides \(-3, 1\)",
                 lambda: epigemm.linear_fprop(X, W, out=base[4:8][::-1]), base)
    dX = sentinel((8, 3))
    expect_error(epigemm.InvalidValueError, r"out has shape \(4, 3\) and strides \(-6, 1\)",
                 lambda: epigemm.linear_dgrad(X, W, out=dX[::-2]), dX)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_features_follow_the_degenerate_sizes(dtype):
    """NumPy gives arrays without elements zero strides; the calls still mean what
    conventions.md's degenerate sizes say: in_features = 0 (gemm_k = 0) gives Y = act(bias),
    out_features = 0 an empty Y, and the bias gradients of empty sums are zeros."""
    rng = rng_for("empty", dtype)
    bias = random(rng, (5,), dtype)
    X, W = np.zeros((4, 0), np_dtype(dtype)), np.zeros((5, 0), np_dtype(dtype))
    Y, pre = epigemm.linear_fprop(X, W, bias, activation="relu")
    np.testing.assert_array_equal(f64(pre), np.broadcast_to(f64(bias), (4, 5)))
    np.testing.assert_array_equal(f64(Y), np.maximum(np.broadcast_to(f64(bias), (4, 5)), 0.0))
    assert epigemm.linear_fprop(random(rng, (4, 3), dtype), np.zeros((0, 3), np_dtype(dtype))).shape == (4, 0)
    dW, g = epigemm.linear_wgrad(X, random(rng, (4, 5), dtype), bias_grad=True)
    assert dW.shape == (5, 0) and g.shape == (5,)
    dX, g = epigemm.linear_dgrad(np.zeros((4, 0), np_dtype(dtype)), np.zeros((0, 6), np_dtype(dtype)),
                                 preact=random(rng, (4, 6), dtype), activation="silu", bias_grad=True)
    np.testing.assert_array_equal(f64(dX), np.zeros((4, 6)))
    np.testing.assert_array_equal(f64(g), np.zeros(6))
    D = epigemm.gemm(np.empty((0, 3), np_dtype(dtype)), np.empty((4, 0), np_dtype(dtype)))  # gemm_k = 0
    np.testing.assert_array_equal(f64(D), np.zeros((4, 3)))


def test_leading_dimensions_of_outputs_and_tokens_must_match():
    """The library sees the product of the leading dimensions (the tokens); the layout of the
    tokens is checked here: an out= of other leading dimensions is refused, not filled."""
    rng = np.random.default_rng(9)
    X, W = random(rng, (2, 3, 4), "float32"), random(rng, (5, 4), "float32")
    out = sentinel((3, 2, 5))
    expect_error(epigemm.InvalidValueError, r"out has shape \(3, 2, 5\); expected the leading dimensions of X "
                 r"\(2, 3, 4\): \(2, 3\)", lambda: epigemm.linear_fprop(X, W, out=out), out)
    pre = sentinel((6, 5))
    expect_error(epigemm.InvalidValueError, "preact_out has shape \\(6, 5\\)",
                 lambda: epigemm.linear_fprop(X, W, activation="relu", preact_out=pre), pre)
    dY = random(rng, (3, 2, 5), "float32")
    expect_error(epigemm.InvalidValueError, "dY has shape \\(3, 2, 5\\); expected the leading dimensions of X",
                 lambda: epigemm.linear_wgrad(X, dY))
    dX = sentinel((6, 4))
    expect_error(epigemm.InvalidValueError, "out has shape \\(6, 4\\); expected the leading dimensions of dY",
                 lambda: epigemm.linear_dgrad(dY, W, out=dX), dX)
    assert epigemm.linear_fprop(X, W, out=np.empty((2, 3, 5), np.float32)).shape == (2, 3, 5)


def test_weights_must_be_two_dimensional():
    X = np.ones((4, 3), np.float32)
    out = sentinel((4, 1))
    expect_error(epigemm.InvalidValueError, "W has 1 dimensions; expected 2",
                 lambda: epigemm.linear_fprop(X, np.ones(3, np.float32), out=out), out)
    g = sentinel((4,))
    expect_error(epigemm.InvalidValueError, "out has 1 dimensions; expected 2",
                 lambda: epigemm.linear_wgrad(X, np.ones((4, 4), np.float32), out=g), g)


def test_python_arguments_raise_epigemm_errors():
    A = np.ones((3, 4), np.float32)
    for epilogue in (42, "bias_grad", 1.5, True):
        with pytest.raises(epigemm.InvalidValueError, match="epilogue is .*; expected an Epilogue or one of"):
            epigemm.gemm(A, A, transb=True, epilogue=epilogue)
    with pytest.raises(epigemm.InvalidValueError, match="alpha is 'x'; expected a real number"):
        epigemm.gemm(A, A, transb=True, alpha="x")
    with pytest.raises(epigemm.InvalidValueError, match="alpha is 1j; expected a real number"):
        epigemm.gemm(A, A, transb=True, alpha=1j)
    with pytest.raises(epigemm.InvalidValueError, match=r"beta is 1e\+300, which float32 rounds to Inf"):
        epigemm.gemm(A, A, np.zeros((3, 3), np.float32), transb=True, beta=1e300)
    assert epigemm.gemm(A, A, transb=True, epilogue=int(epigemm.Epilogue.DEFAULT))[0, 0] == 3.0
    X, W = np.ones((3, 4), np.float32), np.ones((2, 4), np.float32)
    for bad in (None, 2, "yes", np.array([1, 0])):
        with pytest.raises(epigemm.InvalidValueError, match="allow_tf32 is .*; expected False or True"):
            epigemm.linear_fprop(X, W, allow_tf32=bad)
        with pytest.raises(epigemm.InvalidValueError, match="accumulate is .*; expected False or True"):
            epigemm.linear_wgrad(X, np.ones((3, 2), np.float32), out=np.zeros((2, 4), np.float32), accumulate=bad)
    with pytest.raises(epigemm.InvalidValueError, match="transa is .*; expected False/True or 'N'/'T'"):
        epigemm.gemm(A, A, transa=np.array([1, 0]), transb=True)
    with pytest.raises(epigemm.InvalidValueError, match=r"activation is \['relu'\]; expected None, 'identity'"):
        epigemm.linear_fprop(X, W, activation=["relu"])
    for good in (1, np.True_, True):
        assert epigemm.linear_fprop(X, W, allow_tf32=good)[0, 0] == 4.0
    with pytest.raises(epigemm.InvalidValueError, match="save_preact is .*; expected False or True"):
        epigemm.linear_fprop(X, W, activation="relu", save_preact=np.array([1, 0]))
    with pytest.raises(epigemm.InvalidValueError, match="X is a builtins.list; expected an array"):
        epigemm.linear_fprop([[1.0] * 4] * 3, W)
    with pytest.raises(epigemm.InvalidValueError, match="X has 33 dimensions; expected at most 32"):
        epigemm.linear_fprop(np.ones((1,) * 32 + (4,), np.float32), W)
    dX, g = sentinel((3, 4)), sentinel((4,))
    expect_error(epigemm.InvalidValueError, "preact is missing with bias_grad",
                 lambda: epigemm.linear_dgrad(np.ones((3, 2), np.float32), np.ones((2, 4), np.float32),
                                              bias_grad=g, out=dX), dX, g)


def test_read_only_output_is_refused():
    rng = np.random.default_rng(8)
    X, W = random(rng, (3, 4), "float32"), random(rng, (2, 4), "float32")
    out = sentinel((3, 2))
    out.flags.writeable = False
    expect_error(epigemm.InvalidValueError, "out is a read-only array", lambda: epigemm.linear_fprop(X, W, out=out))


class DlpackOnly:
    """An array that only exports DLPack (as JAX's do): the package's generic DLPack path."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class CopyingExporter(DlpackOnly):
    """Exports a new copy each time, owned by the capsule alone: its memory lives as long as the
    import of the capsule does. `copies` finalizes each copy, so a test can see when it was freed."""

    def __init__(self, a):
        super().__init__(a)
        self.freed = []

    def __dlpack__(self, **kwargs):
        import weakref

        copy = np.array(self.a, copy=True)
        index = len(self.freed)
        self.freed.append(False)
        weakref.finalize(copy, self.freed.__setitem__, index, True)
        return copy.__dlpack__(**kwargs)


def test_read_only_dlpack_output_is_refused_and_not_written():
    rng = np.random.default_rng(8)
    X, W = random(rng, (3, 4), "float32"), random(rng, (2, 4), "float32")
    storage = bytes(3 * 2 * 4)  # immutable memory behind a read-only array
    out = np.frombuffer(storage, np.float32).reshape(3, 2)
    expect_error(epigemm.InvalidValueError, "out is a read-only array",
                 lambda: epigemm.linear_fprop(X, W, out=DlpackOnly(out)))
    assert storage == bytes(3 * 2 * 4)
    written = np.zeros((3, 2), np.float32)
    epigemm.linear_fprop(DlpackOnly(X), DlpackOnly(W), out=DlpackOnly(written))
    assert_within(written, f64(X) @ f64(W).T, 1e-5 * np.ones((3, 2)), "out through DLPack")


def test_dlpack_import_keeps_an_exported_copy_alive():
    import gc

    exporter = CopyingExporter(np.arange(12, dtype=np.float32).reshape(3, 4))
    described = epigemm._epigemm.dlpack_describe(exporter)
    gc.collect()
    assert exporter.freed == [False], "the copy was freed while its description was in use"
    del described
    gc.collect()
    assert exporter.freed == [True]
    # Through a call: the result is that of the copies, which stayed valid throughout.
    rng = np.random.default_rng(9)
    X, W = random(rng, (5, 300000), "float32"), random(rng, (3, 300000), "float32")
    Y = epigemm.linear_fprop(CopyingExporter(X), CopyingExporter(W), out=np.empty((5, 3), np.float32))
    want = f64(X) @ f64(W).T
    assert_within(Y, want, 1e-4 * np.abs(f64(X)) @ np.abs(f64(W)).T, "Y from copying exporters")


def test_buffer_exports_are_released_after_the_call():
    import array

    X = array.array("f", [1.0] * 12)  # 3 x 4 through the buffer protocol, then viewed as such
    Xv = memoryview(X).cast("B").cast("f", (3, 4))
    W = np.ones((2, 4), np.float32)
    Y = epigemm.linear_fprop(Xv, W, out=np.empty((3, 2), np.float32))
    assert np.array_equal(Y, np.full((3, 2), 4.0, np.float32))
    Xv.release()
    X.append(2.0)  # BufferError if the call had kept an export of X


def test_scalars_are_what_float32_makes_of_them():
    """alpha and beta are float32 in the C API: a value float32 rounds to its largest finite value
    is taken (3.4028235e38, float32's largest as printed), one it rounds to Inf or, not being 0,
    to 0 is refused (a tiny alpha must not silently leave the product, and its NaNs, out)."""
    A = np.ones((1, 2), np.float32)  # column-major 2 x 1: D = alpha A A^T, alpha in each element
    D = epigemm.gemm(A, A, transb=True, alpha=3.4028235e38)
    assert D.shape == (2, 2) and np.all(D == np.finfo(np.float32).max)
    D = epigemm.gemm(A, A, transb=True, alpha=1e-45)
    assert np.all(D == np.float32(1e-45)) and np.all(D > 0)
    for value, rounds_to in ((3.5e38, "Inf"), (-1e39, "Inf"), (10 ** 400, "Inf"), (1e-46, "0"), (-2.0 ** -150, "0")):
        D = sentinel((2, 2))
        expect_error(epigemm.InvalidValueError, re.escape(f"alpha is {value!r}, which float32 rounds to {rounds_to}"),
                     lambda: epigemm.gemm(np.full((1, 2), np.nan, np.float32), A, D, transb=True, alpha=value), D)


def test_numpy_scalars_and_flags():
    X, W = np.ones((3, 4), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(epigemm.InvalidValueError, match="X has 0 dimensions; expected at least 1"):
        epigemm.linear_fprop(np.float32(1.0), W)
    dY = np.ones((3, 2), np.float32)
    for flag in (np.True_, True):
        dX, db = epigemm.linear_dgrad(dY, W, preact=X, activation="relu", bias_grad=flag)
        assert np.all(db == 6.0)
        dW, db = epigemm.linear_wgrad(X, dY, bias_grad=flag)
        assert np.all(db == 3.0)
    for flag in (np.False_, False):
        assert isinstance(epigemm.linear_dgrad(dY, W, bias_grad=flag), np.ndarray)
        assert isinstance(epigemm.linear_wgrad(X, dY, bias_grad=flag), np.ndarray)
    with pytest.raises(epigemm.InvalidValueError, match="preact_out is given with activation 'identity'"):
        epigemm.linear_fprop(X, W, activation="identity", preact_out=np.zeros((3, 2), np.float32))


def test_unknown_activation_and_missing_preact():
    X, W = np.ones((3, 4), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(epigemm.InvalidValueError, match="activation is 'tanh'"):
        epigemm.linear_fprop(X, W, activation="tanh")
    with pytest.raises(epigemm.InvalidValueError, match="preact is missing with activation gelu_tanh"):
        epigemm.linear_dgrad(np.ones((3, 2), np.float32), np.ones((2, 4), np.float32), activation="gelu_tanh")


def test_backend_choice_and_last_backend():
    X, W = np.ones((3, 4), np.float32), np.ones((2, 4), np.float32)
    epigemm.linear_fprop(X, W, backend="reference")
    name, reason = epigemm.last_backend()
    assert name == "reference" and reason == "requested: reference"
    epigemm.linear_fprop(X, W)
    name, reason = epigemm.last_backend()
    assert name in ("cpu", "reference") and reason.startswith("auto: ")
    assert epigemm.backend_usable("reference") and epigemm.backend_compiled("reference")
    assert epigemm.last_backend() == (name, reason)  # the queries are not calls
    if not epigemm.backend_usable("cuda"):
        out = sentinel((3, 2))
        expect_error(epigemm.NotSupportedError, "backend cuda",
                     lambda: epigemm.linear_fprop(X, W, out=out, backend="cuda"), out)
    with pytest.raises(epigemm.InvalidValueError, match="backend is 'gpu'"):
        epigemm.linear_fprop(X, W, backend="gpu")
    with pytest.raises(epigemm.InvalidValueError):
        epigemm.linear_fprop(X, np.ones((2, 3), np.float32), backend="reference")
    assert epigemm.last_backend() == (name, reason)  # a refused call leaves the last successful one's


def test_accumulate_needs_out_and_beta_needs_d():
    X = np.ones((3, 4), np.float32)
    with pytest.raises(epigemm.InvalidValueError, match="accumulate=True without out"):
        epigemm.linear_wgrad(X, np.ones((3, 2), np.float32), accumulate=True)
    with pytest.raises(epigemm.InvalidValueError, match="beta is 1.0 without D"):
        epigemm.gemm(X, X, transb=True, beta=1.0)


def test_each_thread_has_its_own_context():
    rng = np.random.default_rng(9)
    X, W = random(rng, (64, 32), "float32"), random(rng, (16, 32), "float32")
    want = epigemm.linear_fprop(X, W)
    results, errors = [], []

    def work():
        for _ in range(20):
            results.append(epigemm.linear_fprop(X, W))
        try:
            epigemm.linear_fprop(X, W[:, :5].copy())
        except epigemm.InvalidValueError as e:
            errors.append(str(e))

    assert failures_in_threads(work, 4) == []
    assert len(results) == 80 and all(np.array_equal(r, want) for r in results)
    assert errors == ["W has 5 columns; fprop needs in_features = 32 (the columns of X)"] * 4


def test_version_is_the_header_version():
    header = pathlib.Path(__file__).resolve().parents[2] / "include" / "epigemm" / "epigemm.h"
    parts = [re.search(rf"#define EPIGEMM_VERSION_{p} (\d+)", header.read_text()).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert epigemm.__version__ == ".".join(parts)
    assert importlib.metadata.version("epigemm") == epigemm.__version__
