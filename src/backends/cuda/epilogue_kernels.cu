// The cuda backend's epilogue kernels as the library uses them: the tile kernel of
// tile_kernel.cuh instantiated, per tile op and activation, for the scalar path and the op's one
// vector configuration (kLibraryConfig and its narrower variant); the column sums of an operand
// and the scale-copy. The math is core/epilogue_math.hpp's functors, the ones the reference
// backend calls.
#include <algorithm>

#include "backends/cuda/epilogue_kernels.hpp"
#include "backends/cuda/tile_kernel.cuh"

namespace epigemm {
namespace cuda {
namespace {

using tile::load1;

constexpr int kColumnSumThreads = 256;

// One block per column j: out[j] = sum over p of x[p + j * ld], threads strided over p, then a
// fixed tree in shared memory.
__global__ void __launch_bounds__(kColumnSumThreads)
    column_sums_kernel(const void* x, epigemm_dtype_t x_dtype, int64_t rows, int64_t ld, void* out,
                       epigemm_dtype_t out_dtype) {
  const int64_t j = blockIdx.x;
  float total = 0.0f;
  for (int64_t p = threadIdx.x; p < rows; p += kColumnSumThreads) {
    total += load1(x, x_dtype, p + j * ld);
  }
  __shared__ float partial[kColumnSumThreads];
  partial[threadIdx.x] = total;
  __syncthreads();
  for (int width = kColumnSumThreads / 2; width > 0; width /= 2) {
    if (int(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) store1(out, out_dtype, j, partial[0]);
}

__global__ void scale_copy_kernel(const void* src, epigemm_dtype_t src_dtype, int64_t ld_src,
                                  void* dst, epigemm_dtype_t dst_dtype, int64_t ld_dst,
                                  int64_t rows, int64_t cols, float scale, bool read_src) {
  const int64_t total = rows * cols;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e % rows, j = e / rows;
    const float value = read_src ? scale * load1(src, src_dtype, i + j * ld_src) : 0.0f;
    store1(dst, dst_dtype, i + j * ld_dst, value);
  }
}

// ---- host side ------------------------------------------------------------------------------

Status check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return EPIGEMM_BACKEND_ERROR(what, " failed to launch: ", cudaGetErrorString(err));
  }
  return Status();
}

// The compiled kernel of (op, activation functor, variant); nullptr where the library compiles
// none (library_has_kernel).
template <TileOp kOp, class Act>
const void* library_kernel(const KernelVariant& k) {
  if (!library_has_kernel(kOp, Act::id, k)) return nullptr;
  if constexpr (kOp == TileOp::act && std::is_same_v<Act, Identity>) {
    return nullptr;  // D = acc: no kernel (and none instantiated)
  } else if constexpr (!tile_op_parts(kOp).has_activation && !std::is_same_v<Act, Identity>) {
    return nullptr;
  } else {
    if (!k.vector) return tile::scalar_tile_kernel<kOp, Act>();
    constexpr TileConfig wide = kLibraryConfig[int(kOp)];
    constexpr TileConfig narrow = narrower_config(wide);
    if (k.narrowed) {
      if constexpr (narrow != wide) {
        return tile::vector_tile_kernel<kOp, Act, narrow.threads_x, narrow.batch, narrow.min_blocks,
                                        narrow.prefetch>(k.wide_acc, k.wide_aux);
      }
      return nullptr;
    }
    return tile::vector_tile_kernel<kOp, Act, wide.threads_x, wide.batch, wide.min_blocks,
                                    wide.prefetch>(k.wide_acc, k.wide_aux);
  }
}

template <TileOp kOp>
const void* library_kernel_of(epigemm_activation_t activation, const KernelVariant& k) {
  if constexpr (tile_op_parts(kOp).has_activation) {
    return visit_activation(activation, [&](auto act) { return library_kernel<kOp, decltype(act)>(k); });
  } else {
    return activation == EPIGEMM_ACTIVATION_IDENTITY ? library_kernel<kOp, Identity>(k) : nullptr;
  }
}

const void* library_kernel_for(TileOp op, epigemm_activation_t activation, const KernelVariant& k) {
  switch (op) {
    case TileOp::act: return library_kernel_of<TileOp::act>(activation, k);
    case TileOp::act_bias: return library_kernel_of<TileOp::act_bias>(activation, k);
    case TileOp::act_aux: return library_kernel_of<TileOp::act_aux>(activation, k);
    case TileOp::act_aux_bias: return library_kernel_of<TileOp::act_aux_bias>(activation, k);
    case TileOp::dact: return library_kernel_of<TileOp::dact>(activation, k);
    case TileOp::dact_bgrad: return library_kernel_of<TileOp::dact_bgrad>(activation, k);
    case TileOp::row_sums: return library_kernel_of<TileOp::row_sums>(activation, k);
    case TileOp::bias_broadcast: return library_kernel_of<TileOp::bias_broadcast>(activation, k);
  }
  return nullptr;
}

// The ops without an activation have their kernels under the identity.
epigemm_activation_t kernel_activation(TileOp op, epigemm_activation_t activation) {
  return tile_op_parts(op).has_activation ? activation : EPIGEMM_ACTIVATION_IDENTITY;
}

int threads_x_of(TileOp op, const KernelVariant& k) {
  if (!k.vector) return kScalarThreadsX;
  const TileConfig config = kLibraryConfig[int(op)];
  return (k.narrowed ? narrower_config(config) : config).threads_x;
}

// The grid of a variant on rows x cols for a kernel of that occupancy (0: one block per
// multiprocessor).
TilePlan tile_plan_with(int sm_count, int blocks_per_sm, TileOp op, const KernelVariant& variant,
                        int64_t rows, int64_t cols) {
  const int waves = waves_for_size(kLibraryWaves[int(op)], rows, cols);
  return plan_tiles(rows, cols, threads_x_of(op, variant), target_blocks(sm_count, blocks_per_sm, waves));
}

}  // namespace

Status query_kernel_tuning(KernelTuning* tuning) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&tuning->sm_count, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return EPIGEMM_BACKEND_ERROR("reading the device: ", cudaGetErrorString(err));
  // Every kernel of this file is in one image: one kernel's attributes say whether the build has
  // an image for this device (it is built for sm_90a), without loading the others.
  cudaFuncAttributes attributes;
  err = cudaFuncGetAttributes(&attributes, scale_copy_kernel);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return EPIGEMM_BACKEND_ERROR("the epilogue kernels cannot run on this device: ", cudaGetErrorString(err));
  }
  return Status();
}

