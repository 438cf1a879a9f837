// The activation functions of the epilogues and their derivatives, written once for the host
// (reference backend in double, cpu backend in float and in SIMD lanes) and the device (CUDA
// kernels, in float). Formulas and edge cases: docs/conventions.md, "Activations".
//
// Each activation is a functor (Identity, GeluTanh, GeluErf, Relu, Silu at the end of this file)
// with forward(x) and derivative(x), templates over the value type. A backend instantiates its
// kernels once per functor (visit_activation); adding an activation is one functor here, one line
// in EPIGEMM_FOR_EACH_ACTIVATION, its value in epigemm.h, and its golden values in the tests.
//
// GELU (tanh form):
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
// exp(-2u) overflows.) Both take exp(+-2u) as 2^(+-2u log2(e)), with log2(e) folded into the
// constant: on the GPU 2^x is one hardware instruction, where exp first scales its argument in
// extra precision, and these kernels are bound by their instruction count.
#pragma once

#include <cmath>

#include "core/host_device.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

template <typename T>
struct GeluTanhConstants {
  // The formula's constants, in double.
  static constexpr double kSqrt2OverPi = 0.7978845608028654;          // sqrt(2 / pi)
  static constexpr double kTwoLog2eSqrt2OverPi = 2.302208198144325;   // 2 log2(e) sqrt(2 / pi)
  static constexpr double kCubic = 0.044715;
  // What the evaluations multiply by, each product formed in double and rounded once to T, so that
  // 2u log2(e) is x (a + b x^2) and the derivative's last factor c + d x^2: one multiply-add each,
  // the constant products not evaluated per element.
  static constexpr T two_log2e_sqrt_2_over_pi = T(kTwoLog2eSqrt2OverPi);                  // a
  static constexpr T two_log2e_sqrt_2_over_pi_cubic = T(kTwoLog2eSqrt2OverPi * kCubic);   // b
  static constexpr T two_sqrt_2_over_pi = T(2.0 * kSqrt2OverPi);                          // c
  static constexpr T six_cubic_sqrt_2_over_pi = T(6.0 * kCubic * kSqrt2OverPi);           // d
  // Beyond this |x|, s is 0 or 1 to every precision we compute in (|2u| > 7e10), so the limits
  // are exact: gelu(x) = max(x, -0) and gelu'(x) = (x > 0). Taking them explicitly keeps +-Inf
  // and huge x from producing Inf * 0 = NaN through x^3.
  static constexpr T saturation = T(1.0e4);
};

// The functions below are templates over T so that one formula serves float and double on the
// host and the device, and also a SIMD vector of floats (the cpu backend's AVX2 and AVX-512
// kernels). Such a vector type specializes ScalarOf (its lane type, for the constants) and
// overloads exp(), is_nan() and where() for its lanes, and the comparisons < and >
// (returning its mask type); the limits are therefore written as selects, not branches.
template <typename T>
struct ScalarOf {
  using type = T;
};

// if_true where condition holds, else if_false (both already evaluated).
template <typename T>
EPIGEMM_HOST_DEVICE T where(bool condition, T if_true, T if_false) {
  return condition ? if_true : if_false;
}

// Whether x is NaN (x != x: false for every other value, Inf included).
template <typename T>
EPIGEMM_HOST_DEVICE bool is_nan(T x) {
  return x != x;
}

// 1 / x and 2^x for the float evaluations. On the device the hardware's approximations alone
// (rcp.approx.ftz within 1 ulp, ex2.approx.ftz within 2 ulp): without -ftz the compiler wraps each
// in range fix-ups for subnormal inputs and results (four to six more instructions per element,
// in kernels that are bound by their instruction count); here a result below FLT_MIN is 0, which
// docs/conventions.md allows (below 3e-37 for the activations, 3e-36 for gelu_tanh', whose
// 2^(-|2u| log2 e) reaches FLT_MIN first). On the host the language's own; on SIMD lanes their
// operators and exp2.
template <typename T>
EPIGEMM_HOST_DEVICE T reciprocal(T x) {
  return T(1) / x;
}
EPIGEMM_HOST_DEVICE float reciprocal(float x) {
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / x;
#endif
}
// -|x| (NaN stays NaN): a select on SIMD lanes; in float and double the sign bit cleared, which the
// device folds into the instruction that reads it.
template <typename T>
EPIGEMM_HOST_DEVICE T minus_magnitude(T x) {
  return where(x < T(0), x, T(0) - x);
}
EPIGEMM_HOST_DEVICE float minus_magnitude(float x) { return -std::fabs(x); }
EPIGEMM_HOST_DEVICE double minus_magnitude(double x) { return -std::fabs(x); }

