// The size rule of the cuda backend's tile kernels on rows (tile_config_for_rows in
// src/backends/cuda/tile_configs.hpp): host-only, so it runs on every machine, GPU or not.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/cuda/tile_configs.hpp"

namespace {

using epigemm::cuda::kRowsPerThread;
using epigemm::cuda::kTileConfigCount;
using epigemm::cuda::kTileConfigs;
using epigemm::cuda::tile_config_for_rows;

// Rows around every block height a configuration has (512, 1024, 2048) and far from them.
constexpr int64_t kRows[] = {1, 8, 64, 255, 511, 512, 513, 768, 1023, 1024, 1025, 2047, 2048, 4096};

int64_t block_rows(int config) { return int64_t(kTileConfigs[config].threads_x) * kRowsPerThread; }

TEST(TileConfigForRows, NeverWidensABlockAndKeepsEverythingButTheWidth) {
  for (int config = 0; config < kTileConfigCount; ++config) {
    for (const int64_t rows : kRows) {
      const int chosen = tile_config_for_rows(config, rows);
      ASSERT_GE(chosen, 0);
      ASSERT_LT(chosen, kTileConfigCount);
      SCOPED_TRACE("config " + std::to_string(config) + " (threads_x " +
                   std::to_string(kTileConfigs[config].threads_x) + "), rows " + std::to_string(rows));
      EXPECT_LE(kTileConfigs[chosen].threads_x, kTileConfigs[config].threads_x);
      EXPECT_EQ(kTileConfigs[chosen].batch, kTileConfigs[config].batch);
      EXPECT_EQ(kTileConfigs[chosen].min_blocks, kTileConfigs[config].min_blocks);
      EXPECT_EQ(kTileConfigs[chosen].prefetch, kTileConfigs[config].prefetch);
      // A tensor that fills the block keeps the configuration.
      if (rows >= block_rows(config)) {
        EXPECT_EQ(chosen, config);
      }
    }
  }
}

TEST(TileConfigForRows, WideBlocksOnShortTensorsTakeTheir128ThreadVariant) {
  int narrowed = 0;
  for (int config = 0; config < kTileConfigCount; ++config) {
    if (kTileConfigs[config].threads_x <= 128) continue;
    for (const int64_t rows : kRows) {
      if (rows >= block_rows(config)) continue;
      const int chosen = tile_config_for_rows(config, rows);
      if (chosen == config) continue;  // no 128-thread variant with the same batch and cap
      EXPECT_EQ(kTileConfigs[chosen].threads_x, 128) << "config " << config << ", rows " << rows;
      ++narrowed;
    }
  }
  // The 256-thread configurations {256, 2, 4} and {256, 4, 4} have 128-thread variants.
  EXPECT_GT(narrowed, 0);
}

TEST(TileConfigForRows, SixtyFourThreadConfigurationsKeepTheirOwnOnShortTensors) {
  int checked = 0;
  for (int config = 0; config < kTileConfigCount; ++config) {
    if (kTileConfigs[config].threads_x != 64) continue;
    for (const int64_t rows : {int64_t(1), int64_t(100), int64_t(511)}) {
      EXPECT_EQ(tile_config_for_rows(config, rows), config) << "config " << config << ", rows " << rows;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
