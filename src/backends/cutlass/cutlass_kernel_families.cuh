// The kernels of each family for one tile configuration: instantiated_kernel<family, tile>
// (cutlass_kernels.hpp), defined here and explicitly instantiated, one family and configuration per
// translation unit, in the files CMakeLists.txt generates. What each family instantiates:
//   linear_combination_bias    (DEFAULT, BIAS)         bf16 and f16, every operand layout (the three
//                                                      passes of a linear layer and TT): 8 kernels
//   forward_activation_aux     (ACT .. ACT_AUX_BIAS)   bf16 and f16, the fprop layout TN only (where a
//                                                      linear layer's forward activation is), every
//                                                      activation: 10 kernels (with the identity only
//                                                      ACT_AUX and ACT_AUX_BIAS come here; without
//                                                      aux those are DEFAULT and BIAS)
//   backward_activation_bgrad  (DACT, DACT_BGRAD)      bf16 and f16, the dgrad layout NN only (where a
//                                                      linear layer's activation gradient is), every
//                                                      activation (the identity's derivative is 1, NaN
//                                                      where aux is NaN: docs/conventions.md): 10
// The direct-store configuration instantiates the first two families only. fp32 inputs are not instantiated: nullptr, and the backend declines the call.
#pragma once

#include <type_traits>

#include "backends/cutlass/cutlass_gemm.cuh"

namespace epigemm {
namespace cutlass_backend {

template <KernelFamily family, epigemm_dtype_t dtype, TileConfig tile>
const Kernel* kernel_of_family(OperandLayout layout, epigemm_activation_t activation) {
  using Element = typename ElementOf<dtype>::type;
  if constexpr (family == KernelFamily::linear_combination_bias) {
    using Family = LinearCombinationBias<Element>;
    switch (layout) {
      case OperandLayout::nn: return CutlassGemm<dtype, OperandLayout::nn, Family, tile>::entry();
      case OperandLayout::nt: return CutlassGemm<dtype, OperandLayout::nt, Family, tile>::entry();
      case OperandLayout::tn: return CutlassGemm<dtype, OperandLayout::tn, Family, tile>::entry();
      case OperandLayout::tt: return CutlassGemm<dtype, OperandLayout::tt, Family, tile>::entry();
    }
    return nullptr;
  } else {
    constexpr bool forward = family == KernelFamily::forward_activation_aux;
    constexpr OperandLayout kLayout = forward ? OperandLayout::tn : OperandLayout::nn;
    if (layout != kLayout) return nullptr;
    const Kernel* found = nullptr;
    visit_activation(activation, [&](auto functor) {
      using Activation = decltype(functor);
      using Family = std::conditional_t<forward, ForwardActivationAux<Element, Activation>,
                                        BackwardActivationBgrad<Element, Activation>>;
      found = CutlassGemm<dtype, kLayout, Family, tile>::entry();
    });
    return found;
  }
}

template <KernelFamily family, TileConfig tile>
const Kernel* instantiated_kernel(epigemm_dtype_t dtype, OperandLayout layout, epigemm_activation_t activation) {
  static_assert(instantiated_in(family, tile), "a translation unit for a pair that instantiated_in does not name");
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16: return kernel_of_family<family, EPIGEMM_DTYPE_BF16, tile>(layout, activation);
    case EPIGEMM_DTYPE_F16: return kernel_of_family<family, EPIGEMM_DTYPE_F16, tile>(layout, activation);
    case EPIGEMM_DTYPE_F32: return nullptr;  // fp32 inputs: not instantiated
  }
  return nullptr;
}

}  // namespace cutlass_backend
}  // namespace epigemm
