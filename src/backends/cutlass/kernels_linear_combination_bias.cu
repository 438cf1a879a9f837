// The linear_combination_bias kernels (DEFAULT, BIAS): bf16 and f16, every operand layout (the
// three passes of a linear layer and TT), one tile configuration: 8 kernels.
#include "backends/cutlass/cutlass_gemm.cuh"

namespace epigemm {
namespace cutlass_backend {
namespace {

template <epigemm_dtype_t dtype, class Config>
const Kernel* by_layout(OperandLayout layout) {
  using Family = LinearCombinationBias<typename ElementOf<dtype>::type>;
  switch (layout) {
    case OperandLayout::nn: return CutlassGemm<dtype, OperandLayout::nn, Family, Config>::entry();
    case OperandLayout::nt: return CutlassGemm<dtype, OperandLayout::nt, Family, Config>::entry();
    case OperandLayout::tn: return CutlassGemm<dtype, OperandLayout::tn, Family, Config>::entry();
    case OperandLayout::tt: return CutlassGemm<dtype, OperandLayout::tt, Family, Config>::entry();
  }
  return nullptr;
}

}  // namespace

const Kernel* find_linear_combination_bias_kernel(epigemm_dtype_t dtype, OperandLayout layout, TileConfig tile) {
  return visit_tile_config<KernelFamily::linear_combination_bias>(tile, [&](auto config) -> const Kernel* {
    using Config = decltype(config);
    switch (dtype) {
      case EPIGEMM_DTYPE_BF16: return by_layout<EPIGEMM_DTYPE_BF16, Config>(layout);
      case EPIGEMM_DTYPE_F16: return by_layout<EPIGEMM_DTYPE_F16, Config>(layout);
      case EPIGEMM_DTYPE_F32: return nullptr;  // fp32 inputs: not instantiated
    }
    return nullptr;
  });
}

}  // namespace cutlass_backend
}  // namespace epigemm
