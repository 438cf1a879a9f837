// The GPU benchmark's order of variants in the rounds of an interleaved timing loop
// (bench/harness/round_order.hpp): over one block every variant holds every position equally
// often and follows every other variant equally often, which the rotation it replaced did not
// (its variants always followed the same one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "harness/round_order.hpp"

namespace {

using epigemm_bench::balanced_block_rounds;
using epigemm_bench::balanced_round_order;

TEST(BenchRoundOrder, EveryPositionAndEveryPredecessorEquallyOften) {
  for (size_t n = 1; n <= 9; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const size_t block = balanced_block_rounds(n);
    EXPECT_EQ(block, n % 2 == 0 ? n : 2 * n);
    std::vector<std::vector<size_t>> at_position(n, std::vector<size_t>(n, 0));
    std::vector<std::vector<size_t>> after(n, std::vector<size_t>(n, 0));  // after[b][a]: b right after a
    for (size_t r = 0; r < block; ++r) {
      const std::vector<size_t> order = balanced_round_order(n, r);
      ASSERT_EQ(order.size(), n);
      std::vector<size_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (size_t v = 0; v < n; ++v) ASSERT_EQ(sorted[v], v) << "round " << r << " is not a permutation";
      for (size_t j = 0; j < n; ++j) ++at_position[order[j]][j];
      for (size_t j = 1; j < n; ++j) ++after[order[j]][order[j - 1]];
    }
    const size_t per_position = block / n;
    const size_t per_pair = n == 1 ? 0 : block * (n - 1) / (n * (n - 1));
    for (size_t v = 0; v < n; ++v) {
      for (size_t j = 0; j < n; ++j) EXPECT_EQ(at_position[v][j], per_position) << "variant " << v << ", position " << j;
      for (size_t a = 0; a < n; ++a) {
        EXPECT_EQ(after[v][a], a == v ? 0 : per_pair) << "variant " << v << " after " << a;
      }
    }
  }
}

TEST(BenchRoundOrder, RepeatsEveryBlockAndHandlesNoVariants) {
  EXPECT_TRUE(balanced_round_order(0, 3).empty());
  for (size_t n : {4, 7}) {
    const size_t block = balanced_block_rounds(n);
    for (size_t r = 0; r < block; ++r) EXPECT_EQ(balanced_round_order(n, r), balanced_round_order(n, r + 3 * block));
  }
  // The first round of four: 0 1 3 2; the rotation it replaced ran 0 1 2 3 and then 1 2 3 0.
  EXPECT_EQ(balanced_round_order(4, 0), (std::vector<size_t>{0, 1, 3, 2}));
  EXPECT_EQ(balanced_round_order(4, 1), (std::vector<size_t>{1, 2, 0, 3}));
}

}  // namespace