Status kernel_blocks_per_sm(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                            const KernelVariant& variant, int* blocks) {
  activation = kernel_activation(op, activation);
  const int o = int(op), a = int(activation), v = kernel_variant_index(variant);
  if (tuning.occupancy_known[o][a][v]) {
    *blocks = tuning.blocks_per_sm[o][a][v];
    return Status();
  }
  *blocks = 0;
  const void* kernel = library_kernel_for(op, activation, variant);
  if (kernel != nullptr) {
    ++tuning.occupancy_queries;
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, kBlockThreads, 0);
    if (err != cudaSuccess) {
      *blocks = 0;
      cudaGetLastError();  // reported here, not by the next launch check
      return EPIGEMM_BACKEND_ERROR("the occupancy of an epilogue kernel (op ", o, ", activation ", a,
                                   ", variant ", v, "): ", cudaGetErrorString(err));
    }
  }
  tuning.blocks_per_sm[o][a][v] = *blocks;
  tuning.occupancy_known[o][a][v] = true;
  return Status();
}

bool tile_vector_path(TileOp op, const TileArgs& args) {
  const TileOpParts p = tile_op_parts(op);
  if (args.rows % kRowsPerThread != 0) return false;
  if (p.reads_acc && (!tile::aligned16(args.acc) || args.ld_acc % kRowsPerThread != 0)) return false;
  if (p.writes_d && (!tile::aligned16(args.d) || args.ld_d % kRowsPerThread != 0)) return false;
  if ((p.reads_aux || p.writes_aux) && (!tile::aligned16(args.aux) || args.ld_aux % kRowsPerThread != 0)) {
    return false;
  }
  if (p.adds_bias && !tile::aligned16(args.bias)) return false;
  return true;
}

