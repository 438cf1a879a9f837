// The backward_activation_bgrad kernels (DACT, DACT_BGRAD): bf16 and f16, the dgrad layout NN only
// (where a linear layer's activation gradient is), every activation (the identity's derivative is
// 1, NaN where aux is NaN: docs/conventions.md), two tile configurations (cooperative and ping-pong):
// 20 kernels.
#include "backends/cutlass/cutlass_gemm.cuh"

namespace epigemm {
namespace cutlass_backend {
namespace {

template <epigemm_dtype_t dtype, class Config>
const Kernel* by_activation(epigemm_activation_t activation) {
  using Element = typename ElementOf<dtype>::type;
  const Kernel* found = nullptr;
  visit_activation(activation, [&](auto functor) {
    using Activation = decltype(functor);
    found = CutlassGemm<dtype, OperandLayout::nn, BackwardActivationBgrad<Element, Activation>, Config>::entry();
  });
  return found;
}

}  // namespace

const Kernel* find_backward_activation_bgrad_kernel(epigemm_dtype_t dtype, OperandLayout layout,
                                                 epigemm_activation_t activation, TileConfig tile) {
  if (layout != OperandLayout::nn) return nullptr;
  return visit_tile_config<KernelFamily::backward_activation_bgrad>(tile, [&](auto config) -> const Kernel* {
    using Config = decltype(config);
    switch (dtype) {
      case EPIGEMM_DTYPE_BF16: return by_activation<EPIGEMM_DTYPE_BF16, Config>(activation);
      case EPIGEMM_DTYPE_F16: return by_activation<EPIGEMM_DTYPE_F16, Config>(activation);
      case EPIGEMM_DTYPE_F32: return nullptr;  // fp32 inputs: not instantiated
    }
    return nullptr;
  });
}

}  // namespace cutlass_backend
}  // namespace epigemm
