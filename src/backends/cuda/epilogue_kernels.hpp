// Host-side interface of the cuda backend's epilogue kernels (epilogue_kernels.cu). Plain C++:
// cuda_backend.cpp and the GPU benchmark include it without nvcc.
//
// Every matrix here is column-major in GEMM coordinates (docs/conventions.md, "Layout"): element
// (i, j) of an m x n matrix is at data[i + j * ld], i < gemm_m along a column, j < gemm_n.
//
// The tile kernels (element-wise epilogues, DGELU_BGRAD, and the BGRADB sums when op(B) = B^T)
// share one geometry: a block of threads_x x threads_y = 256 threads owns 8 threads_x
// consecutive rows and a chunk of columns; each thread owns 8 rows and walks the chunk's columns
// threads_y apart. On the vector path its 8 rows are contiguous (one 16-byte access for 2-byte
// dtypes, two for fp32); on the scalar path (32 x 8 threads) they are 32 apart, so each warp
// access is still coalesced. Row sums (bias gradients) are
// reduced per block in a fixed order and written as per-chunk partials into the workspace; a
// second kernel adds the partials of a row in chunk order. No floating-point atomics anywhere,
// so the sums are bitwise repeatable for a given shape on a given device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/tile_configs.hpp"
#include "core/status.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {
namespace cuda {

// What a tile kernel computes per element; acc is the GEMM result (fp32 or D's dtype).
enum class TileOp {
  bias,           // D = acc + bias[i]
  gelu_aux,       // aux = acc; D = gelu_tanh(acc)
  gelu_aux_bias,  // z = acc + bias[i]; aux = z; D = gelu_tanh(z)
  dgelu,          // D = acc * gelu_tanh'(aux)
  dgelu_bgrad,    // g = acc * gelu_tanh'(aux); D = g; row partial sums of g
  row_sums,       // row partial sums of acc only (BGRADB when op(B) = B^T: "acc" is B)
  bias_broadcast, // D = bias[i], acc not read (BIAS through the GEMM's beta: C = the bias)
};
constexpr int kTileOpCount = 7;

struct TileArgs {
  int64_t rows = 0;  // m
  int64_t cols = 0;  // n
  const void* acc = nullptr;
  epigemm_dtype_t acc_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_acc = 0;
  void* d = nullptr;  // may equal acc (in place)
  epigemm_dtype_t d_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_d = 0;
  void* aux = nullptr;  // written by gelu_aux*, read by dgelu*
  epigemm_dtype_t aux_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_aux = 0;
  const void* bias = nullptr;  // length rows
  epigemm_dtype_t bias_dtype = EPIGEMM_DTYPE_F32;
  float* row_partials = nullptr;  // dgelu_bgrad, row_sums: [column_chunks x rows] fp32
};

// The configuration each op uses, indexed by TileOp: the best mean over the three largest public
// shapes on the H200 in two runs (kernel_config rows; the 2026-11-30 00:56 and 01:05 UTC sweeps,
// docs/dev/cuda_backend.md; where two were within noise, the better on the small shapes).
constexpr int kDefaultVectorConfig[kTileOpCount] = {9, 9, 12, 1, 8, 5, 5};

// Grid size in waves: the column chunks are sized so that the grid holds about `waves` times the
// blocks that are resident at once. One wave: every block streams one long run of columns and
// there is no partly filled last wave, but the blocks finish at different times and the last
// ones leave most multiprocessors idle; more waves of shorter blocks let the hardware scheduler
// fill that tail. Per op, by measurement (bench/epigemm_bench_gpu, kernel_waves rows).
constexpr int kMaxWaves = 8;
// Size rules (KernelTuning::size_rules): a tensor of fewer elements than this runs one wave, and
// a tensor with fewer rows than a block of its configuration covers runs a narrower variant
// (tile_config_for_rows, tile_configs.hpp). Measured on the H200 at 1.5M-16M elements: 8 waves
// of tiny blocks, and 256-thread rows over 768-1024 rows (half the threads idle), cost 10-30%.
constexpr int64_t kOneWaveBelowElements = int64_t(8) << 20;
constexpr int kDefaultWaves[kTileOpCount] = {8, 8, 8, 8, 4, 1, 1};

// Per-device launch facts, read once when the backend is created.
struct KernelTuning {
  int sm_count = 0;
  // Resident blocks per multiprocessor of each tile kernel: [op][0][0] the scalar path,
  // [op][1 + c][w] the vector path in configuration c, w = 2 (acc fp32) + (aux fp32).
  int blocks_per_sm[kTileOpCount][kTileConfigCount + 1][4] = {};
  // The vector configuration launch_tile_kernel uses per op (kDefaultVectorConfig; the benchmark
  // changes it to measure the others).
  int vector_config[kTileOpCount] = {};
  // The waves launch_tile_kernel uses per op (kDefaultWaves; 1 to kMaxWaves).
  int waves[kTileOpCount] = {};
  // Apply the size rules above (the benchmark turns them off to time a configuration as named).
  bool size_rules = true;
  // Launch the row sums' finish kernel as a programmatic dependent of the tile kernel (its launch
  // overlaps the tile kernel's tail); the benchmark turns it off to measure what it saves.
  bool dependent_launch = true;
};

// Reads the device's multiprocessor count and each tile kernel's occupancy. Fails (with CUDA's
// message) when this build holds no kernel image for the current device.
Status query_kernel_tuning(KernelTuning* tuning);

// Whether a call's operands allow the 16-byte vector path: rows % 8 == 0, every leading
// dimension % 8 == 0 and every pointer 16-byte aligned.
bool tile_vector_path(TileOp op, const TileArgs& args);

// fp32 elements of row partials that launch_tile_kernel may write for `rows` x `cols`, whatever
// path it takes (the workspace is sized before the pointers' alignment is known).
int64_t row_partial_elements(const KernelTuning& tuning, TileOp op, int64_t rows, int64_t cols);

// One pass over the tile. For dgelu_bgrad / row_sums it also adds up the partials into
// `row_sums_out` (length rows, in its own dtype) with a second, deterministic kernel.
// rows > 0 and cols > 0.
Status launch_tile_kernel(const KernelTuning& tuning, TileOp op, const TileArgs& args,
                          void* row_sums_out, epigemm_dtype_t row_sums_dtype, cudaStream_t stream);

// out[j] = sum over p < rows of x[p + j * ld] (BGRADB when op(B) = B: columns are contiguous),
// one block per column, a fixed-order tree. cols > 0.
Status launch_column_sums(const void* x, epigemm_dtype_t x_dtype, int64_t rows, int64_t cols,
                          int64_t ld, void* out, epigemm_dtype_t out_dtype, cudaStream_t stream);

// dst = scale * src over rows x cols (with dtype conversion); read_src = false writes zeros and
// never touches src (beta = 0 must not read D). Used for gemm_k = 0 and to widen D_old into the
// fp32 intermediate when beta != 0.
Status launch_scale_copy(const void* src, epigemm_dtype_t src_dtype, int64_t ld_src, void* dst,
                         epigemm_dtype_t dst_dtype, int64_t ld_dst, int64_t rows, int64_t cols,
                         float scale, bool read_src, cudaStream_t stream);

}  // namespace cuda
}  // namespace epigemm