// |x| (NaN stays NaN): the same select on SIMD lanes; in float and double the sign bit cleared
// (one instruction on the device, where the select is three: a compare, a negation, a select).
template <typename T>
EPIGEMM_HOST_DEVICE T magnitude(T x) {
  return where(x < T(0), T(0) - x, x);
}
EPIGEMM_HOST_DEVICE float magnitude(float x) { return std::fabs(x); }
EPIGEMM_HOST_DEVICE double magnitude(double x) { return std::fabs(x); }

// x limited to [low, high] (low <= high), NaN stays NaN: selects on the host and the SIMD lanes;
// on the device the NaN-propagating min and max (max.NaN / min.NaN, sm_80 and later: one
// instruction each where a compare and a select are two). The activations clamp their argument
// at the saturation threshold instead of selecting their limit afterwards where the formula
// itself gives the limit there.
template <typename T>
EPIGEMM_HOST_DEVICE T at_least(T x, T low) {
  return where(x < low, low, x);
}
template <typename T>
EPIGEMM_HOST_DEVICE T at_most(T x, T high) {
  return where(x > high, high, x);
}
EPIGEMM_HOST_DEVICE float at_least(float x, float low) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(low));
  return r;
#else
  return where(x < low, low, x);
#endif
}
EPIGEMM_HOST_DEVICE float at_most(float x, float high) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(high));
  return r;
#else
  return where(x > high, high, x);
#endif
}

// x / y: on the device x times the reciprocal above (within 2 ulp; 0 where 1 / y is below
// FLT_MIN), elsewhere the division.
template <typename T>
EPIGEMM_HOST_DEVICE T quotient(T x, T y) {
  return x / y;
}
EPIGEMM_HOST_DEVICE float quotient(float x, float y) {
#ifdef __CUDA_ARCH__
  return x * reciprocal(y);
#else
  return x / y;
#endif
}
template <typename T>
EPIGEMM_HOST_DEVICE T power_of_two(T x) {
  using std::exp2;
  return exp2(x);
}
EPIGEMM_HOST_DEVICE float power_of_two(float x) {
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return std::exp2(x);
#endif
}

// e^x. On the device 2^(x log2 e) from the hardware's ex2.approx (power_of_two above): the
// library's expf first reduces its argument in extra precision and fixes up the range, about
// twice the instructions, in kernels bound by their instruction count (with it, silu's ACT_BIAS
// kernel reached 0.90 of gelu_tanh's fraction of copy bandwidth on the H200 for the (8192, 16384,
// 4096) fprop, benchmark of 2026-12-01 13:10 UTC). The cost is the rounding of
// x log2 e, a relative error near |x| 6e-8 in the result (|x| <= 88 where it is finite). On the
// host the language's exp (float, double and the SIMD lanes' overload).
template <typename T>
EPIGEMM_HOST_DEVICE T exponential(T x) {
  using std::exp;
  return exp(x);
}
EPIGEMM_HOST_DEVICE float exponential(float x) {
#ifdef __CUDA_ARCH__
  return power_of_two(x * 1.44269504088896340736f);  // log2(e)
#else
  return std::exp(x);
#endif
}

// t = exp(-|a|) and r = 1 / (1 + t) for a = 2u; sigmoid(a) = where(a < 0, t r, r).
template <typename T>
struct SigmoidParts {
  T t;
  T r;
  T sigmoid;
};

// From t = exp(-|a|) in (0, 1] (NaN stays NaN), computed by the caller.
template <typename T>
EPIGEMM_HOST_DEVICE SigmoidParts<T> sigmoid_parts_from(T a, T t) {
  const T r = reciprocal(T(1) + t);  // 1 + t in [1, 2]: no range to fix up
  return SigmoidParts<T>{t, r, where(a < T(0), t * r, r)};
}

