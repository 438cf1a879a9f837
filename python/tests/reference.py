"""The float64 definitions the tests compare against (docs/conventions.md, "Epilogues", "GELU"),
and the error bound a computation in a given dtype must meet."""

import math

import numpy as np

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_C = 0.044715


def gelu_tanh(x):
    u = SQRT_2_OVER_PI * (x + GELU_C * x ** 3)
    return 0.5 * x * (1.0 + np.tanh(u))


def gelu_tanh_grad(x):
    u = SQRT_2_OVER_PI * (x + GELU_C * x ** 3)
    t = np.tanh(u)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)


# Unit roundoff of the stored result per dtype name; accumulation is at least fp32.
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
FP32_ROUNDOFF = 2.0 ** -24


def product_bound(dtype_name, k, magnitude):
    """The error allowed for a result of a k-term fp32 product stored in dtype_name, where
    `magnitude` is sum |a_i b_i| (+ |bias|): k fp32 roundings of the sum (a generous 4 k u32),
    the rounding of the result to the output dtype, and a small absolute floor for results
    near 0 whose rounding the relative terms do not cover (subnormal fp16)."""
    return (4.0 * max(k, 1) * FP32_ROUNDOFF + 2.0 * UNIT_ROUNDOFF[dtype_name]) * magnitude + 1e-6


def fprop(x, w, b=None, activation=None):
    """(Y, preact) in float64 for row-major x [tokens, in], w [out, in]."""
    pre = x @ w.T + (0.0 if b is None else b)
    y = gelu_tanh(pre) if activation == "gelu_tanh" else pre
    return y, pre


def dgrad(dy, w, pre=None, activation=None):
    """(dX, bias gradient of the previous layer) in float64."""
    g = dy @ w
    if activation == "gelu_tanh":
        g = g * gelu_tanh_grad(pre)
    return g, g.sum(axis=0)


def wgrad(x, dy):
    """(dW, bias gradient) in float64."""
    return dy.T @ x, dy.sum(axis=0)
