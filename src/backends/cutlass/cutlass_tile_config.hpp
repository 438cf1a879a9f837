// Which tile configuration a call runs with, and what each one is in CUTLASS terms (the second
// part is for the kernel translation units only, which include CUTLASS).
//
// The choice is a pure function of the call, so that the same call always runs the same kernel
// and its results, the DACT_BGRAD row sums included, are bitwise repeatable. Adding a
// configuration is a value of TileConfig (cutlass_kernels.hpp), its shape (tile_shape_of) and
// CUTLASS types (ConfigOf) below, the families that instantiate it (instantiated_in, and the same
// pairs in CMakeLists.txt's list of translation units), and the rule here once the H200 has
// measured it (dev/cuda/cutlass_tiles_lab.cu times every configuration of a family against cuBLAS).
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cutlass/cutlass_kernels.hpp"

namespace epigemm {
namespace cutlass_backend {

// How a kernel moves the call's matrices, from what their addresses, leading dimensions and extents
// allow (cutlass_backend.cpp decides it and says why where none can):
//   tma                        TMA loads A and B and stores D and aux (16-byte aligned base addresses
//                              and strides, contiguous extents multiples of 8), the bias read in
//                              16-byte vectors: every tile configuration but the direct-store one
//   tma_loads_register_stores  TMA loads A and B; D, aux and the bias, which break those rules, are
//                              staged through shared memory (the bias: read element by element)
//                              (pingpong_128x128x64_direct_store)
// Either way, an A or B that breaks TMA's rules is first copied into the workspace where a copy
// can keep them (cutlass_staged_operands.hpp).
enum class MatrixMovement { tma, tma_loads_register_stores };

// Whether a family instantiates a configuration: what tile_config_for below can choose for it, and
// nothing more. DEFAULT and BIAS run cooperative; the activation epilogues, which have an epilogue
// to hide (an aux store or an aux load; docs/dev/cutlass_backend.md, "Tile configurations"), run
// ping-pong, the backward ones cooperative on small grids (on the cooperative 128 x 64 tile
// without a source where those tiles are at most one per SM), the forward ones with the 64 x 64
// epilogue subtile where gemm_k is short and on tiles of half the size on small grids; both on a
// 256 x 128 cooperative tile in clusters of two where gemm_k is long and the grid large. Each
// instantiated configuration costs about 4 s of nvcc per kernel and 45 s per translation unit (one
// per family and configuration).
constexpr bool instantiated_in(KernelFamily family, TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return family != KernelFamily::forward_activation_aux;
    case TileConfig::pingpong_128x128x64: return family != KernelFamily::linear_combination_bias;
    case TileConfig::pingpong_128x128x64_epilogue_64x64:
    case TileConfig::pingpong_128x128x64_without_source: return family == KernelFamily::forward_activation_aux;
    case TileConfig::pingpong_128x128x64_epilogue_64x64_without_source:
      return family != KernelFamily::linear_combination_bias;
    case TileConfig::pingpong_64x128x64:
    case TileConfig::pingpong_64x128x64_without_source:
    case TileConfig::cooperative_128x64x64: return family == KernelFamily::forward_activation_aux;
    case TileConfig::cooperative_128x64x64_without_source:
    case TileConfig::cooperative_128x96x64_without_source: return family != KernelFamily::linear_combination_bias;
    case TileConfig::cooperative_128x192x64_without_source: return family == KernelFamily::backward_activation_bgrad;
    case TileConfig::cooperative_256x128x64_cluster_1x2: return family != KernelFamily::linear_combination_bias;
    case TileConfig::cooperative_256x128x64_cluster_1x2_without_source:
      return family == KernelFamily::forward_activation_aux;
    case TileConfig::pingpong_128x128x64_direct_store: return family != KernelFamily::backward_activation_bgrad;
  }
  return false;
}

// A configuration's CTA tile of D (rows along gemm_m, columns along gemm_n) and its cluster of
// CTAs; the CUTLASS structs below check that they say the same.
struct TileShape {
  int64_t m, n;
  int64_t cluster_m, cluster_n;
};
constexpr TileShape tile_shape_of(TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return {128, 128, 1, 1};
    case TileConfig::pingpong_128x128x64: return {128, 128, 1, 1};
    case TileConfig::pingpong_128x128x64_epilogue_64x64:
    case TileConfig::pingpong_128x128x64_without_source:
    case TileConfig::pingpong_128x128x64_epilogue_64x64_without_source: return {128, 128, 1, 1};
    case TileConfig::pingpong_64x128x64:
    case TileConfig::pingpong_64x128x64_without_source: return {64, 128, 1, 1};
    case TileConfig::cooperative_128x64x64:
    case TileConfig::cooperative_128x64x64_without_source: return {128, 64, 1, 1};
    case TileConfig::cooperative_128x96x64_without_source: return {128, 96, 1, 1};
    case TileConfig::cooperative_128x192x64_without_source: return {128, 192, 1, 1};
    case TileConfig::cooperative_256x128x64_cluster_1x2:
    case TileConfig::cooperative_256x128x64_cluster_1x2_without_source: return {256, 128, 1, 2};
    case TileConfig::pingpong_128x128x64_direct_store: return {128, 128, 1, 1};
  }
  return {128, 128, 1, 1};
}

// D's tiles along gemm_m and gemm_n (a partial tile counts as one), and in all.
struct TileGrid {
  int64_t along_m, along_n;
  int64_t tiles() const { return along_m * along_n; }
};
inline TileGrid tile_grid_of(const GemmCall& call, const TileShape& tile) {
  return TileGrid{(call.gemm_m + tile.m - 1) / tile.m, (call.gemm_n + tile.n - 1) / tile.n};
}
// The grid of 128 x 128 tiles: the measure of a call's size that the dispatch rules read, whatever
// configuration then runs it.
inline TileGrid tile_grid_of(const GemmCall& call) { return tile_grid_of(call, TileShape{128, 128, 1, 1}); }

