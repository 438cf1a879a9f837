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

// Per-device launch facts. The multiprocessor count is read when the backend is created; the
// occupancy of a kernel (cudaOccupancyMaxActiveBlocksPerMultiprocessor, which neither
// synchronizes nor allocates) is asked the first time a plan needs it and kept here, so a context
// only ever asks about the kernels its calls use, each once.
//
// Why a query and not a compile-time value: __launch_bounds__(256, min_blocks) only guarantees
// at least min_blocks resident blocks (1 on the scalar path); how many fit is decided by the
// registers ptxas allocates and the row-sum kernels' shared memory, known after compilation. A
// constant would differ from the query wherever ptxas uses fewer registers than the cap, and the
// grid (hence the order of the bias-gradient partial sums) would change. The query, with the
// same arguments as before, gives the same number as when it ran at creation, so grids and
// results are bitwise what they were.
struct KernelTuning {
  int sm_count = 0;
  // Resident blocks per multiprocessor of each kernel the library compiles
  // (library_has_kernel), [op][activation][kernel_variant_index]; 0 for the others and until
  // asked (occupancy_known).
  mutable int blocks_per_sm[kTileOpCount][kActivationCount][kKernelVariantCount] = {};
  mutable bool occupancy_known[kTileOpCount][kActivationCount][kKernelVariantCount] = {};
  mutable int occupancy_queries = 0;  // calls of the occupancy calculator so far (for the tests)
};

// Reads the device's multiprocessor count and checks that this build holds a kernel image for
// the current device (one kernel's attributes; the occupancy of each kernel is asked on first use,
// see KernelTuning). Fails with CUDA's message when it does not.
Status query_kernel_tuning(KernelTuning* tuning);

// The resident blocks per multiprocessor of the kernel of (op, activation, variant): from the
// tuning's cache, or asked of CUDA the first time and kept (an op without an activation has its
// kernels under the identity). 0 for a kernel the library does not compile. Fails with CUDA's message when CUDA cannot answer (nothing is kept then).
Status kernel_blocks_per_sm(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                            const KernelVariant& variant, int* blocks);

// Whether a call's operands allow the 16-byte vector path: rows % 8 == 0, every leading
// dimension % 8 == 0 and every pointer the op touches 16-byte aligned.
bool tile_vector_path(TileOp op, const TileArgs& args);

// The kernel variant launch_tile_kernel runs for these operands.
KernelVariant tile_kernel_variant(TileOp op, const TileArgs& args);

// The grid launch_tile_kernel uses for a variant on rows x cols (kernel_blocks_per_sm's failure
// when the kernel's occupancy cannot be asked).
Status library_tile_plan(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                         const KernelVariant& variant, int64_t rows, int64_t cols, TilePlan* plan);

// fp32 elements of row partials that launch_tile_kernel may write for `rows` x `cols`, whatever
// variant it runs (the workspace is sized before the pointers' alignment is known). 0 for an op
// without row sums. Where a kernel's occupancy cannot be asked, its plan is taken with one block
// per multiprocessor; launch_tile_kernel then asks again and fails before launching if CUDA still
// cannot answer, and if it can, Context::execute's own workspace query, made just before the
// launch, sees the same grid and refuses a workspace sized for fewer partials.
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
