// The order in which an interleaved timing loop runs its n variants in each round (the GPU
// benchmark's interleaved_median_ms in cuda_timing.cuh). Plain C++ so that the CPU tests check it
// (tests/test_round_order.cpp).
//
// Why not a rotation: a call meets the L2 as the call before it left it (the inputs it read, the
// dirty lines it has not written back; up to a fifth of a kernel's time on shapes whose tensors
// fit in the H200's 60 MB L2). Rotating one fixed order moves every variant through every
// position, but keeps each variant's predecessor: in 0 1 2 3, 1 2 3 0, 2 3 0 1, ... variant 2
// always follows 1 (or starts the round). So a variant after one that leaves a large fp32
// intermediate behind paid for it in every round.
//
// A Williams design (a balanced Latin square) fixes both: over one block of rounds every variant
// holds every position equally often and follows every other variant equally often. For even n
// the block is n rounds, round r being the first row shifted by r, with the first row
// 0, 1, n-1, 2, n-2, 3, ...; for odd n that alone is not balanced, and the block is 2n rounds:
// those n, then the same n reversed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace epigemm_bench {

// Rounds in one balanced block for n variants.
inline size_t balanced_block_rounds(size_t n) { return n % 2 == 0 ? n : 2 * n; }

// The variants of round `round` (any non-negative number: the design repeats every block), in the
// order they run. n = 0 gives an empty order.
inline std::vector<size_t> balanced_round_order(size_t n, size_t round) {
  std::vector<size_t> order(n);
  if (n == 0) return order;
  const size_t r = round % balanced_block_rounds(n);
  const size_t shift = r % n;
  size_t low = 1, high = n - 1;
  for (size_t j = 0; j < n; ++j) {
    const size_t first = j == 0 ? 0 : j % 2 == 1 ? low++ : high--;
    order[j] = (first + shift) % n;
  }
  if (r >= n) std::reverse(order.begin(), order.end());  // the second half of an odd block
  return order;
}

}  // namespace epigemm_bench