template <typename T>
EPIGEMM_HOST_DEVICE SigmoidParts<T> sigmoid_parts(T a) {
  return sigmoid_parts_from(a, exponential(minus_magnitude(a)));
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)).  NaN in, NaN out.
template <typename T>
EPIGEMM_HOST_DEVICE T gelu_tanh(T x) {
  using C = GeluTanhConstants<typename ScalarOf<T>::type>;
  // exp(-2u) = 2^(-2u log2(e)), the constant log2(e) folded into sqrt(2/pi)'s: as many roundings
  // as -2u itself.
  // -2u log2(e) = x (-a - b x^2): one multiply, one multiply-add and the multiply by x.
  const T minus_two_u_log2e =
      x * (T(-C::two_log2e_sqrt_2_over_pi) - C::two_log2e_sqrt_2_over_pi_cubic * (x * x));
  const T inside = quotient(x, T(1) + power_of_two(minus_two_u_log2e));
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
  const T two_u_log2e = x * (C::two_log2e_sqrt_2_over_pi + C::two_log2e_sqrt_2_over_pi_cubic * x2);
  const SigmoidParts<T> p = sigmoid_parts_from(
      two_u_log2e, power_of_two(minus_magnitude(two_u_log2e)));
  // s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2), with s (1 - s) = (t r) r, t r being the
  // product sigmoid already has.
  const T x_s_one_minus_s = x * (p.t * p.r) * p.r;
  const T inside = p.sigmoid + x_s_one_minus_s * (C::two_sqrt_2_over_pi + C::six_cubic_sqrt_2_over_pi * x2);
  // Beyond the saturation s is exactly 0 or 1, the limits of gelu_tanh' themselves; taking s there
  // (one compare and one select) keeps x s (1 - s) = Inf * 0 at +-Inf out.
  return where(magnitude(x) > C::saturation, p.sigmoid, inside);
}


// ---- the other activations ----------------------------------------------------------------------
//
// Beyond |x| = 1e4 each of them is at its limit to every precision we compute in; the selects
// at the limits keep +-Inf from turning into Inf * 0 = NaN. NaN passes through every formula (and
// every select, whose comparisons are false for NaN) as NaN.
template <typename T>
struct ActivationLimits {
  static constexpr T saturation = T(1.0e4);
  static constexpr T inv_sqrt_2pi = T(0.39894228040143267794);   // 1 / sqrt(2 pi)
};

// The two pieces of gelu_erf and gelu_erf' (Phi, the normal distribution function):
//   tail   = Phi(-|x|) = 0.5 erfc(|x| / sqrt 2), the smaller of Phi(x) and 1 - Phi(x)
//   kernel = exp(-x^2 / 2)
// Phi(x) is then tail for x < 0 and 1 - tail otherwise, with no cancellation either side.
template <typename T>
struct NormalTail {
  T tail;
  T kernel;
};

// In double (the reference backend, the definition): libm's erfc and exp.
EPIGEMM_HOST_DEVICE NormalTail<double> normal_tail(double x) {
  using std::erfc;
  using std::exp;
  const double magnitude = x < 0.0 ? -x : x;
  return NormalTail<double>{0.5 * erfc(magnitude * 0.70710678118654752440), exp(-0.5 * x * x)};
}

