// The activations of the epilogues and their derivatives, written here from docs/conventions.md
// ("Activations") for the tool's own computations: the naive GEMM of `epigemm check` (long
// double) and the demo's loss in double. Independent of the library's functors, so that the
// tool checks the library against the formulas, not against itself.
#pragma once

#include <cmath>

#include "epigemm/epigemm.h"

namespace epigemm_cli {

// act(x). gelu_erf as 0.5 x erfc(-x / sqrt 2): the same value as 0.5 x (1 + erf(x / sqrt 2))
// without the cancellation of 1 + erf for x << 0.
template <typename Real>
Real activation_value(epigemm_activation_t activation, Real x) {
  const Real sqrt_2_over_pi = Real(0.79788456080286535587989211986876L);
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY: return x;
    case EPIGEMM_ACTIVATION_GELU_TANH:
      return Real(0.5) * x * (Real(1) + std::tanh(sqrt_2_over_pi * (x + Real(0.044715) * x * x * x)));
    case EPIGEMM_ACTIVATION_GELU_ERF: return Real(0.5) * x * std::erfc(-x / std::sqrt(Real(2)));
    case EPIGEMM_ACTIVATION_RELU: return x < Real(0) ? Real(0) : x;
    case EPIGEMM_ACTIVATION_SILU: return x / (Real(1) + std::exp(-x));
  }
  return NAN;  // not reached: the tool only passes the header's values
}

// act'(x); relu'(0) = 0.
template <typename Real>
Real activation_derivative(epigemm_activation_t activation, Real x) {
  const Real sqrt_2_over_pi = Real(0.79788456080286535587989211986876L);
  const Real pi = Real(3.14159265358979323846264338327950288L);
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY: return Real(1);
    case EPIGEMM_ACTIVATION_GELU_TANH: {
      const Real t = std::tanh(sqrt_2_over_pi * (x + Real(0.044715) * x * x * x));
      return Real(0.5) * (Real(1) + t) +
             Real(0.5) * x * (Real(1) - t * t) * sqrt_2_over_pi * (Real(1) + Real(3) * Real(0.044715) * x * x);
    }
    case EPIGEMM_ACTIVATION_GELU_ERF:
      return Real(0.5) * std::erfc(-x / std::sqrt(Real(2))) + x * std::exp(Real(-0.5) * x * x) / std::sqrt(2 * pi);
    case EPIGEMM_ACTIVATION_RELU: return x > Real(0) ? Real(1) : Real(0);
    case EPIGEMM_ACTIVATION_SILU: {
      const Real s = Real(1) / (Real(1) + std::exp(-x));
      return s * (Real(1) + x * (Real(1) - s));
    }
  }
  return NAN;
}

}  // namespace epigemm_cli