// The rule: DEFAULT and BIAS cooperative; the activation epilogues, forward and backward, on the
// cooperative 256 x 128 tile in clusters of 1 x 2 where gemm_k is at least 8192 and the grid at
// least 15 waves of 128 x 128 tiles (long_grid_wants_wide_tile); elsewhere the forward ones
// ping-pong, with the 64 x 64 epilogue subtile for silu and the GELUs where gemm_k is at most
// 1024, and on grids under 1.5 waves of 128 x 128 tiles with gemm_k at most 1024 on the smaller
// tiles (forward_grid_wants_smaller_tiles); the backward ones ping-pong from two waves of tiles on
// (2 x the SM count), cooperative below, on the 128 x 64 tile without a source where those tiles
// are at most one per SM and beta is 0 (backward_grid_wants_smaller_tile); both, where beta is 0
// and neither of those smaller tiles applies, on the cooperative 128 x 96 tile without a source
// where its tiles fill 90-100% of the SMs once, 128 x 128 ones 70-90%, with gemm_k >= 3072
// (grid_fills_the_sms_once_with_96_column_tiles); the backward ones, where beta is 0, 128 x 128
// tiles take one to one and a half waves and 128 x 192 ones fill 90-100% of the SMs once, with
// gemm_k >= 3072, on the cooperative 128 x 192 tile without a source
// (grid_fills_the_sms_once_with_192_column_tiles). The forward ones on
// the 256 x 128 and ping-pong 128 x 128 tiles run those tiles' kernels without a source where
// beta is 0 (every layer-level call).
//
// Why the forward subtile (docs/dev/cutlass_backend.md, "The forward epilogue's subtile"): where
// gemm_k is short, a tile's main loop is too short to hide the other warp group's epilogue when
// the activation costs an exponential and a reciprocal per element. Walking the tile in 64 x 64
// subtiles instead of CUTLASS's 64 x 32 gives each thread 32 elements between the subtile's
// barriers instead of 16 for the dependent chains of the activation to overlap. Measured on the
// H200 (bf16, the forward pass's four activation epilogues, geometric mean per shape and
// activation, over the same with 64 x 32; 2026-12-02 16:43 UTC): where gemm_k <= 1024 (1000,768,3072,
// 2048,768,3072, 4096,1024,4096, 16384,1024,4096) 0.91-0.98 with silu, gelu_tanh and gelu_erf, but
// 0.94-1.01 with relu and 0.99-1.11 with the identity; where gemm_k >= 1536, 1.00-1.03 with every
// activation (the larger subtile's shared memory leaves the main loop fewer stages). Those were two
// runs on two machines; both kernels on the same calls in the tiles lab, at the rule's tile order
// (2026-12-03 06:52 UTC), agreed: where gemm_k <= 1024, 0.934 with silu and 0.967 with gelu_erf on
// geometric mean; from 1536 on, 1.000-1.016.
inline bool forward_epilogue_wants_larger_subtile(const GemmCall& call) {
  constexpr int64_t kLongestShortK = 1024;
  if (call.gemm_k > kLongestShortK) return false;
  switch (call.parts().activation) {
    case EPIGEMM_ACTIVATION_SILU:
    case EPIGEMM_ACTIVATION_GELU_TANH:
    case EPIGEMM_ACTIVATION_GELU_ERF: return true;
    case EPIGEMM_ACTIVATION_IDENTITY:
    case EPIGEMM_ACTIVATION_RELU: return false;
  }
  return false;
}

// Why the smaller tiles on small forward grids (docs/dev/cutlass_backend.md, "Smaller tiles for
// small forward grids"): under 1.5 waves of 128 x 128 tiles a persistent grid leaves SMs idle for
// much of a tile's time, and with one tile per SM no second tile's main loop hides the epilogue.
// Tiles of half the size give twice as many, filling more SMs and halving each epilogue. Where
// those tiles are at most one per SM, the cooperative 128 x 64 tile lets both consumer warp groups
// work on the one tile (a ping-pong CTA with one tile leaves a warp group idle); where they are
// more, the ping-pong 64 x 128 tile hides one tile's epilogue under the next one's main loop.
// Measured in the tiles lab (H200, bf16, 2026-12-03 08:43 UTC, ACT_BIAS with relu and silu,
// ACT_AUX_BIAS with gelu_erf and relu, over the rule's 128 x 128 kernel, public and derive
// shapes): 48 tiles (256,768,3072) 0.67-0.82 with the cooperative 128 x 64 tile; 128 tiles
// (512,1024,4096) 0.94-0.99 and 192 tiles (1000,768,3072) 0.83-0.97 with the ping-pong 64 x 128
// tile; from 256 tiles on (512,8192,8192; 2048,768,3072 with 384) the better of the two was slower
// (1.14-1.26), but for gelu_erf on 384 tiles (0.98). Those small grids all had gemm_k <= 1024, and
// the rule keeps to that range: a smaller tile loads more of A and B per multiply-add, which a long
// main loop pays for (the rule without the bound, 09:00 UTC, ran the held-out 384,14336,4096's
// forward on the ping-pong 64 x 128 tile in 1.09-1.36x the cuda backend's time; the lab had the
// ping-pong 128 x 128 tile 1.13x and the 64 x 128 one 1.35x cuBLAS's time there).
inline bool forward_grid_wants_smaller_tiles(const GemmCall& call, const DeviceFacts& device) {
  constexpr int64_t kLongestMeasuredK = 1024;
  return call.gemm_k <= kLongestMeasuredK && 2 * tile_grid_of(call).tiles() < 3 * int64_t(device.sm_count);
}

// Why the cooperative 256 x 128 tile in clusters of 1 x 2 on long calls with many tiles
// (docs/dev/cutlass_backend.md, "The 256 x 128 tile under sustained load"): there the GPU runs at
// its power limit, and the clock it grants a kernel falls with the data the kernel moves per
// multiply-add. The 128 x 128 ping-pong tiles read about twice what cuBLAS's 256 x 128 tiles with
// A's tile multicast to the cluster read from L2 and DRAM; per cycle they are as fast, per joule
// not. Measured on the H200 (bf16, 2026-12-04 03:23-03:27 UTC, the tiles lab, each kernel alone
// back to back for 0.7 s, over cuBLAS's plain GEMM of the call): the forward pass of
// 8192,16384,4096 (gemm_k 16384, 2048 tiles of 128 x 128) with ACT_BIAS(relu), ACT_BIAS(silu),
// ACT_AUX_BIAS(relu) and ACT_AUX_BIAS(gelu_erf) 1.043-1.063 on this tile at 1442-1458 MHz against
// 1.079-1.119 on the ping-pong one at 1328-1377 MHz; of 16384,8192,28672 (gemm_k 8192, 28672
// tiles) 1.030-1.064 against 1.060-1.161; the dgrad of 8192,4096,16384 and 16384,28672,8192
// (DACT(gelu_erf), DACT_BGRAD(silu)) 1.052-1.065 against 1.084-1.155. At the full clock (each
// call after 200 ms idle) 0.995-1.085 against 1.014-1.098. The rule keeps to what was measured:
// gemm_k from 8192 and at least 15 waves of 128 x 128 tiles. Below that the epilogue, which this
// cooperative kernel does not hide, weighs more (interleaved with cuBLAS, 2026-12-02 09:44 UTC, on
// 8192,4096,16384's forward, gemm_k 4096: 1.059 against the ping-pong tile's 0.943).
inline bool long_grid_wants_wide_tile(const GemmCall& call, const DeviceFacts& device) {
  constexpr int64_t kShortestMeasuredK = 8192, kFewestMeasuredWaves = 15;
  return call.gemm_k >= kShortestMeasuredK && tile_grid_of(call).tiles() >= kFewestMeasuredWaves * int64_t(device.sm_count);
}