KernelVariant tile_kernel_variant(TileOp op, const TileArgs& args) {
  KernelVariant k;
  k.vector = tile_vector_path(op, args);
  if (!k.vector) return k;
  const TileConfig config = kLibraryConfig[int(op)];
  k.narrowed = config_for_rows(config, args.rows) != config;
  const TileOpParts p = tile_op_parts(op);
  k.wide_acc = p.reads_acc && args.acc_dtype == EPIGEMM_DTYPE_F32;
  k.wide_aux = p.reads_aux && args.aux_dtype == EPIGEMM_DTYPE_F32;
  return k;
}

Status library_tile_plan(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                         const KernelVariant& variant, int64_t rows, int64_t cols, TilePlan* plan) {
  int blocks_per_sm = 0;
  EPIGEMM_RETURN_IF_ERROR(
      kernel_blocks_per_sm(tuning, op, kernel_activation(op, activation), variant, &blocks_per_sm));
  *plan = tile_plan_with(tuning.sm_count, blocks_per_sm, op, variant, rows, cols);
  return Status();
}

int64_t row_partial_elements(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                             int64_t rows, int64_t cols) {
  if (!tile_op_parts(op).sums_rows || rows == 0 || cols == 0) return 0;
  // The most chunks over every variant the call may run (its path depends on the pointers).
  int64_t chunks = 0;
  const epigemm_activation_t kernel_act = kernel_activation(op, activation);
  for (int v = 0; v < kKernelVariantCount; ++v) {
    const KernelVariant k = kernel_variant_of_index(v);
    if (!library_has_kernel(op, kernel_act, k)) continue;
    TilePlan plan;
    if (!library_tile_plan(tuning, op, kernel_act, k, rows, cols, &plan).ok()) {
      plan = tile_plan_with(tuning.sm_count, 0, op, k, rows, cols);  // see the header
    }
    chunks = std::max(chunks, plan.column_chunks);
  }
  return chunks * rows;
}

Status launch_tile_kernel(const KernelTuning& tuning, TileOp op, epigemm_activation_t activation,
                          const TileArgs& args, void* row_sums_out, epigemm_dtype_t row_sums_dtype,
                          cudaStream_t stream) {
  const epigemm_activation_t kernel_act = kernel_activation(op, activation);
  const KernelVariant k = tile_kernel_variant(op, args);
  const void* kernel = library_kernel_for(op, kernel_act, k);
  if (kernel == nullptr) {
    return error(EPIGEMM_STATUS_INTERNAL_ERROR, "no tile kernel is compiled for op ", int(op),
                 " with activation ", int(kernel_act));
  }
  TilePlan plan;
  EPIGEMM_RETURN_IF_ERROR(library_tile_plan(tuning, op, kernel_act, k, args.rows, args.cols, &plan));
  EPIGEMM_RETURN_IF_ERROR(tile::launch_tile(kernel, threads_x_of(op, k), plan, tile_op_parts(op).sums_rows,
                                            args, row_sums_out, row_sums_dtype,
                                            /*dependent_launch=*/true, stream));
  return check_launch("tile epilogue kernel");
}

Status launch_column_sums(const void* x, epigemm_dtype_t x_dtype, int64_t rows, int64_t cols,
                          int64_t ld, void* out, epigemm_dtype_t out_dtype, cudaStream_t stream) {
  column_sums_kernel<<<unsigned(cols), kColumnSumThreads, 0, stream>>>(x, x_dtype, rows, ld, out,
                                                                       out_dtype);
  return check_launch("column_sums_kernel");
}

Status launch_scale_copy(const void* src, epigemm_dtype_t src_dtype, int64_t ld_src, void* dst,
                         epigemm_dtype_t dst_dtype, int64_t ld_dst, int64_t rows, int64_t cols,
                         float scale, bool read_src, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(rows * cols, threads), 65536);
  scale_copy_kernel<<<unsigned(blocks), threads, 0, stream>>>(src, src_dtype, ld_src, dst, dst_dtype,
                                                              ld_dst, rows, cols, scale, read_src);
  return check_launch("scale_copy_kernel");
}

}  // namespace cuda
}  // namespace epigemm
