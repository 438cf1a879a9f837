// Our activations (core/epilogue_math.hpp) in the form CUTLASS's epilogue visitor tree calls them,
// so that the cutlass backend computes exactly the formulas of docs/conventions.md, "Activations".
// CUTLASS's own GELU is the erf form through erff and its GELU_taylor is 0.5 (z + z tanh.approx(u)),
// the hardware's approximate tanh in the 1 + tanh form that conventions.md rejects for negative z:
// neither is used.
//
// CUTLASS takes an activation as a template with one type parameter (Sm90Compute's ComputeFn) and
// instantiates it with the fp32 fragment, cutlass::Array<float, N>, applied to the values converted
// to the compute type (fp32 here: acc + bias for the forward, acc and aux for the backward):
//   forward   ForwardActivation<Act>::Fn<Array<float, N>>()(z)       = Act::forward(z) per element
//   backward  GradientTimesDerivative<Act>::Fn<Array<float, N>>()(g, z) = g * Act::derivative(z)
// (the backward form is the one LinCombDeEltAct calls: d_activation(dY, aux), as CUTLASS's dGELU).
#pragma once

#include <cutlass/array.h>
#include <cutlass/cutlass.h>

#include "core/epilogue_math.hpp"

namespace epigemm {
namespace cutlass_backend {

template <class Activation>
struct ForwardActivation {
  template <class T>
  CUTLASS_HOST_DEVICE static T apply(T const& z) {
    return Activation::forward(z);
  }
  template <class T, int N, bool RegisterSized>
  CUTLASS_HOST_DEVICE static cutlass::Array<T, N, RegisterSized> apply(
      cutlass::Array<T, N, RegisterSized> const& z) {
    cutlass::Array<T, N, RegisterSized> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = Activation::forward(z[i]);
    return out;
  }

  template <class T>
  struct Fn {
    CUTLASS_HOST_DEVICE T operator()(T const& z) const { return apply(z); }
  };
};

template <class Activation>
struct GradientTimesDerivative {
  template <class T>
  CUTLASS_HOST_DEVICE static T apply(T const& gradient, T const& z) {
    return gradient * Activation::derivative(z);
  }
  template <class T, int N, bool RegisterSized>
  CUTLASS_HOST_DEVICE static cutlass::Array<T, N, RegisterSized> apply(
      cutlass::Array<T, N, RegisterSized> const& gradient, cutlass::Array<T, N, RegisterSized> const& z) {
    cutlass::Array<T, N, RegisterSized> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = gradient[i] * Activation::derivative(z[i]);
    return out;
  }

  template <class T>
  struct Fn {
    CUTLASS_HOST_DEVICE T operator()(T const& gradient, T const& z) const { return apply(gradient, z); }
  };
};

}  // namespace cutlass_backend
}  // namespace epigemm
