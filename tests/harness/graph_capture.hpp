// CUDA-graph capture of library calls, shared by the GPU backends' tests (built with CUDA only).
#pragma once

#ifdef EPIGEMM_TESTS_WITH_CUDA

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "harness/harness.hpp"

namespace epigemm_test {

#define ASSERT_CUDA(expr)                                                        \
  do {                                                                           \
    const cudaError_t err_ = (expr);                                             \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);   \
  } while (0)

// The cases' calls on `backend`, captured into one CUDA graph on a non-blocking stream in global
// capture mode (where an allocation, a host synchronization or a device-to-host copy inside a call
// makes the capture fail), after one uncaptured run of each (CUDA loads kernel modules lazily on
// the first launch, which is not what this is about); then the graph replayed twice, each time on
// fresh inputs written into the same buffers (random numbers named by seed_name) and with poisoned
// outputs, and every call checked against the reference as run by `backend`.
void check_graph_capture_and_replay(Context& ctx, const std::vector<GemmCase>& cases, epigemm_backend_t backend,
                                    const char* seed_name);

}  // namespace epigemm_test

#endif  // EPIGEMM_TESTS_WITH_CUDA
