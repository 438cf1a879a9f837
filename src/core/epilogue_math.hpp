// The activation functions of the epilogues, written once for the host (reference and CPU
// backends, in float or double) and the device (CUDA kernels, in float).
// Formulas: docs/conventions.md, "GELU". gelu_tanh is the tanh approximation of GELU used by
// transformer training frameworks; an erf GELU would sit beside it under its own name.
//
// Numerics: with u = sqrt(2/pi) (x + 0.044715 x^3) and s = sigmoid(2u) = 0.5 (1 + tanh(u)),
//   gelu_tanh(x)      = x s = x / (1 + exp(-2u))
//   gelu_tanh'(x)     = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// which are the tanh formulas rewritten with 1 + tanh(u) = 2 s and 1 - tanh(u)^2 = 4 s (1 - s).
// The sigmoid form has no cancellation for negative x, where 1 + tanh(u) loses every digit in
// fp32 (gelu_tanh(-5.5) would come out as 0 instead of -5.93e-9).
// gelu_tanh is x / (1 + exp(-2u)): one exponential, one addition, one division, nothing to
// subtract. For x below about -10.3 (2u < -88.7) exp(-2u) overflows to Inf in float and the
// quotient is -0, where the exact value has a magnitude below 3e-38 (about FLT_MIN): that is the
// only place it gives up digits, far under any tolerance. It costs a fifth less than the form below
// on the cpu backend's AVX-512 lanes, whose GELU passes are bound by this arithmetic
// (docs/dev/cpu_backend.md, "The kernels").
// gelu_tanh' needs s and s (1 - s), which come from t = exp(-|2u|) in (0, 1] and
// r = 1 / (1 + t): s = r for u >= 0 and t r for u < 0, s (1 - s) = t r^2 either way. One
// exponential and one reciprocal per element (the element-wise GPU kernels are bound by these
// instructions, not by memory, with more), no overflow (t <= 1) and no subtraction of nearly
// equal values. (The quotient form would need s (1 - s) = exp(-2u) s^2, which is Inf * 0 where
// exp(-2u) overflows.)
#pragma once

#include <cmath>

#include "core/host_device.hpp"

namespace epigemm {

template <typename T>
struct GeluTanhConstants {
  static constexpr T sqrt_2_over_pi = T(0.7978845608028654);  // sqrt(2 / pi)
  static constexpr T cubic = T(0.044715);
  // Beyond this |x|, s is 0 or 1 to every precision we compute in (|2u| > 7e10), so the limits
  // are exact: gelu(x) = max(x, -0) and gelu'(x) = (x > 0). Taking them explicitly keeps +-Inf
  // and huge x from producing Inf * 0 = NaN through x^3.
  static constexpr T saturation = T(1.0e4);
};

// The functions below are templates over T so that one formula serves float and double on the
// host and the device, and also a SIMD vector of floats (the cpu backend's AVX2 kernels). Such a
// vector type specializes ScalarOf (its lane type, for the constants) and overloads exp() and
// where() for its lanes; the saturation limits are therefore written as selects, not branches.
template <typename T>
struct ScalarOf {
  using type = T;
};

// if_true where condition holds, else if_false (both already evaluated).
template <typename T>
EPIGEMM_HOST_DEVICE T where(bool condition, T if_true, T if_false) {
  return condition ? if_true : if_false;
}

// t = exp(-|a|) and r = 1 / (1 + t) for a = 2u; sigmoid(a) = where(a < 0, t r, r).
template <typename T>
struct SigmoidParts {
  T t;
  T r;
  T sigmoid;
};

template <typename T>
EPIGEMM_HOST_DEVICE SigmoidParts<T> sigmoid_parts(T a) {
  using std::exp;
  const T minus_abs_a = where(a < T(0), a, T(0) - a);
  const T t = exp(minus_abs_a);  // in (0, 1]; NaN stays NaN
  const T r = T(1) / (T(1) + t);
  return SigmoidParts<T>{t, r, where(a < T(0), t * r, r)};
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)).  NaN in, NaN out.
template <typename T>
EPIGEMM_HOST_DEVICE T gelu_tanh(T x) {
  using std::exp;
  using C = GeluTanhConstants<typename ScalarOf<T>::type>;
  const T minus_two_u = T(-2) * C::sqrt_2_over_pi * (x + C::cubic * x * x * x);
  const T inside = x / (T(1) + exp(minus_two_u));
  // The limits come out of the quotient itself except at -Inf (Inf / Inf): for x > 1e4,
  // exp(-2u) is exactly 0 (-2u < -7e10, or -Inf once x^3 overflows) and the quotient is x, +Inf
  // included; for finite x < -1e4 it is x / Inf = -0. Only the one select is needed.
  return where(x < -C::saturation, T(0) * T(-1), inside);  // -0 is the limit from below
}

// gelu_tanh'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
template <typename T>
EPIGEMM_HOST_DEVICE T gelu_tanh_grad(T x) {
  using C = GeluTanhConstants<typename ScalarOf<T>::type>;
  const T x2 = x * x;
  const SigmoidParts<T> p = sigmoid_parts(T(2) * C::sqrt_2_over_pi * (x + C::cubic * x2 * x));
  const T s_one_minus_s = p.t * p.r * p.r;
  const T inside =
      p.sigmoid + T(2) * x * s_one_minus_s * C::sqrt_2_over_pi * (T(1) + T(3) * C::cubic * x2);
  return where(x > C::saturation, T(1), where(x < -C::saturation, T(0), inside));
}

}  // namespace epigemm