// The kernel of the same tile that does not read D's old values, where there is one: for the
// forward activation epilogues with beta = 0 (every layer-level call). Its epilogue keeps no shared
// memory for them, which leaves the main loop more stages (the 256 x 128 tile 4 instead of 3, the
// ping-pong tile's 64 x 64 subtile 6 instead of 5), and CUTLASS issues each subtile's TMA store
// after the next subtile's math (delayed TMA stores). Measured on the H200 (bf16, 2026-12-04), each
// over the kernel with a source: the 256 x 128 tile on the forward calls of 8192,16384,4096,
// 16384,8192,28672 and 8192,13824,5120 (07:30-07:33 UTC) 0.956-0.975 in the tiles lab back to back,
// 0.957-1.003 after 200 ms idle, 0.984-0.997 alone under sustained load, and in the benchmark,
// auto / plain GEMM over those 54 cases 1.020 against 1.042; the ping-pong tiles in the tiles lab
// (08:01 UTC, the forward pass of 8 shapes, the subtile the rule takes) 0.931-0.996 with gemm_k <=
// 1024 and 0.974-1.028 from 4096 on, and in the benchmark (08:07-08:09 against 08:02-08:05, one
// machine) over the 452 forward cases they run 1.020 against 1.036, 394 of them faster
// (docs/dev/cutlass_backend.md, "The 256 x 128 tile without a source", "The ping-pong tiles without
// a source"). The two smaller tiles of small forward grids likewise (delayed TMA stores; the
// cooperative 128 x 64 tile 8 main-loop stages instead of 7, the ping-pong 64 x 128 one 8 either
// way): in the tiles lab (11:59 UTC, the three derive shapes that take them, four epilogues, both
// tile orders) faster in 46 of 48 cells, at the tile order the rule takes 0.89-0.98 of the kernel
// with a source, and in the benchmark (12:00-12:05) their 54 forward cases went from 1.27 to 1.13
// of the plain GEMM on geometric mean (docs/dev/cutlass_backend.md, "The small forward grids'
// tiles without a source").
constexpr TileConfig without_source_where_there_is_one(TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_256x128x64_cluster_1x2:
      return TileConfig::cooperative_256x128x64_cluster_1x2_without_source;
    case TileConfig::pingpong_128x128x64: return TileConfig::pingpong_128x128x64_without_source;
    case TileConfig::pingpong_128x128x64_epilogue_64x64:
      return TileConfig::pingpong_128x128x64_epilogue_64x64_without_source;
    case TileConfig::pingpong_64x128x64: return TileConfig::pingpong_64x128x64_without_source;
    case TileConfig::cooperative_128x64x64: return TileConfig::cooperative_128x64x64_without_source;
    case TileConfig::cooperative_128x128x64:
    case TileConfig::cooperative_256x128x64_cluster_1x2_without_source:
    case TileConfig::pingpong_128x128x64_without_source:
    case TileConfig::pingpong_128x128x64_epilogue_64x64_without_source:
    case TileConfig::pingpong_64x128x64_without_source:
    case TileConfig::cooperative_128x64x64_without_source:
    case TileConfig::cooperative_128x96x64_without_source:
    case TileConfig::cooperative_128x192x64_without_source:
    case TileConfig::pingpong_128x128x64_direct_store: return tile;
  }
  return tile;
}

// Whether the call's tiles of 128 x 64 are at most one per SM: where the cooperative 128 x 64 tile
// runs, forward (under forward_grid_wants_smaller_tiles) and backward.
inline bool narrow_tiles_at_most_one_per_sm(const GemmCall& call, const DeviceFacts& device) {
  return tile_grid_of(call, tile_shape_of(TileConfig::cooperative_128x64x64)).tiles() <= int64_t(device.sm_count);
}

// The forward activation epilogues' tile, before the choice of the kernel without a source.
inline TileConfig forward_tile_for(const GemmCall& call, const DeviceFacts& device) {
  if (long_grid_wants_wide_tile(call, device)) return TileConfig::cooperative_256x128x64_cluster_1x2;
  if (forward_grid_wants_smaller_tiles(call, device)) {
    return narrow_tiles_at_most_one_per_sm(call, device) ? TileConfig::cooperative_128x64x64
                                                         : TileConfig::pingpong_64x128x64;
  }
  return forward_epilogue_wants_larger_subtile(call) ? TileConfig::pingpong_128x128x64_epilogue_64x64
                                                     : TileConfig::pingpong_128x128x64;
}

// Why the backward threshold (dev/cuda/cutlass_tiles_lab.cu, public and derive shapes, bf16, DACT
// with gelu_erf and DACT_BGRAD with silu, each over cuBLAS's plain GEMM with the tile order the
// rule takes; H200, 2026-12-02 05:28 UTC): from 288 tiles on ping-pong was never slower, and from
// 1024 tiles on 3-16% faster (8192,16384,4096 DACT_BGRAD 1.115 -> 0.956, 16384,1024,4096 1.220 ->
// 1.138); at 256 tiles and below cooperative was 1-15% faster (1024,2048,8192, 128 tiles: 1.078
// against 1.146): with at most one tile per SM, nothing follows an epilogue to hide it under, and
// the cooperative kernel's two warp groups share the tile's epilogue.
//
// Why the ping-pong tile's 64 x 64 subtile without a source for the activation gradients where
// gemm_k <= 1024 (silu and the GELUs, beta = 0): a main loop of at most 16 slices cannot hide an
// epilogue that reads aux and writes D in CUTLASS's 64 x 32 subtiles, each waiting for its TMA
// store; half as many subtiles, each store issued after the next subtile's math, shorten it.
// Measured in the tiles lab (H200, bf16, 2026-12-04 14:33 UTC, tile order 4 as the rule takes;
// `h200-2026-12-04-labs/cutlass_tiles_lab_backward_without_source-1433.log`), over cuBLAS's plain
// GEMM: 4096,4096,1024 (1024 tiles) DACT(gelu_erf) 1.499 -> 1.313, DACT_BGRAD(silu) 1.431 -> 1.246,
// DACT_BGRAD(gelu_tanh) 1.623 -> 1.390; 8192,4096,1024 (2048 tiles) 1.493 -> 1.341, 1.425 -> 1.261,
// 1.581 -> 1.385; 2048,3072,768 (384 tiles) 1.858 -> 1.572, 1.701 -> 1.523, 1.942 -> 1.687. Where
// gemm_k was 4096 (8192,16384,4096, 8192 tiles) the subtile was 1-3.5% slower, so the rule keeps to
// the short calls. (CUTLASS's subtile without a source was between the two: 1.389, 1.315, 1.448 on
// 4096,4096,1024; it is not instantiated.)
inline bool backward_epilogue_wants_larger_subtile(const GemmCall& call) {
  return call.beta == 0.0f && forward_epilogue_wants_larger_subtile(call);
}

