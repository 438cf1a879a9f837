// The host-side plan of the cuda backend's tile kernels (tile_kernel.cuh): which parts each kernel
// is compiled for, the launch configuration the library uses per kernel, the size rules, and how a
// grid is cut into blocks. Plain C++ with no CUDA dependency, so the rules are unit-tested on any
// machine (tests/test_cuda_backend.cpp) and shared with the kernel lab (dev/cuda/).
//
// Geometry (every matrix column-major in GEMM coordinates, element (i, j) at i + j * ld): a block
// of threads_x x threads_y = 256 threads owns 8 threads_x consecutive rows and a chunk of columns;
// each thread owns 8 rows and walks the chunk's columns threads_y apart. On the vector path its 8
// rows are contiguous (one 16-byte access for 2-byte dtypes, two for fp32); on the scalar path
// (32 x 8 threads) they are 32 apart, so each warp access is still coalesced.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/epilogue_math.hpp"
#include "core/epilogue_parts.hpp"

namespace epigemm {
namespace cuda {

constexpr int kBlockThreads = 256;   // threads_x along rows times threads_y along columns
constexpr int kRowsPerThread = 8;    // one 16-byte bf16/fp16 vector
constexpr int kScalarThreadsX = 32;  // the scalar path's tile: 32 x 8 threads, 256 rows
constexpr int kScalarBatch = 2;      // columns loaded before they are computed (scalar path)

// The tile kernels, by the parts they are compiled for (tile_op_parts). The ones marked "act" are
// instantiated once per activation functor (core/epilogue_math.hpp); the others use none.
enum class TileOp : int {
  act,             // D = act(acc)                                         (ACT)
  act_bias,        // D = act(acc + bias[i])                               (BIAS: identity; ACT_BIAS)
  act_aux,         // aux = acc; D = act(acc)                              (ACT_AUX)
  act_aux_bias,    // z = acc + bias[i]; aux = z; D = act(z)               (ACT_AUX_BIAS)
  dact,            // D = acc * act'(aux)                                  (DACT)
  dact_bgrad,      // g = acc * act'(aux); D = g; row partial sums of g    (DACT_BGRAD)
  row_sums,        // row partial sums of acc, no D (bias gradient of an operand's rows)
  bias_broadcast,  // D = bias[i], acc not read (BIAS through the GEMM's beta: C = the bias)
};
constexpr int kTileOpCount = 8;

// What a tile kernel reads, computes and writes per element; a compile-time constant inside the
// kernel, which branches on these and on nothing else.
struct TileOpParts {
  bool reads_acc;       // acc is loaded (else z starts from the bias)
  bool adds_bias;       // z = acc + bias[i] (or z = bias[i] without acc)
  bool writes_aux;      // aux = z
  bool reads_aux;       // backward: D = acc * act'(aux); else forward: D = act(z)
  bool sums_rows;       // per-row partial sums of the result
  bool writes_d;        // D is stored
  bool has_activation;  // instantiated per activation (else the identity only)
};

constexpr TileOpParts tile_op_parts(TileOp op) {
  switch (op) {
    //                                     acc    bias   aux out aux in sums   D      act
    case TileOp::act:            return {true,  false, false, false, false, true,  true};
    case TileOp::act_bias:       return {true,  true,  false, false, false, true,  true};
    case TileOp::act_aux:        return {true,  false, true,  false, false, true,  true};
    case TileOp::act_aux_bias:   return {true,  true,  true,  false, false, true,  true};
    case TileOp::dact:           return {true,  false, false, true,  false, true,  true};
    case TileOp::dact_bgrad:     return {true,  false, false, true,  true,  true,  true};
    case TileOp::row_sums:       return {true,  false, false, false, true,  false, false};
    case TileOp::bias_broadcast: return {false, true,  false, false, false, true,  false};
  }
  return {};
}

// The tile kernel of an epilogue whose element-wise work depends on acc
// (parts.computes_on_acc(); BGRADB / BGRADA sums are launched separately as row_sums).
inline TileOp tile_op_for(const EpilogueParts& parts) {
  if (parts.backward()) {
    return parts.bias_grad == BiasGradPart::rows_of_gradient ? TileOp::dact_bgrad : TileOp::dact;
  }
  if (parts.writes_aux()) return parts.reads_bias() ? TileOp::act_aux_bias : TileOp::act_aux;
  return parts.reads_bias() ? TileOp::act_bias : TileOp::act;
}

// Activations, by their enum value 0 .. kActivationCount - 1 (the values of epigemm.h).
#define EPIGEMM_COUNT_ACTIVATION(value, functor, name) +1
constexpr int kActivationCount = 0 EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_COUNT_ACTIVATION);
#undef EPIGEMM_COUNT_ACTIVATION

// A launch configuration of the vector path: threads of a block along rows (the block's
// contiguous run per column is 8 threads_x elements), columns loaded per thread before computing
// (bytes in flight per thread), the blocks per multiprocessor that the register cap guarantees
// (warps in flight), and whether the next batch's loads are issued before this batch is computed.
struct TileConfig {
  int threads_x;
  int batch;
  int min_blocks;
  bool prefetch;
};
constexpr bool operator==(const TileConfig& x, const TileConfig& y) {
  return x.threads_x == y.threads_x && x.batch == y.batch && x.min_blocks == y.min_blocks &&
         x.prefetch == y.prefetch;
}
constexpr bool operator!=(const TileConfig& x, const TileConfig& y) { return !(x == y); }

// The configuration and the grid size in waves each kernel uses, indexed by TileOp: the best mean
// over the three largest public shapes on the H200. First two sweeps of 13 configurations with
// gelu_tanh (2026-11-30 00:56 and 01:05 UTC, bench/results/h200-2026-11-30-*-sweep.csv in git
// history; the sweep itself is dev/cuda/epilogue_kernels_lab.cu); then, once the activations took
// 2^x and the reciprocal from the hardware without range fix-ups (fewer instructions per
// element), the lab run of 2026-12-01 07:13 UTC (10 repetitions, mean over every activation and
// the three tensors) moved three ops: ACT and ACT_AUX from 64,4,4 to 64,2,4 (mean 0.962 and
// 0.914 of copy), ACT_BIAS from 64,4,4 to 128,2,4 with prefetch (0.959; with 64,4,4 gelu_tanh's
// ACT_BIAS kernel fell to 0.74-0.77 of copy and silu's to 0.81-0.88). ACT_AUX_BIAS had moved from
// 128,2,4 with prefetch to 64,2,4 after the run of 06:49 (at least as fast with every activation;
// relu and the identity lost most with prefetch). The lab of 2026-12-01 15:39 UTC (after the
// kernels' 16-bit conversions became compile-time constants for bf16 and gelu_erf lost four
// instructions per element) moved ACT to 128,4,4: 0.924-0.931 of copy on the 4096 x 8192 tensor
// with each activation against 0.90-0.92 at 64,2,4, the same within 1% on the two larger tensors
// (means over the 12 pairs of activation and tensor: 0.968 against 0.967).
constexpr TileConfig kLibraryConfig[kTileOpCount] = {
    {128, 4, 4, false},  // act            (as GELU_AUX)
    {128, 2, 4, true},   // act_bias       (BIAS)
    {64, 2, 4, false},   // act_aux        (GELU_AUX)
    {64, 2, 4, false},   // act_aux_bias   (GELU_AUX_BIAS)
    {256, 2, 4, false},  // dact           (DGELU)
    {64, 2, 4, false},   // dact_bgrad     (DGELU_BGRAD)
    {128, 8, 4, false},  // row_sums       (BGRADB's sums)
    {128, 8, 4, false},  // bias_broadcast
};
// Grid size in waves: the column chunks are sized so that the grid holds about `waves` times the
// blocks that are resident at once. One wave: every block streams one long run of columns, but
// the blocks finish at different times and the last ones leave most multiprocessors idle; more
// waves of shorter blocks let the hardware scheduler fill that tail.
constexpr int kLibraryWaves[kTileOpCount] = {8, 8, 8, 8, 8, 4, 1, 1};
constexpr int kMaxWaves = 8;

// Size rules, measured on the H200 at 1.5M-16M elements (8 waves of tiny blocks, and 256-thread
// rows over 768-1024 rows with half the threads idle, cost 10-30% there):
//   - a tensor of fewer elements than kOneWaveBelowElements runs one wave;
//   - a tensor with fewer rows than a block of its configuration covers runs the narrower
//     variant: a configuration wider than 128 threads along rows becomes 128 threads wide, with
//     the rest unchanged. A configuration of 128 threads or fewer is never changed (never widened).
constexpr int64_t kOneWaveBelowElements = int64_t(8) << 20;
constexpr int kNarrowThreadsX = 128;

constexpr TileConfig narrower_config(TileConfig config) {
  return config.threads_x > kNarrowThreadsX
             ? TileConfig{kNarrowThreadsX, config.batch, config.min_blocks, config.prefetch}
             : config;
}

// The configuration that runs `config` on a tensor of `rows` rows.
constexpr TileConfig config_for_rows(TileConfig config, int64_t rows) {
  return int64_t(config.threads_x) * kRowsPerThread > rows ? narrower_config(config) : config;
}

// The waves a grid over rows x cols gets.
constexpr int waves_for_size(int waves, int64_t rows, int64_t cols) {
  return rows * cols < kOneWaveBelowElements ? 1 : std::min(kMaxWaves, std::max(1, waves));
}

// A grid: row tiles of 8 threads_x rows, and the columns cut into chunks of columns_per_chunk.
struct TilePlan {
  int64_t row_tiles = 0;
  int64_t column_chunks = 0;
  int64_t columns_per_chunk = 0;
};

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits the columns into chunks so that the grid has about `target_blocks` blocks: every thread
// row of a block gets at least one column, and grid.y stays within CUDA's 65535.
inline TilePlan plan_tiles(int64_t rows, int64_t cols, int threads_x, int64_t target_blocks) {
  TilePlan plan;
  const int threads_y = kBlockThreads / threads_x;
  plan.row_tiles = ceil_div(rows, int64_t(threads_x) * kRowsPerThread);
  const int64_t wanted_chunks = std::max<int64_t>(1, ceil_div(target_blocks, plan.row_tiles));
  int64_t per_chunk = ceil_div(cols, wanted_chunks);
  per_chunk = ceil_div(per_chunk, threads_y) * threads_y;
  per_chunk = std::max<int64_t>(per_chunk, ceil_div(cols, 65535));
  plan.columns_per_chunk = per_chunk;
  plan.column_chunks = ceil_div(cols, per_chunk);
  return plan;
}

// Blocks that fill the device `waves` times with a kernel of that occupancy.
constexpr int64_t target_blocks(int sm_count, int blocks_per_sm, int waves) {
  return int64_t(sm_count) * std::max(1, blocks_per_sm) * waves;
}

// The kernels the library compiles per (op, activation): the scalar path, and on the vector path
// the op's configuration and its narrower variant (when that differs), each for fp32 or 2-byte
// acc and aux (only the widths the op loads).
struct KernelVariant {
  bool vector = false;
  bool narrowed = false;  // vector path: narrower_config of the op's configuration
  bool wide_acc = false;  // vector path: acc is fp32 (else fp16/bf16)
  bool wide_aux = false;  // vector path: aux is fp32 (else fp16/bf16)
};
constexpr int kKernelVariantCount = 9;  // scalar + 2 configurations x 4 widths

constexpr int kernel_variant_index(const KernelVariant& k) {
  return k.vector ? 1 + (k.narrowed ? 4 : 0) + (k.wide_acc ? 2 : 0) + (k.wide_aux ? 1 : 0) : 0;
}
constexpr KernelVariant kernel_variant_of_index(int index) {
  return index == 0 ? KernelVariant{}
                    : KernelVariant{true, (index - 1) >= 4, ((index - 1) & 2) != 0, ((index - 1) & 1) != 0};
}

// Whether the library compiles this variant of the op (the widths it loads; a narrower variant
// only where it differs; ACT with the identity is D = acc, which needs no kernel).
constexpr bool library_has_kernel(TileOp op, epigemm_activation_t activation, const KernelVariant& k) {
  const TileOpParts parts = tile_op_parts(op);
  if (!parts.has_activation && activation != EPIGEMM_ACTIVATION_IDENTITY) return false;
  if (op == TileOp::act && activation == EPIGEMM_ACTIVATION_IDENTITY) return false;
  if (!k.vector) return !k.narrowed && !k.wide_acc && !k.wide_aux;
  if (k.narrowed && narrower_config(kLibraryConfig[int(op)]) == kLibraryConfig[int(op)]) return false;
  if (k.wide_acc && !parts.reads_acc) return false;
  if (k.wide_aux && !parts.reads_aux) return false;
  return true;
}

}  // namespace cuda
}  // namespace epigemm
