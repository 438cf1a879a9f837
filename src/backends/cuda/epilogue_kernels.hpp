// Host-side interface of the cuda backend's epilogue kernels (epilogue_kernels.cu). Plain C++:
// cuda_backend.cpp and the GPU benchmark include it without nvcc.
//
// Every matrix here is column-major in GEMM coordinates (docs/conventions.md, "Layout"): element
// (i, j) of an m x n matrix is at data[i + j * ld], i < gemm_m along a column, j < gemm_n.
//
// The tile kernels (tile_kernel.cuh: every element-wise epilogue, DACT_BGRAD, and the row sums of
// an operand) share one geometry and one plan (tile_plan.hpp). The library compiles, per tile op
// and activation, the scalar path and the op's one vector configuration (kLibraryConfig, with its
// narrower variant for short tensors); the other configurations are the kernel lab's
// (dev/cuda/epilogue_kernels_lab.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/tile_plan.hpp"
#include "core/status.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {
namespace cuda {

struct TileArgs {
  int64_t rows = 0;  // m
  int64_t cols = 0;  // n
  const void* acc = nullptr;
  epigemm_dtype_t acc_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_acc = 0;
  void* d = nullptr;  // may equal acc (in place)
  epigemm_dtype_t d_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_d = 0;
  void* aux = nullptr;  // written by act_aux*, read by dact*
  epigemm_dtype_t aux_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_aux = 0;
  const void* bias = nullptr;  // length rows
  epigemm_dtype_t bias_dtype = EPIGEMM_DTYPE_F32;
  float* row_partials = nullptr;  // dact_bgrad, row_sums: [column_chunks x rows] fp32
};

// Per-device launch facts, read once when the backend is created.
struct KernelTuning {
  int sm_count = 0;
  // Resident blocks per multiprocessor of each kernel the library compiles
  // (library_has_kernel), [op][activation][kernel_variant_index]; 0 for the others.
  int blocks_per_sm[kTileOpCount][kActivationCount][kKernelVariantCount] = {};
};

// Reads the device's multiprocessor count and the occupancy of each compiled tile kernel. Fails
// (with CUDA's message) when this build holds no kernel image for the current device.
Status query_kernel_tuning(KernelTuning* tuning);

// Whether a call's operands allow the 16-byte vector path: rows % 8 == 0, every leading
// dimension % 8 == 0 and every pointer the op touches 16-byte aligned.
bool tile_vector_path(TileOp op, const TileArgs& args);

// The kernel variant launch_tile_kernel runs for these operands.
KernelVariant tile_kernel_variant(TileOp op, const TileArgs& args);

// The grid launch_tile_kernel uses for a variant on rows x cols.
TilePlan library_tile_plan(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                           const KernelVariant& variant, int64_t rows, int64_t cols);

// fp32 elements of row partials that launch_tile_kernel may write for `rows` x `cols`, whatever
// variant it runs (the workspace is sized before the pointers' alignment is known). 0 for an op
// without row sums.
int64_t row_partial_elements(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                             int64_t rows, int64_t cols);

// One pass over the tile with the op's kernel for `activation` (ignored by the ops without
// one). For dact_bgrad / row_sums it also adds up the partials into `row_sums_out` (length rows,
// in its own dtype) with a second, deterministic kernel. rows > 0 and cols > 0.
Status launch_tile_kernel(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                          const TileArgs& args, void* row_sums_out, epigemm_dtype_t row_sums_dtype,
                          cudaStream_t stream);

// out[j] = sum over p < rows of x[p + j * ld] (an operand's sums when they run down its stored
// columns), one block per column, a fixed-order tree. cols > 0.
Status launch_column_sums(const void* x, epigemm_dtype_t x_dtype, int64_t rows, int64_t cols,
                          int64_t ld, void* out, epigemm_dtype_t out_dtype, cudaStream_t stream);

// dst = scale * src over rows x cols (with dtype conversion); read_src = false writes zeros and
// never touches src (beta = 0 must not read D). Used for gemm_k = 0, to widen D_old into the
// fp32 intermediate when beta != 0, and for empty sums.
Status launch_scale_copy(const void* src, epigemm_dtype_t src_dtype, int64_t ld_src, void* dst,
                         epigemm_dtype_t dst_dtype, int64_t ld_dst, int64_t rows, int64_t cols,
                         float scale, bool read_src, cudaStream_t stream);

}  // namespace cuda
}  // namespace epigemm