// Why the cooperative 128 x 64 tile without a source for the activation gradients where its tiles
// are at most one per SM (beta = 0; docs/dev/cutlass_backend.md, "The activation gradients on the
// small forward grids' tiles"): a grid of at most half a wave of 128 x 128 tiles leaves most SMs
// idle for a whole tile; tiles of half the width fill twice as many, each with both consumer warp
// groups on it. Measured in the tiles lab (H200, bf16, 2026-12-04 17:35 UTC, tile order 1, over
// the 128 x 128 kernel the rule took there): DACT(gelu_erf), DACT_BGRAD(silu) and
// DACT_BGRAD(gelu_tanh) 31-36% faster on 256,768,3072 (12 tiles of 128 x 128), 512,1024,4096 (32)
// and 1000,768,3072 (48), slower from 96 tiles on (2048,768,3072: 8-11%); in the benchmark
// (17:40 UTC, the same three shapes' data gradients, every activation, DACT and DACT_BGRAD), over
// the cuda backend in the same run, 0.955, 0.975 and 0.806 on geometric mean (0.717-1.037 per case).
inline bool backward_grid_wants_smaller_tile(const GemmCall& call, const DeviceFacts& device) {
  return call.beta == 0.0f && narrow_tiles_at_most_one_per_sm(call, device);
}

// Why the cooperative 128 x 96 tile without a source where its tiles fill 90-100% of the SMs once,
// 128 x 128 tiles 70-90% of them, and gemm_k is at least 3072 (docs/dev/cutlass_backend.md, "A tile
// of 96 columns for grids just under one wave"): there the
// 128 x 128 grid is about three quarters of a wave (96 tiles of 768 x 2048 on 132 SMs), so a
// quarter of the SMs idle for the whole call and the other three quarters each run one tile, its
// main loop and then its epilogue; tiles of 96 columns run on every SM (132), each with three
// quarters of the work, and both consumer warp groups share each tile's epilogue. Measured in the
// tiles lab (H100, 132 SMs, bf16, 2026-12-06 12:03 UTC, tile order 1; each over cuBLAS's plain GEMM),
// derived from the public and derive shapes: 2048,3072,768's forward (gemm_k 3072; ACT_BIAS relu
// and silu, ACT_AUX_BIAS gelu_erf and relu) 1.051-1.129 against 1.120-1.303 on the rule's ping-pong
// 128 x 128 tile; 2048,768,3072's data gradient (DACT gelu_erf, DACT_BGRAD silu and gelu_tanh)
// 1.042-1.143 against 1.176-1.236 on the cooperative 128 x 128 one. On grids of 192 tiles of
// 128 x 128, where the 96-column grid is two waves, it was faster on some (768,4096,14336's and
// 3001,1024,4096's data gradients, 10-18%) and not on others (1536,2048,5632's, -1% to +4%), and
// slower where it makes the grid larger than two waves (2304,1536,6144 and 4096,1024,4096's data
// gradients, 21-32%), so the rule keeps to the one wave measured: 128 x 128 grids of 70-90% of the
// SMs (96 tiles of 132 measured; a smaller grid would pad more of its 96-column tiles) and gemm_k
// from 3072 (3072, 14336 and 50257 measured; a shorter main loop weighs the epilogue more). The
// smaller tiles of small grids come first (forward where gemm_k <= 1024, backward where 128 x 64
// tiles are at most one per SM): measured there, they were not compared with this tile at their
// tile order.
inline bool grid_fills_the_sms_once_with_96_column_tiles(const GemmCall& call, const DeviceFacts& device) {
  constexpr int64_t kShortestMeasuredK = 3072;
  const int64_t tiles = tile_grid_of(call, tile_shape_of(TileConfig::cooperative_128x96x64_without_source)).tiles();
  const int64_t square_tiles = tile_grid_of(call).tiles();
  const int64_t sms = int64_t(device.sm_count);
  // 128 x 128 tiles on 70-90% of the SMs (the measured grids: 96 of 132), 128 x 96 ones on 90-100%.
  const bool square_tiles_leave_a_tenth_idle = 10 * square_tiles >= 7 * sms && 10 * square_tiles < 9 * sms;
  return call.beta == 0.0f && call.gemm_k >= kShortestMeasuredK && square_tiles_leave_a_tenth_idle &&
         10 * tiles >= 9 * sms && tiles <= sms;
}