// For the float evaluations (the cpu backend's scalar code and SIMD lanes, the CUDA kernels):
// tail = t R(t) kernel, t = 1 / (1 + p |x|) in (0, 1], where R(t) = tail / (t kernel) (which is
// erfcx(|x| / sqrt 2) / (2 t), smooth on [0, 1], from 0.5 p sqrt(2 / pi) at t = 0 to 0.5 at t = 1)
// is a polynomial of degree 9 fitted for least maximal relative error with p = 0.315 (a linear
// program on 4000 Chebyshev points with R(1) = 0.5, p chosen in steps of 0.005 for the smallest
// error as evaluated in float). The fit's relative error is below 1.9e-8 in exact arithmetic, so
// the float roundings decide: against long double, gelu_erf' is within 1.7e-7 absolute (the
// degree-7 fit before it: 4.2e-7; erff and expf, as PyTorch evaluates it: 1.3e-7) and gelu_erf
// within 8.5e-7 relative on |x| <= 4, where the exponent below decides. Degree 9 costs two fused
// multiply-adds per element more than degree 7: the float32 gradients of an MLP through gelu_erf
// stay within twice PyTorch's error (docs/dev/python-package.md), which degree 7 did not.
// kernel = 2^(-x^2 log2(e) / 2), whose exponent is rounded once more than x^2 (a relative error
// near 1e-7 x^2 / 2 in the far tail, where tail is below 1e-7 of its value at 0). One reciprocal
// and one exponential give both pieces, so gelu_erf' costs no more than gelu_erf
// (docs/dev/cuda_backend.md). The constant coefficient is moved by a few ulp so that R(1) is
// exactly 0.5 in float: tail(0) = 0.5 and gelu_erf'(0) = 1/2 exactly, as in double, with or
// without fused multiply-adds.
// NaN stays NaN (t is NaN); at +-Inf t = 0 and kernel = 0, so tail = 0.
template <typename T>
EPIGEMM_HOST_DEVICE NormalTail<T> normal_tail(T x) {
  const T t = reciprocal(T(1) + T(0.315f) * magnitude(x));
  const T kernel = power_of_two(x * (x * T(-0.721347511f)));  // -log2(e) / 2
  T r = T(-0.01966732f);
  r = r * t + T(0.0933436081f);
  r = r * t + T(-0.152696833f);
  r = r * t + T(0.0774256587f);
  r = r * t + T(-0.0116842128f);
  r = r * t + T(0.0612195097f);
  r = r * t + T(0.0874872953f);
  r = r * t + T(0.113239475f);
  r = r * t + T(0.125665992f);
  r = r * t + T(0.125666827f);
  return NormalTail<T>{t * r * kernel, kernel};
}

// gelu_erf(x) = 0.5 x (1 + erf(x / sqrt(2))) = x Phi(x), with Phi(x) from the tail on either side:
// the same value without the cancellation of 1 + erf(.) for negative x (gelu_erf(-5) = -1.4e-6
// would keep no correct digit in fp32 through 1 + erf). -0 below -1e4 (the limit from below):
// the argument is clamped there, where tail is already exactly 0 (kernel = 2^(-7e7)), so the
// formula gives -1e4 * 0 = -0 itself (at -Inf it would be -Inf * 0); +Inf gives Inf * (1 - 0).
template <typename T>
EPIGEMM_HOST_DEVICE T gelu_erf(T x) {
  using C = ActivationLimits<typename ScalarOf<T>::type>;
  const T xc = at_least(x, T(-C::saturation));
  const NormalTail<T> n = normal_tail(xc);
  return xc * where(xc < T(0), n.tail, T(1) - n.tail);
}

// gelu_erf'(x) = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi). The argument is clamped to [-1e4, 1e4],
// where tail and kernel are exactly 0: the formula gives 0 + (-1e4 * 0) = 0 below and
// 1 + 1e4 * 0 = 1 above, the limits (at +-Inf it would be Inf * 0).
template <typename T>
EPIGEMM_HOST_DEVICE T gelu_erf_grad(T x) {
  using C = ActivationLimits<typename ScalarOf<T>::type>;
  const T xc = at_most(at_least(x, T(-C::saturation)), T(C::saturation));
  const NormalTail<T> n = normal_tail(xc);
  return where(xc < T(0), n.tail, T(1) - n.tail) + xc * n.kernel * C::inv_sqrt_2pi;
}

// relu(x) = max(x, 0): x unless x < 0 (so NaN stays NaN and -0 stays -0).
template <typename T>
EPIGEMM_HOST_DEVICE T relu(T x) {
  return where(x < T(0), T(0), x);
}

// relu'(x) = 1 for x > 0, 0 for x <= 0 (0 at 0, as PyTorch), NaN for NaN.
template <typename T>
EPIGEMM_HOST_DEVICE T relu_grad(T x) {
  return where(x > T(0), T(1), where(is_nan(x), x, T(0)));
}

// silu(x) = x sigmoid(x) = x / (1 + exp(-x)). For x below about -88, exp(-x) overflows in float
// and the quotient is -0 where the exact value is below 1e-36 (on the device from -87.3 on, where
// the hardware's reciprocal of 1 + exp(-x) falls below FLT_MIN and is flushed to 0); -Inf
// (Inf / Inf) is taken by the select. On the device exp and the division are the hardware's
// approximations (exponential, quotient), as for gelu_tanh.
template <typename T>
EPIGEMM_HOST_DEVICE T silu(T x) {
  using C = ActivationLimits<typename ScalarOf<T>::type>;
  const T inside = quotient(x, T(1) + exponential(T(0) - x));
  return where(x < -C::saturation, T(0) * T(-1), inside);
}

