// The last step of a bias gradient on the GPU, shared by the cuda and the cutlass backends: a
// kernel has written each row's partial sums (one per chunk of columns, fp32, unrounded) to the
// workspace, and add_row_partials adds them in a fixed order and rounds once to the output dtype.
// No floating-point atomics, so the sums are bitwise repeatable for a given call on a given
// device. Included by CUDA translation units only.
//
// Layout: the partial of row i over chunk c is at partials[i + c * row_stride] (row_stride >= rows;
// the cuda backend's tile kernel writes row_stride = rows, CUTLASS's column reduction writes
// row_stride = rows rounded up to the tile's M extent), so a warp's 32 rows of one chunk are one
// 128-byte load.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dependent_launch.hpp"
#include "core/dtype.hpp"
#include "core/status.hpp"

namespace epigemm {

// Stores one value in its dtype, rounded to nearest even (the host's conversions in numeric.hpp).
__device__ __forceinline__ void store1(void* base, epigemm_dtype_t dtype, int64_t offset, float value) {
  if (dtype == EPIGEMM_DTYPE_F32) {
    static_cast<float*>(base)[offset] = value;
    return;
  }
  const unsigned short as_bf16 = __bfloat16_as_ushort(__float2bfloat16_rn(value));
  const unsigned short as_f16 = __half_as_ushort(__float2half_rn(value));
  static_cast<uint16_t*>(base)[offset] = dtype == EPIGEMM_DTYPE_BF16 ? as_bf16 : as_f16;
}

// A block of kRowPartialRows x kRowPartialLanes threads owns kRowPartialRows rows; thread (x, y)
// adds chunks y, y + kRowPartialLanes, ... of row x in that order, then the lanes of a row are
// added in y order: a fixed order for a given number of chunks, so the result does not depend on
// timing. The kernel is latency-bound (a few MB of partials at most): 32 lanes and an unrolled loop
// put every load of a row in flight at once. With 8 lanes and a loop of dependent iterations it
// cost the cuda backend 10-20% of a bias reduction on the H200; the cutlass backend's one thread
// per row, adding a row's partials one after the other, was part of the 3-6 us that its DACT_BGRAD
// took over DACT on calls of 20-200 us (docs/dev/cutlass_backend.md, "The row sums' last step").
constexpr int kRowPartialRows = 32;
constexpr int kRowPartialLanes = 32;

// (A template, like every kernel in a header that several translation units include.)
template <int kRows, int kLanes>
__global__ void __launch_bounds__(kRows * kLanes)
    add_row_partials_kernel(const float* partials, int64_t chunks, int64_t rows, int64_t row_stride, void* out,
                            epigemm_dtype_t out_dtype) {
  // Launched as a programmatic dependent of the kernel that wrote the partials (launch_add_row_
  // partials): wait until that kernel has completed and its writes are visible.
#if __CUDA_ARCH__ >= 900  // before Hopper the launch is plain stream-ordered: nothing to wait for
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x;
  float total = 0.0f;
  if (i < rows) {
#pragma unroll 4
    for (int64_t c = threadIdx.y; c < chunks; c += kLanes) total += partials[c * row_stride + i];
  }
  __shared__ float lane_sums[kLanes][kRows];
  lane_sums[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0 && i < rows) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < kLanes; ++y) sum += lane_sums[y][threadIdx.x];
    store1(out, out_dtype, i, sum);
  }
}

// out[i] = the sum of row i's partials (above), for i < rows; out has its own dtype. With
// dependent_launch the kernel is a programmatic dependent of the previous kernel on the stream: its
// launch overlaps that kernel's tail (all of it where the previous kernel signals
// griddepcontrol.launch_dependents early, as the cuda backend's tile kernel does; its last CTAs'
// exit otherwise) instead of starting after it; stream order and CUDA graph capture are kept.
inline Status launch_add_row_partials(const float* partials, int64_t chunks, int64_t rows, int64_t row_stride,
                                      void* out, epigemm_dtype_t out_dtype, bool dependent_launch,
                                      cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      dependent_launch_config(dim3(unsigned((rows + kRowPartialRows - 1) / kRowPartialRows)),
                              dim3(kRowPartialRows, kRowPartialLanes), stream, dependent_launch, &attribute);
  const cudaError_t err =
      cudaLaunchKernelEx(&config, add_row_partials_kernel<kRowPartialRows, kRowPartialLanes>, partials, chunks, rows,
                         row_stride, out, out_dtype);
  if (err != cudaSuccess) {
    return EPIGEMM_BACKEND_ERROR("launch of add_row_partials_kernel (", rows, " rows, ", chunks,
                                 " chunks of partials): ", cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace epigemm