// Why the cooperative 128 x 192 tile without a source for the activation gradients where 128 x 128
// tiles make one to one and a half waves and 192-column ones fill 90-100% of the SMs once, with
// gemm_k at least 3072 (docs/dev/cutlass_backend.md, "A tile of 192 columns for grids of one to one
// and a half waves"): there each SM runs two 128 x 128 tiles or one, and the call lasts two tiles'
// time while half of the SMs or more idle for the second; one wave of tiles of 192 columns lasts
// one and a half (1024 x 3072: 128 tiles against 192; cuBLAS's plain GEMM of such calls runs its
// 128 x 192 tile on one wave). With one tile per SM the cooperative kernel's exposed epilogue costs
// nothing a ping-pong one would hide. Measured in the tiles lab (H100, 132 SMs like the H200's, bf16,
// 2026-12-06 21:52 UTC, tile order 1; each over cuBLAS's plain GEMM) on four grids of the band
// outside the benchmark's sets (192 tiles of 128 x 128: 3072,1024,4096, 768,4096,11008 and
// 1536,2048,8192; 182: 3264,896,4096; gemm_k 4096-11008), DACT(gelu_erf), DACT_BGRAD(silu) and
// DGELU_BGRAD: 1.038-1.147 against 1.377-1.614 on the cooperative 128 x 128 tile the rule took there
// and 1.361-1.510 on the ping-pong one. The bounds keep to the wave argument and what was measured:
// more than one wave of 128 x 128 tiles and at most one and a half, the 192-column grid 90-100% of
// the SMs (119-128 of 132 measured), gemm_k from 3072 as for the 128 x 96 tile (4096-11008 measured
// here, 5632 and 14336 in the benchmark's held-out shapes). (On 384 tiles, 2.9 waves, it was also the
// fastest, 1.108-1.118 against the ping-pong tile's 1.130: a two-wave grid, outside the rule.)
inline bool grid_fills_the_sms_once_with_192_column_tiles(const GemmCall& call, const DeviceFacts& device) {
  constexpr int64_t kShortestMeasuredK = 3072;
  const int64_t tiles = tile_grid_of(call, tile_shape_of(TileConfig::cooperative_128x192x64_without_source)).tiles();
  const int64_t square_tiles = tile_grid_of(call).tiles();
  const int64_t sms = int64_t(device.sm_count);
  // 128 x 128 tiles on more than one wave and at most one and a half, 128 x 192 ones on 90-100% of
  // the SMs once.
  const bool square_tiles_take_a_second_wave = square_tiles > sms && 2 * square_tiles <= 3 * sms;
  return call.beta == 0.0f && call.gemm_k >= kShortestMeasuredK && square_tiles_take_a_second_wave &&
         10 * tiles >= 9 * sms && tiles <= sms;
}

// A call whose D, aux or bias TMA cannot move runs on the one direct-store configuration: no rule of
// size picks among such tiles before the H200 has measured others.
inline TileConfig tile_config_for(KernelFamily family, const GemmCall& call, const DeviceFacts& device,
                                  MatrixMovement movement = MatrixMovement::tma) {
  switch (movement) {
    case MatrixMovement::tma: break;
    case MatrixMovement::tma_loads_register_stores: return TileConfig::pingpong_128x128x64_direct_store;
  }
  switch (family) {
    case KernelFamily::forward_activation_aux: {
      if (!forward_grid_wants_smaller_tiles(call, device) && grid_fills_the_sms_once_with_96_column_tiles(call, device)) {
        return TileConfig::cooperative_128x96x64_without_source;
      }
      const TileConfig tile = forward_tile_for(call, device);
      return call.beta == 0.0f ? without_source_where_there_is_one(tile) : tile;
    }
    case KernelFamily::backward_activation_bgrad:
      if (long_grid_wants_wide_tile(call, device)) return TileConfig::cooperative_256x128x64_cluster_1x2;
      if (backward_grid_wants_smaller_tile(call, device)) return TileConfig::cooperative_128x64x64_without_source;
      if (grid_fills_the_sms_once_with_96_column_tiles(call, device)) return TileConfig::cooperative_128x96x64_without_source;
      if (grid_fills_the_sms_once_with_192_column_tiles(call, device)) {
        return TileConfig::cooperative_128x192x64_without_source;
      }
      if (tile_grid_of(call).tiles() < 2 * int64_t(device.sm_count)) return TileConfig::cooperative_128x128x64;
      return backward_epilogue_wants_larger_subtile(call) ? TileConfig::pingpong_128x128x64_epilogue_64x64_without_source
                                                          : TileConfig::pingpong_128x128x64;
    case KernelFamily::linear_combination_bias: return TileConfig::cooperative_128x128x64;
  }
  return TileConfig::cooperative_128x128x64;
}

// The swizzle CUTLASS's persistent scheduler takes for a largest one asked (max_swizzle_size): its
// get_log_swizzle_size (cutlass/gemm/kernel/tile_scheduler_params.h), which lowers it where the
// grid (in CTAs, rounded to whole clusters) is narrower than 3 (or 6) tiles, as 1 << log.
inline int64_t cutlass_swizzle_taken(const TileGrid& grid, int max_swizzle) {
  const int64_t narrowest = grid.along_m < grid.along_n ? grid.along_m : grid.along_n;
  if (max_swizzle >= 8 && narrowest >= 6) return 8;
  if (max_swizzle >= 4 && narrowest >= 3) return 4;
  if (max_swizzle >= 2 && narrowest >= 2) return 2;
  return 1;
}

