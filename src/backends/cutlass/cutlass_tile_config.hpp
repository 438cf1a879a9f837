// Which tile configuration a call runs with, and what each one is in CUTLASS terms (the second
// part is for the kernel translation units only, which include CUTLASS).
//
// The choice is a pure function of the call, so that the same call always runs the same kernel
// and its results, the DACT_BGRAD row sums included, are bitwise repeatable. For now there is one
// configuration; adding one (128x256 cooperative, ping-pong 128x128, a 2x1 cluster) is a value of
// TileConfig (cutlass_kernels.hpp), its struct below, one case in each lookup of the kernel
// translation units, and the rule here once the H200 has measured it.
#pragma once

#include "backends/cutlass/cutlass_kernels.hpp"

namespace epigemm {
namespace cutlass_backend {

inline TileConfig tile_config_for(const GemmCall&) { return TileConfig::cooperative_128x128x64; }

inline const char* tile_config_name(TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return "cooperative 128x128x64 cluster 1x1x1";
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

// Calls visitor(Config{}) for the struct of a TileConfig value.
template <class Visitor>
decltype(auto) visit_tile_config(TileConfig tile, Visitor&& visitor) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return visitor(Cooperative128x128x64{});
  }
  return visitor(Cooperative128x128x64{});  // not reached: every value has a case
}

}  // namespace cutlass_backend
}  // namespace epigemm
#endif
