"""The float64 definitions the tests compare against (docs/conventions.md, "Epilogues",
"Activations"), and the error bound a computation in a given dtype must meet."""

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


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_erf_grad(x):
    return (0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
            + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def relu(x):
    return np.where(x > 0, x, 0.0)


def relu_grad(x):
    return np.where(x > 0, 1.0, 0.0)


def silu(x):
    return x / (1.0 + np.exp(-x))


def silu_grad(x):
    s = 1.0 / (1.0 + np.exp(-x))
    return s * (1.0 + x * (1.0 - s))


# activation name -> (act, act'); None is the identity.
ACTIVATIONS = {
    None: (lambda x: x, lambda x: np.ones_like(x)),
    "gelu_tanh": (gelu_tanh, gelu_tanh_grad),
    "gelu_erf": (gelu_erf, gelu_erf_grad),
    "relu": (relu, relu_grad),
    "silu": (silu, silu_grad),
}

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
    return ACTIVATIONS[activation][0](pre), pre


def dgrad(dy, w, pre=None, activation=None):
    """(dX, bias gradient of the previous layer) in float64."""
    g = dy @ w
    if activation is not None:
        g = g * ACTIVATIONS[activation][1](pre)
    return g, g.sum(axis=0)


def wgrad(x, dy):
    """(dW, bias gradient) in float64."""
    return dy.T @ x, dy.sum(axis=0)