inline int64_t round_up_to(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The grid CUTLASS's scheduler walks for a tile configuration and a swizzle asked: the CTA tiles
// rounded to whole clusters, then to multiples of swizzle x cluster extent along each dimension.
inline TileGrid scheduled_grid(const GemmCall& call, const TileShape& tile, int max_swizzle) {
  const TileGrid grid = tile_grid_of(call, tile);
  const TileGrid in_clusters{round_up_to(grid.along_m, tile.cluster_m), round_up_to(grid.along_n, tile.cluster_n)};
  const int64_t taken = cutlass_swizzle_taken(in_clusters, max_swizzle);
  return TileGrid{round_up_to(in_clusters.along_m, taken * tile.cluster_m),
                  round_up_to(in_clusters.along_n, taken * tile.cluster_n)};
}

// The tile order of a call run with `tile`: runs of 4 (else 2) tiles where the grid of that
// configuration's tiles fills the SMs at least twice and the order adds at most 1/32 to the tiles
// (over the grid rounded to whole clusters, which every order has); CUTLASS's default order (1)
// elsewhere.
//
// Why the padding bound: the scheduler rounds the tile counts along m and along n up to multiples
// of the swizzle it takes times the cluster's extent (tile_scheduler_params.h,
// round_up(problem_blocks, (1 << log_swizzle) * cluster_shape)),
// and the padded tiles hold places in the persistent CTAs' tile sequence. Measured on the H200
// (bf16, 2026-12-01 20:30 UTC, git show 0c02002:bench/results/h200-2026-12-01-2030-cutlass-rule-source.csv), with
// swizzle 4 wherever the grid held 2 waves: 384,16384,16384 (128 x 3 tiles, padded to 128 x 4)
// and 768,4096,14336 (112 x 6, padded to 112 x 8) ran their forward activation epilogues in
// 1.42-1.86x cuda's time, while grids that round to themselves ran them in 0.54-1.05x; the lab
// (18:11 UTC) had the dgrad of 2048,768,3072 (6 x 16 tiles, padded to 8 x 16) at 1.725x cuBLAS
// with swizzle 4 against 1.353x with 1.
// Why swizzle at all, on the grids of 8192 tiles and more (fprop 8192,4096,16384 and
// 16384,8192,28672; dgrad 8192,16384,4096 and 16384,8192,28672; each over cuBLAS's plain GEMM,
// swizzle 1 / 4, 18:11 UTC): ping-pong ACT_BIAS(relu) 1.116 / 0.941 and 1.464 / 0.970,
// cooperative DACT(gelu_erf) 1.327 / 1.163 and 1.089 / 0.987; 8 was within 1-2% of 4 either way.
// Swizzle 2 was not measured by itself; it is taken where 4 would pad and 2 does not.
inline TileOrder tile_order_for(const GemmCall& call, const DeviceFacts& device, TileConfig config) {
  const TileShape tile = tile_shape_of(config);
  const int64_t tiles = tile_grid_of(call, tile).tiles();
  if (tiles < 2 * int64_t(device.sm_count)) return TileOrder{1};
  const int64_t unswizzled = scheduled_grid(call, tile, 1).tiles();
  for (const int swizzle : {4, 2}) {
    if (scheduled_grid(call, tile, swizzle).tiles() * 32 <= unswizzled * 33) return TileOrder{swizzle};
  }
  return TileOrder{1};
}

// How full the last wave of a persistent grid is: the tiles over the tiles that ceil(tiles / SMs)
// full waves would hold (1 where the tiles are a multiple of the SM count; 288 tiles on 132 SMs:
// 288 / 396 = 0.73). A grid whose last wave is mostly empty leaves SMs idle for a whole tile's time.
inline double last_wave_fill(const TileGrid& grid, int sm_count) {
  const int64_t sms = std::max(sm_count, 1);
  const int64_t waves = (grid.tiles() + sms - 1) / sms;
  return waves == 0 ? 1.0 : double(grid.tiles()) / double(waves * sms);
}

// auto's priority for cutlass (docs/dispatch.md: cublaslt 30 where its table prefers it, else 5;
// cuda 20). The rule reads the waves of D's 128 x 128 tiles over the SMs (tile_grid_of) and how
// full the last one is, pure functions of the call and the device. Derived on the H200 (bf16) from
// the public shapes and the derive set, never from the held-out shapes; per case, cutlass's time
// over the faster of cuda and cublaslt (docs/dev/cutlass_backend.md):
//   - forward activation epilogues (ACT .. ACT_AUX_BIAS): from 7 waves on, median 0.93 (270 cases,
//     2026-12-01 20:30 UTC): 35, above cublaslt's 30. From 1.5 to 7 waves, median 0.965 (90), the
//     slower ones against cuBLASLt's fused epilogues: 25, between cuda's 20 and cublaslt. From 0.75
//     waves on too (2026-12-02 05:27 UTC, with the prepared launches of cutlass_backend.cpp): on
//     the grids of 128 and 192 tiles (512,1024,4096 and 1000,768,3072) cutlass took 0.73-1.04 of
//     cuda's time with every activation, on 48 tiles (256,768,3072) 1.0-1.3, so 25 from 0.75 waves
//     and 1 below. Where the smaller tiles of small forward grids run (tile_config_for, gemm_k
//     <= 1024), on those 48 tiles cutlass took 0.78-0.90 of the cuda backend's time (the tiles lab
//     of 2026-12-03 08:43 UTC, its ACT_BIAS and ACT_AUX_BIAS cases, against the 06:25 benchmark):
//     25 below 0.75 waves too. The identity with an aux (ACT_AUX, ACT_AUX_BIAS), which cuBLASLt has
//     no epilogue for and cuda runs through its fp32 intermediate (median 0.80 over cuda below 1.5
//     waves, 6 cases, 03:12 UTC): 25 at every size.
//   - DACT and DACT_BGRAD: from 7 waves on, median 0.971 and 0.976, the slowest 1.078 and 1.006 (40
//     cases each, cooperative kernels, 2026-12-02 03:12 UTC; the ping-pong ones that run there
//     since 05:28 were 3-16% faster in the tiles lab): 35. Below 7 waves it follows the grid's
//     last wave: where it is at least 90% full (and the grid at least half a wave), cutlass ran
//     as fast as cuda or faster (1024,2048,8192 with 128 tiles, 4096,1024,4096 and 512,8192,8192
//     with 256, 1536,5120,5120 with 480, 2048,4096,12288 with 512), and where it is not, 10-30%
//     slower (2048,2560,10240 with 320 tiles, 3000,1536,6144 with 288, 2048,768,3072 with 96): 25.
//     A simulation of auto over the 03:27 and 05:27 runs' per-backend times had the derive part at
//     1.0978 and 1.1724 with the fill rule, 1.1009 and 1.1793 without it. Where the last wave is
//     less full, the time cutlass loses to idle SMs is a fixed fraction of its GEMM while the
//     time cuda loses to its fp32 round trip is a fraction that shrinks as gemm_k grows, so the
//     rule also takes cutlass where backward_gradient_time_ratio (below) predicts it faster:
//     fitted to the public and derive grids of 0.5-7 waves of the 15:41 UTC run of 2026-12-02
//     (100 cases), it chose as the 90% rule did there, and on the held-out grids of that run
//     (70 cases) it took the held-out cases over 1.03x the faster of the two from 17 to 4
//     (docs/dispatch.md, "The activation gradients below 7 waves"). Where the cooperative 128 x 64
//     tile runs (backward_grid_wants_smaller_tile: at most one of its tiles per SM, beta = 0),
//     cutlass took 0.806-0.975 of cuda's time on geometric mean per shape (2026-12-04 17:40 UTC,
//     the three derive shapes with such grids): 25 there, whatever the waves.
//   - where the activation epilogues, forward or backward, run on the cooperative 128 x 96 tile
//     (grid_fills_the_sms_once_with_96_column_tiles): 25. In the tiles lab of 2026-12-06 (H100)
//     that tile took 1.04-1.14 of cuBLAS's plain GEMM on the two grids it was derived from, where
//     the 2026-12-04 20:00 UTC benchmark (H200) had the cuda backend at 1.26-1.46 and cutlass's
//     128 x 128 tiles at 1.26-1.49.
//   - where the activation gradients run on the cooperative 128 x 192 tile
//     (grid_fills_the_sms_once_with_192_column_tiles): 25, whatever the time model says. In the
//     benchmark of 2026-12-06 21:52 UTC (H100) the two held-out shapes it takes, 768,4096,14336 and
//     1536,2048,5632, had auto's data gradients at 0.946 and 0.898 of the cuda backend's time on
//     geometric mean (auto ran cuda there before), 1.021 and 1.065 of the plain GEMM.
//   - the plain epilogues (DEFAULT, BIAS) and the bias gradients of an operand: 1, below every
//     other device backend.
// The predicted time of an activation gradient on cutlass over its time on cuda, for a grid of
// 0.5 to 7 waves of 128 x 128 tiles whose last wave is `fill` full: exp of a linear function of
// log(1 / fill) (the idle SMs of the last wave) and 1024 / gemm_k (cuda's round trip of the fp32
// intermediate over its GEMM's time). Least squares on the log of the measured ratio over the 100
// public and derive cases of 0.5-7 waves of the 12:00 UTC run of 2026-12-04 (H200, bf16; the
// residuals' standard deviation 0.044), the first with the cutlass row sums' last step of
// core/row_partial_sums.cuh. The bias gradient's term of the earlier fit (+0.033 on the 15:41 UTC
// run of 2026-12-02, +0.030-0.033 on three later runs) came out at -0.0005 there, so it is gone:
// DACT_BGRAD costs cutlass what DACT does, relative to cuda (docs/dev/cutlass_backend.md, "The row
// sums' last step"). gemm_k is held to the range it was fitted on, 3072 to 16384: outside it the
// straight line is an extrapolation (a tiny gemm_k would predict any grid faster on cutlass).
inline double backward_gradient_time_ratio(double fill, int64_t gemm_k) {
  constexpr double kIntercept = -0.0080, kPerLogIdle = 0.703, kPerShortK = -0.620;
  constexpr int64_t kFittedMinK = 3072, kFittedMaxK = 16384;
  const double k = double(std::min(std::max(gemm_k, kFittedMinK), kFittedMaxK));
  return std::exp(kIntercept + kPerLogIdle * std::log(1.0 / std::max(fill, 1e-3)) + kPerShortK * 1024.0 / k);
}

// Calls whose matrices TMA cannot move as they are (`movement`, and `copies_operands`: A or B copied
// for TMA, cutlass_staged_operands.hpp) break the 16-byte rules of cuBLAS's fast kernels too, and
// cuBLAS runs them far below its speed on the aligned calls beside them: 35 for every epilogue the
// kernels have, DEFAULT and BIAS included. Measured on the H200 (bf16; docs/dev/cutlass_backend.md,
// "Unaligned matrices"): the forward pass of three 50257-output layers (D's rows 2-byte aligned),
// cutlass's DEFAULT and BIAS at 0.17-0.22 of cuBLAS's plain GEMM and its activation epilogues at
// 0.25-0.38, where the cuda backend took 1.08-1.13; their data gradients (dY and W copied) at
// 0.42-0.56 (cuda 0.92-1.01), 14:33 UTC on 2026-12-05 (bench/results/h200-2026-12-05-copies/);
// 3001,1022,4094's forward pass (X and W copied, D and aux staged through shared memory) at
// 0.71-0.72 for DEFAULT and BIAS and 1.02 on geomean for the activation epilogues, cuda faster on 2
// of 18 (ACT_AUX(gelu_erf) by 10%, ACT_AUX_BIAS(gelu_erf) by 1%), 17:14 UTC on 2026-12-07
// (bench/results/h200-2026-12-07-staged-stores/).
inline int auto_priority_for(const GemmCall& call, const DeviceFacts& device,
                             MatrixMovement movement = MatrixMovement::tma, bool copies_operands = false) {
  if (movement != MatrixMovement::tma || copies_operands) return 35;
  const EpilogueParts parts = call.parts();
  if (parts.activation == EPIGEMM_ACTIVATION_IDENTITY && !parts.uses_aux()) return 1;  // DEFAULT, BIAS, BGRAD*
  const TileGrid grid = tile_grid_of(call);
  const double waves = double(grid.tiles()) / double(std::max(device.sm_count, 1));
  if (waves >= 7.0) return 35;
  const KernelFamily family =
      parts.backward() ? KernelFamily::backward_activation_bgrad : KernelFamily::forward_activation_aux;
  const TileConfig tile = tile_config_for(family, call, device);
  if (tile == TileConfig::cooperative_128x96x64_without_source ||
      tile == TileConfig::cooperative_128x192x64_without_source) {
    return 25;
  }
  if (parts.backward()) {
    if (backward_grid_wants_smaller_tile(call, device)) return 25;
    if (waves < 0.5) return 1;
    const double fill = last_wave_fill(grid, device.sm_count);
    if (fill >= 0.9) return 25;
    return backward_gradient_time_ratio(fill, call.gemm_k) < 1.0 ? 25 : 1;
  }
  if (waves >= 0.75 || parts.activation == EPIGEMM_ACTIVATION_IDENTITY) return 25;
  return forward_grid_wants_smaller_tiles(call, device) ? 25 : 1;
}

inline const char* tile_config_name(TileConfig tile) {
  switch (tile) {
    case TileConfig::cooperative_128x128x64: return "cooperative 128x128x64 cluster 1x1x1";
    case TileConfig::pingpong_128x128x64: return "pingpong 128x128x64 cluster 1x1x1";
    case TileConfig::pingpong_128x128x64_epilogue_64x64: return "pingpong 128x128x64 cluster 1x1x1 epilogue 64x64";
    case TileConfig::pingpong_128x128x64_without_source: return "pingpong 128x128x64 cluster 1x1x1 without source";
    case TileConfig::pingpong_128x128x64_epilogue_64x64_without_source:
      return "pingpong 128x128x64 cluster 1x1x1 epilogue 64x64 without source";
    case TileConfig::pingpong_64x128x64: return "pingpong 64x128x64 cluster 1x1x1";
    case TileConfig::pingpong_64x128x64_without_source: return "pingpong 64x128x64 cluster 1x1x1 without source";
    case TileConfig::cooperative_128x64x64: return "cooperative 128x64x64 cluster 1x1x1";
    case TileConfig::cooperative_128x64x64_without_source: return "cooperative 128x64x64 cluster 1x1x1 without source";
    case TileConfig::cooperative_128x96x64_without_source: return "cooperative 128x96x64 cluster 1x1x1 without source";
    case TileConfig::cooperative_128x192x64_without_source:
      return "cooperative 128x192x64 cluster 1x1x1 without source";
    case TileConfig::cooperative_256x128x64_cluster_1x2: return "cooperative 256x128x64 cluster 1x2x1";
    case TileConfig::cooperative_256x128x64_cluster_1x2_without_source:
      return "cooperative 256x128x64 cluster 1x2x1 without source";
    case TileConfig::pingpong_128x128x64_direct_store: return "pingpong 128x128x64 cluster 1x1x1 direct store";
  }
  return "invalid tile configuration";
}

}  // namespace cutlass_backend
}  // namespace epigemm