// silu'(x) = s (1 + x (1 - s)) = s + x s (1 - s), s = sigmoid(x); s and s (1 - s) = t r^2 from
// sigmoid_parts (no overflow, no cancellation).
template <typename T>
EPIGEMM_HOST_DEVICE T silu_grad(T x) {
  using C = ActivationLimits<typename ScalarOf<T>::type>;
  const SigmoidParts<T> p = sigmoid_parts(x);
  const T inside = p.sigmoid + x * (p.t * p.r) * p.r;  // t r: the product sigmoid already has
  // Beyond the saturation s is exactly 0 or 1, the limits (as for gelu_tanh').
  return where(magnitude(x) > C::saturation, p.sigmoid, inside);
}

// identity'(x) = 1, NaN for NaN (NaN in gives NaN out for every derivative too).
template <typename T>
EPIGEMM_HOST_DEVICE T identity_grad(T x) {
  return where(is_nan(x), x, T(1));
}

// ---- the activations as functors ----------------------------------------------------------------

struct Identity {
  static constexpr epigemm_activation_t id = EPIGEMM_ACTIVATION_IDENTITY;
  template <typename T>
  EPIGEMM_HOST_DEVICE static T forward(T x) { return x; }
  template <typename T>
  EPIGEMM_HOST_DEVICE static T derivative(T x) { return identity_grad(x); }
};

struct GeluTanh {
  static constexpr epigemm_activation_t id = EPIGEMM_ACTIVATION_GELU_TANH;
  template <typename T>
  EPIGEMM_HOST_DEVICE static T forward(T x) { return gelu_tanh(x); }
  template <typename T>
  EPIGEMM_HOST_DEVICE static T derivative(T x) { return gelu_tanh_grad(x); }
};

struct GeluErf {
  static constexpr epigemm_activation_t id = EPIGEMM_ACTIVATION_GELU_ERF;
  template <typename T>
  EPIGEMM_HOST_DEVICE static T forward(T x) { return gelu_erf(x); }
  template <typename T>
  EPIGEMM_HOST_DEVICE static T derivative(T x) { return gelu_erf_grad(x); }
};

struct Relu {
  static constexpr epigemm_activation_t id = EPIGEMM_ACTIVATION_RELU;
  template <typename T>
  EPIGEMM_HOST_DEVICE static T forward(T x) { return relu(x); }
  template <typename T>
  EPIGEMM_HOST_DEVICE static T derivative(T x) { return relu_grad(x); }
};

struct Silu {
  static constexpr epigemm_activation_t id = EPIGEMM_ACTIVATION_SILU;
  template <typename T>
  EPIGEMM_HOST_DEVICE static T forward(T x) { return silu(x); }
  template <typename T>
  EPIGEMM_HOST_DEVICE static T derivative(T x) { return silu_grad(x); }
};

// The registry: every activation, as X(value, functor, name). The one list that the names, the
// validation and visit_activation follow.
#define EPIGEMM_FOR_EACH_ACTIVATION(X)                        \
  X(EPIGEMM_ACTIVATION_IDENTITY, ::epigemm::Identity, "identity")   \
  X(EPIGEMM_ACTIVATION_GELU_TANH, ::epigemm::GeluTanh, "gelu_tanh") \
  X(EPIGEMM_ACTIVATION_GELU_ERF, ::epigemm::GeluErf, "gelu_erf")    \
  X(EPIGEMM_ACTIVATION_RELU, ::epigemm::Relu, "relu")               \
  X(EPIGEMM_ACTIVATION_SILU, ::epigemm::Silu, "silu")

// Calls visitor(Functor{}) for the functor of a validated activation value.
template <typename Visitor>
decltype(auto) visit_activation(epigemm_activation_t activation, Visitor&& visitor) {
#define EPIGEMM_ACTIVATION_CASE(value, functor, name) \
  case value: return visitor(functor{});
  switch (activation) { EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_ACTIVATION_CASE) }
#undef EPIGEMM_ACTIVATION_CASE
  return visitor(Identity{});  // not reached: validation rejects values outside the list
}

}  // namespace epigemm
