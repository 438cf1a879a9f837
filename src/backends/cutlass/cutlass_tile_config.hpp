// Which tile configuration a call runs with, and what each one is in CUTLASS terms (the second
// part is for the kernel translation units only, which include CUTLASS).
//
// The choice is a pure function of the call, so that the same call always runs the same kernel
// and its results, the DACT_BGRAD row sums included, are bitwise repeatable. Adding a
// configuration is a value of TileConfig (cutlass_kernels.hpp), its struct below, the families
// that instantiate it (kInstantiatedIn), and the rule here once the H200 has measured it
// (dev/cuda/cutlass_tiles_lab.cu times every configuration of a family against cuBLAS).
#pragma once

#include "backends/cutlass/cutlass_kernels.hpp"

namespace epigemm {
namespace cutlass_backend {

// The kernel families (cutlass_kernels.hpp), as the tile rule and the instantiation lists name them.
enum class KernelFamily { linear_combination_bias, forward_activation_aux, backward_activation_bgrad };

// Whether a family's translation unit instantiates a configuration: every family has the
// cooperative one; the ping-pong one is compiled for the forward activation epilogues alone, where
// an epilogue with an aux store has the most to hide (docs/dev/cutlass_backend.md, "Tile
// configurations"). Each instantiated configuration costs about 4 s of nvcc per kernel.
constexpr bool instantiated_in(KernelFamily family, TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return true;
    case TileConfig::pingpong_128x128x64: return family == KernelFamily::forward_activation_aux;
  }
  return false;
}

// The rule: forward activation epilogues run ping-pong, everything else cooperative.
inline TileConfig tile_config_for(KernelFamily family, const GemmCall&) {
  switch (family) {
    case KernelFamily::forward_activation_aux: return TileConfig::pingpong_128x128x64;
    case KernelFamily::linear_combination_bias:
    case KernelFamily::backward_activation_bgrad: return TileConfig::cooperative_128x128x64;
  }
  return TileConfig::cooperative_128x128x64;
}

// The tile order: runs of 4 tiles where the tile grid (128 x 128 tiles of D) fills the SMs at
// least twice, CUTLASS's default order (1) on smaller grids. Measured on the H200 (bf16, 2026-12-01
// 18:11 UTC, the public shapes, dev/cuda/cutlass_tiles_lab.cu), each over cuBLAS's plain GEMM,
// swizzle 1 / 4:
//   8192 tiles and more (fprop 8192,4096,16384 and 16384,8192,28672; dgrad 8192,16384,4096 and
//   16384,8192,28672): ping-pong ACT_BIAS(relu) 1.116 / 0.941 and 1.464 / 0.970, cooperative
//   DACT(gelu_erf) 1.327 / 1.163 and 1.089 / 0.987; 8 was within 1-2% of 4 either way;
//   384 tiles (fprop 2048,768,3072): ping-pong ACT_BIAS(relu) 1.139 / 1.113;
//   256 and 96 tiles (dgrad 4096,1024,4096 and 2048,768,3072): cooperative DACT(gelu_erf)
//   1.149 / 1.150 and 1.353 / 1.725, DACT_BGRAD(silu) 1.338 / 1.351 and 1.567 / 1.970.
// CUTLASS lowers the swizzle itself where the tile grid is narrower than 3 tiles.
inline TileOrder tile_order_for(const GemmCall& call, const DeviceFacts& device) {
  constexpr int64_t kTile = 128;
  const int64_t tiles = ((call.gemm_m + kTile - 1) / kTile) * ((call.gemm_n + kTile - 1) / kTile);
  return TileOrder{tiles >= 2 * int64_t(device.sm_count) ? 4 : 1};
}

inline const char* tile_config_name(TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return "cooperative 128x128x64 cluster 1x1x1";
    case TileConfig::pingpong_128x128x64: return "pingpong 128x128x64 cluster 1x1x1";
  }
  return "invalid tile configuration";
}

}  // namespace cutlass_backend
}  // namespace epigemm

#if defined(__CUDACC__) && defined(EPIGEMM_CUTLASS_KERNEL_TU)
#include <cute/tensor.hpp>
#include <cutlass/epilogue/dispatch_policy.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>

namespace epigemm {
namespace cutlass_backend {

// Two consumer warp groups share one 128x128 output tile (cooperative), the producer warp feeds
// them through TMA; the grid is persistent (one CTA per SM) and the epilogue of one tile overlaps
// the main loop of the next only across CTAs.
struct Cooperative128x128x64 {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  static constexpr TileConfig id = TileConfig::cooperative_128x128x64;
};

// Two consumer warp groups, each with an output tile of its own: while one runs its tile's
// epilogue, the other runs the main loop of the next (ordered by barriers, so the tensor cores
// alternate between them). The epilogue then hides under the other group's main loop, at the
// price of a 128x128 fp32 accumulator per warp group (128 registers a thread).
struct Pingpong128x128x64 {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
  static constexpr TileConfig id = TileConfig::pingpong_128x128x64;
};

// Calls visitor(Config{}) for the struct of a TileConfig value that `family` instantiates, and
// returns nullptr (no kernel) for one it does not, without instantiating anything for it.
template <KernelFamily family, class Visitor>
const Kernel* visit_tile_config(TileConfig tile, Visitor&& visitor) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return visitor(Cooperative128x128x64{});
    case TileConfig::pingpong_128x128x64:
      if constexpr (instantiated_in(family, TileConfig::pingpong_128x128x64)) {
        return visitor(Pingpong128x128x64{});
      } else {
        return nullptr;
      }
  }
  return nullptr;  // not reached: every value has a case
}

}  // namespace cutlass_backend
}  // namespace epigemm
#endif