#if defined(__CUDACC__) && defined(EPIGEMM_CUTLASS_KERNEL_TU)
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/dispatch_policy.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>

namespace epigemm {
namespace cutlass_backend {

// 16 bytes, what TMA needs of every base address and every stride and CUTLASS of the contiguous
// extents of the matrices it moves, in elements of a 16-bit type.
constexpr int kTmaAlignmentElements = 8;

// Two consumer warp groups share one kTileM x 128 output tile (cooperative; kTileM / 2 rows each),
// the producer warp feeds them through TMA; the grid is persistent (one CTA per SM) and the
// epilogue of one tile overlaps the main loop of the next only across CTAs. kClusterN CTAs along
// gemm_n form a cluster.
// The epilogue walks the tile in subtiles of CUTLASS's choice (EpilogueTileAuto: 128 x 32 here).
// kReadsSource: whether the kernel can read D's old values (C = D, beta != 0); one that cannot
// has no shared memory for them, which leaves its main loop more of it (the 256 x 128 forward
// tile: 4 stages instead of 3), and CUTLASS delays its TMA stores.
template <int kTileM, int kClusterN, int kTileN = 128, bool kReadsSourceValue = true>
struct Cooperative {
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::Int<kClusterN>, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto;
  static constexpr bool kReadsSource = kReadsSourceValue;
  static constexpr bool kDirectStore = false;
};

// Two consumer warp groups, each with an output tile of its own: while one runs its tile's
// epilogue, the other runs the main loop of the next (ordered by barriers, so the tensor cores
// alternate between them). The epilogue then hides under the other group's main loop, at the
// price of a kTileM x 128 fp32 accumulator per warp group (128 registers a thread for 128 rows, 64
// for the 64-row tile of small grids). The epilogue walks
// the tile in subtiles of EpilogueTile: CUTLASS's choice (EpilogueTileAuto, 64 x 32: 16 elements a
// thread between a shared-memory barrier and the subtile's TMA store) or a shape given.
// kReadsSource as for Cooperative (without a source: the 64 x 64 subtile's main loop gets 6 stages
// instead of 5, CUTLASS's 64 x 32 one stays at 6; both get delayed TMA stores).
template <int kClusterN, class EpilogueTileShape = cutlass::epilogue::collective::EpilogueTileAuto, int kTileM = 128,
          bool kReadsSourceValue = true>
struct Pingpong {
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::Int<kClusterN>, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
  using EpilogueTile = EpilogueTileShape;
  static constexpr bool kReadsSource = kReadsSourceValue;
  static constexpr bool kDirectStore = false;
};

// The 128 x 128 ping-pong tile with the epilogue of cutlass_direct_store_epilogue.cuh, for the D,
// aux or bias that TMA cannot move (MatrixMovement): the bias is read element by element, and D and
// aux are staged through a tile in shared memory (34 KB of it, taken from the main loop's stages)
// and written out a column at a time, D's old values read into it first where beta != 0 (one
// kernel for every beta). A and B through TMA; each consumer warp group's stores then
// overlap the other's main loop.
struct DirectStore {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto;
  static constexpr bool kReadsSource = true;
  static constexpr bool kDirectStore = true;
};

// The CUTLASS types of a TileConfig value. (A cluster of two CTAs along gemm_n computes tiles of
// the same rows of D, and loads A's tile once for both through TMA multicast: Cooperative<256, 2>
// runs long calls on large grids, "The 256 x 128 tile under sustained load" in
// docs/dev/cutlass_backend.md; Pingpong<2> was measured and not kept, "Larger tiles and clusters".)
template <TileConfig tile>
struct ConfigOf;
template <>
struct ConfigOf<TileConfig::cooperative_128x128x64> : Cooperative<128, 1> {};
template <>
struct ConfigOf<TileConfig::pingpong_128x128x64> : Pingpong<1> {};
template <>
struct ConfigOf<TileConfig::pingpong_128x128x64_epilogue_64x64> : Pingpong<1, cute::Shape<cute::_64, cute::_64>> {};
template <>
struct ConfigOf<TileConfig::pingpong_128x128x64_without_source>
    : Pingpong<1, cutlass::epilogue::collective::EpilogueTileAuto, 128, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::pingpong_128x128x64_epilogue_64x64_without_source>
    : Pingpong<1, cute::Shape<cute::_64, cute::_64>, 128, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::pingpong_64x128x64>
    : Pingpong<1, cutlass::epilogue::collective::EpilogueTileAuto, 64> {};
template <>
struct ConfigOf<TileConfig::pingpong_64x128x64_without_source>
    : Pingpong<1, cutlass::epilogue::collective::EpilogueTileAuto, 64, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::cooperative_128x64x64> : Cooperative<128, 1, 64> {};
template <>
struct ConfigOf<TileConfig::cooperative_128x64x64_without_source> : Cooperative<128, 1, 64, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::cooperative_128x96x64_without_source> : Cooperative<128, 1, 96, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::cooperative_128x192x64_without_source>
    : Cooperative<128, 1, 192, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::cooperative_256x128x64_cluster_1x2> : Cooperative<256, 2> {};
template <>
struct ConfigOf<TileConfig::cooperative_256x128x64_cluster_1x2_without_source>
    : Cooperative<256, 2, 128, /*kReadsSource=*/false> {};
template <>
struct ConfigOf<TileConfig::pingpong_128x128x64_direct_store> : DirectStore {};

// The host's facts (tile_shape_of) and CUTLASS's types must describe the same tiles: the tile
// order, the tile rule and the row partial sums' layout read the former.
template <TileConfig tile>
constexpr bool shapes_agree() {
  using Config = ConfigOf<tile>;
  constexpr TileShape facts = tile_shape_of(tile);
  return cute::size<0>(typename Config::TileShape{}) == facts.m &&
         cute::size<1>(typename Config::TileShape{}) == facts.n &&
         cute::size<0>(typename Config::ClusterShape{}) == facts.cluster_m &&
         cute::size<1>(typename Config::ClusterShape{}) == facts.cluster_n;
}

}  // namespace cutlass_backend
}  // namespace epigemm
#endif
