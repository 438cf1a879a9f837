// The forward_activation_aux kernels (ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS): bf16 and f16, the
// fprop layout TN only (where a linear layer's forward activation is), every activation (with the
// identity only ACT_AUX and ACT_AUX_BIAS come here: without aux those are DEFAULT and BIAS, the
// linear_combination_bias kernels), two tile configurations (cooperative and ping-pong
// 128x128x64): 20 kernels.
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
    found = CutlassGemm<dtype, OperandLayout::tn, ForwardActivationAux<Element, Activation>, Config>::entry();
  });
  return found;
}

}  // namespace

const Kernel* find_forward_activation_aux_kernel(epigemm_dtype_t dtype, OperandLayout layout,
                                                 epigemm_activation_t activation, TileConfig tile) {
  if (layout != OperandLayout::tn) return nullptr;
  return visit_tile_config<KernelFamily::forward_activation_aux>(tile, [&](auto config) -> const Kernel* {
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
