// The launch configurations of the cuda backend's tile kernels (epilogue_kernels.hpp describes
// the geometry) and the size rule that narrows one for short tensors. Plain C++ without CUDA
// headers, so host-only tests can check the rule.
#pragma once

#include <cstdint>

namespace epigemm {
namespace cuda {

// Rows a thread of a tile kernel owns: one 16-byte bf16/fp16 vector. A block of threads_x
// threads along rows covers kRowsPerThread * threads_x rows.
constexpr int kRowsPerThread = 8;

// Launch configurations of the vector path: threads of a block along rows (the block's
// contiguous run per column is 8 threads_x elements), columns loaded per thread before
// computing (bytes in flight per thread) and the blocks per multiprocessor that the register
// cap guarantees (warps in flight). Chosen per op by measurement (docs/dev/cuda_backend.md,
// bench/epigemm_bench_gpu prints every configuration).
struct TileConfig {
  int threads_x;
  int batch;
  int min_blocks;
  bool prefetch;  // the next batch's loads issued before this batch is computed
};
constexpr int kTileConfigCount = 13;
constexpr TileConfig kTileConfigs[kTileConfigCount] = {
    {128, 2, 4, false}, {256, 2, 4, false}, {128, 4, 3, false}, {128, 4, 4, false},
    {256, 4, 4, false}, {128, 8, 4, false},
    // 2026-11-30 candidates for the 32M-element tensors: more registers per thread (no cap at 64);
    // 64-thread rows (512-row tiles: a row-sum kernel writes a quarter of the partials of a
    // 2048-row tile for the same number of blocks); the software-pipelined loop.
    {256, 2, 3, false}, {256, 4, 3, false}, {64, 2, 4, false}, {64, 4, 4, false},
    {256, 2, 3, true}, {64, 2, 3, true}, {128, 2, 4, true}};

// The size rule on rows (KernelTuning::size_rules): a tensor with fewer rows than a block of
// `config` covers (kRowsPerThread * threads_x) runs the 128-thread-row variant of `config` (same
// batch, register cap and prefetch), when `config` is wider than that and the variant exists;
// otherwise `config` itself. It only ever narrows a block: a 64-thread configuration (512-row
// blocks) keeps its own on short tensors. Measured on the H200: 256-thread rows over 768-1024
// rows, half the threads idle, cost 10-30% (docs/dev/cuda_backend.md, "Size rules").
constexpr int tile_config_for_rows(int config, int64_t rows) {
  constexpr int kNarrowThreadsX = 128;
  const TileConfig wide = kTileConfigs[config];
  if (int64_t(wide.threads_x) * kRowsPerThread <= rows || wide.threads_x <= kNarrowThreadsX) {
    return config;
  }
  for (int c = 0; c < kTileConfigCount; ++c) {
    const TileConfig& narrow = kTileConfigs[c];
    if (narrow.threads_x == kNarrowThreadsX && narrow.batch == wide.batch &&
        narrow.min_blocks == wide.min_blocks && narrow.prefetch == wide.prefetch) {
      return c;
    }
  }
  return config;
}

}  // namespace cuda
}  // namespace epigemm
