// The cuda backend's epilogue kernels: element-wise epilogues and the bias-gradient reductions
// (geometry and determinism: epilogue_kernels.hpp). The math is core/epilogue_math.hpp's, the
// same functions the reference backend calls.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/epilogue_kernels.hpp"
#include "core/epilogue_math.hpp"

namespace epigemm {
namespace cuda {
namespace {

constexpr int kBlockThreads = 256;  // threads_x along rows times threads_y along columns
constexpr int kScalarThreadsX = 32;  // the scalar path's tile: 32 x 8 threads, 256 rows
// The scalar path: two columns loaded before they are computed and stored, no register cap.
constexpr int kScalarBatch = 2;

// ---- loads and stores of 8 values (vector path) or 1 value (scalar path), any dtype --------

__device__ __forceinline__ void unpack_pair(uint32_t word, epigemm_dtype_t dtype, float* out) {
  if (dtype == EPIGEMM_DTYPE_BF16) {
    out[0] = __uint_as_float(word << 16);
    out[1] = __uint_as_float(word & 0xffff0000u);
  } else {
    __half2 h;
    memcpy(&h, &word, sizeof h);
    const float2 f = __half22float2(h);
    out[0] = f.x;
    out[1] = f.y;
  }
}

__device__ __forceinline__ uint32_t pack_pair(float a, float b, epigemm_dtype_t dtype) {
  uint32_t word;
  if (dtype == EPIGEMM_DTYPE_BF16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    memcpy(&word, &h, sizeof word);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    memcpy(&word, &h, sizeof word);
  }
  return word;
}

// 8 consecutive elements as loaded, before conversion to float: one 16-byte word for a 2-byte
// dtype, two for fp32 (kWide). The width is a template parameter so that a thread keeps a batch
// of columns in flight in 4 registers per column of bf16 (8 of fp32) instead of 8 floats; a
// runtime width would reserve the fp32 size for every dtype.
template <bool kWide>
struct Raw8;
template <>
struct Raw8<false> {
  uint4 lo;
};
template <>
struct Raw8<true> {
  uint4 lo;
  uint4 hi;
};

// Loads 8 consecutive elements starting at `offset` (a multiple of 8; base 16-byte aligned).
// Plain loads: the streaming hint (ld.global.cs) measured 5-9% slower on the H200 (an fp32
// thread's two 16-byte halves share 32-byte sectors, which .cs evicts between the two loads).
template <bool kWide>
__device__ __forceinline__ void load_raw8(const void* base, int64_t offset, Raw8<kWide>& raw) {
  if constexpr (kWide) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const float*>(base) + offset);
    raw.lo = p[0];
    raw.hi = p[1];
  } else {
    raw.lo = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + offset);
  }
}

template <bool kWide>
__device__ __forceinline__ void zero_raw8(Raw8<kWide>& raw) {
  raw.lo = make_uint4(0, 0, 0, 0);  // 0.0 in every dtype
  if constexpr (kWide) raw.hi = make_uint4(0, 0, 0, 0);
}

// dtype: fp32 when kWide, else fp16 or bf16.
template <bool kWide>
__device__ __forceinline__ void unpack8(const Raw8<kWide>& raw, epigemm_dtype_t dtype, float (&v)[8]) {
  if constexpr (kWide) {
    v[0] = __uint_as_float(raw.lo.x); v[1] = __uint_as_float(raw.lo.y);
    v[2] = __uint_as_float(raw.lo.z); v[3] = __uint_as_float(raw.lo.w);
    v[4] = __uint_as_float(raw.hi.x); v[5] = __uint_as_float(raw.hi.y);
    v[6] = __uint_as_float(raw.hi.z); v[7] = __uint_as_float(raw.hi.w);
  } else {
    unpack_pair(raw.lo.x, dtype, v + 0);
    unpack_pair(raw.lo.y, dtype, v + 2);
    unpack_pair(raw.lo.z, dtype, v + 4);
    unpack_pair(raw.lo.w, dtype, v + 6);
  }
}

// 8 values of any dtype as floats (the bias: once per thread).
__device__ __forceinline__ void load8_floats(const void* base, epigemm_dtype_t dtype, int64_t offset,
                                             float (&v)[8]) {
  if (dtype == EPIGEMM_DTYPE_F32) {
    Raw8<true> raw;
    load_raw8(base, offset, raw);
    unpack8(raw, dtype, v);
  } else {
    Raw8<false> raw;
    load_raw8(base, offset, raw);
    unpack8(raw, dtype, v);
  }
}

__device__ __forceinline__ void store8(void* base, epigemm_dtype_t dtype, int64_t offset,
                                       const float (&v)[8]) {
  if (dtype == EPIGEMM_DTYPE_F32) {
    float4* p = reinterpret_cast<float4*>(static_cast<float*>(base) + offset);
    p[0] = make_float4(v[0], v[1], v[2], v[3]);
    p[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint4 raw;
    raw.x = pack_pair(v[0], v[1], dtype);
    raw.y = pack_pair(v[2], v[3], dtype);
    raw.z = pack_pair(v[4], v[5], dtype);
    raw.w = pack_pair(v[6], v[7], dtype);
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(base) + offset) = raw;
  }
}

__device__ __forceinline__ float load1(const void* base, epigemm_dtype_t dtype, int64_t offset) {
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[offset]);
    case EPIGEMM_DTYPE_F16: return __half2float(static_cast<const __half*>(base)[offset]);
    default: return static_cast<const float*>(base)[offset];
  }
}

__device__ __forceinline__ void store1(void* base, epigemm_dtype_t dtype, int64_t offset,
                                       float value) {
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16:
      static_cast<__nv_bfloat16*>(base)[offset] = __float2bfloat16_rn(value);
      break;
    case EPIGEMM_DTYPE_F16: static_cast<__half*>(base)[offset] = __float2half_rn(value); break;
    default: static_cast<float*>(base)[offset] = value; break;
  }
}

constexpr bool op_reads_bias(TileOp op) {
  return op == TileOp::bias || op == TileOp::gelu_aux_bias || op == TileOp::bias_broadcast;
}
constexpr bool op_reads_acc(TileOp op) { return op != TileOp::bias_broadcast; }
constexpr bool op_writes_aux(TileOp op) {
  return op == TileOp::gelu_aux || op == TileOp::gelu_aux_bias;
}
constexpr bool op_reads_aux(TileOp op) { return op == TileOp::dgelu || op == TileOp::dgelu_bgrad; }
constexpr bool op_sums_rows(TileOp op) { return op == TileOp::dgelu_bgrad || op == TileOp::row_sums; }
constexpr bool op_writes_d(TileOp op) { return op != TileOp::row_sums; }

// The 8 rows a thread owns: contiguous on the vector path, 32 apart on the scalar path.
template <bool kVector, int kThreadsX>
__device__ __forceinline__ int64_t thread_row(int64_t tile_row0, int r) {
  return kVector ? tile_row0 + int64_t(threadIdx.x) * kRowsPerThread + r
                 : tile_row0 + threadIdx.x + int64_t(kThreadsX) * r;
}

// A thread's 8 values of one column while in flight: raw 16-byte words on the vector path,
// floats on the scalar path (where kWide plays no part).
template <bool kVector, bool kWide>
struct Loaded {
  float v[kRowsPerThread];
};
template <bool kWide>
struct Loaded<true, kWide> {
  Raw8<kWide> raw;
};

// Loads the thread's 8 values of column j from an m x n matrix; rows past m read nothing (and
// count as 0).
template <bool kVector, int kThreadsX, bool kWide>
__device__ __forceinline__ void load_rows(const void* base, epigemm_dtype_t dtype, int64_t ld,
                                          int64_t tile_row0, int64_t rows, int64_t j,
                                          Loaded<kVector, kWide>& out) {
  if constexpr (kVector) {
    const int64_t row = thread_row<true, kThreadsX>(tile_row0, 0);
    if (row < rows) {
      load_raw8(base, row + j * ld, out.raw);  // rows % 8 == 0: all 8 rows or none
    } else {
      zero_raw8(out.raw);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t row = thread_row<false, kThreadsX>(tile_row0, r);
      out.v[r] = row < rows ? load1(base, dtype, row + j * ld) : 0.0f;
    }
  }
}

template <bool kVector, bool kWide>
__device__ __forceinline__ void to_floats(const Loaded<kVector, kWide>& in, epigemm_dtype_t dtype,
                                          float (&v)[kRowsPerThread]) {
  if constexpr (kVector) {
    unpack8(in.raw, dtype, v);
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) v[r] = in.v[r];
  }
}

// The bias values of the thread's 8 rows (bias has length rows).
template <bool kVector, int kThreadsX>
__device__ __forceinline__ void load_bias_rows(const void* bias, epigemm_dtype_t dtype,
                                               int64_t tile_row0, int64_t rows, float (&v)[8]) {
  if constexpr (kVector) {
    const int64_t row = thread_row<true, kThreadsX>(tile_row0, 0);
    if (row < rows) {
      load8_floats(bias, dtype, row, v);
    } else {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) v[r] = 0.0f;
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t row = thread_row<false, kThreadsX>(tile_row0, r);
      v[r] = row < rows ? load1(bias, dtype, row) : 0.0f;
    }
  }
}

template <bool kVector, int kThreadsX>
__device__ __forceinline__ void store_rows(void* base, epigemm_dtype_t dtype, int64_t ld,
                                           int64_t tile_row0, int64_t rows, int64_t j,
                                           const float (&v)[8]) {
  if (kVector) {
    const int64_t row = thread_row<true, kThreadsX>(tile_row0, 0);
    if (row < rows) store8(base, dtype, row + j * ld, v);
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t row = thread_row<false, kThreadsX>(tile_row0, r);
      if (row < rows) store1(base, dtype, row + j * ld, v[r]);
    }
  }
}

// ---- the tile kernel ------------------------------------------------------------------------

// grid: (ceil(rows / (8 kThreadsX)), column_chunks); block: kThreadsX x (256 / kThreadsX).
// Block (bx, by) owns rows [8 kThreadsX bx, 8 kThreadsX (bx + 1)) and the columns
// [by * columns_per_chunk, (by + 1) * columns_per_chunk). A wider kThreadsX makes each column's
// run of consecutive bytes per block longer (DRAM pages are read in longer pieces); kBatch
// columns are loaded before any is computed (loads in flight per thread); kMinBlocks caps the
// registers so that that many blocks fit on a multiprocessor (warps in flight per SM).
//
// kPrefetch: the next batch is loaded while this one is computed (see the loop).
// kWideAcc / kWideAux (vector path only): acc / aux are fp32 (else fp16 or bf16).
template <TileOp kOp, bool kVector, int kThreadsX, int kBatch, int kMinBlocks, bool kPrefetch,
          bool kWideAcc, bool kWideAux>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
    tile_kernel(TileArgs args, int64_t columns_per_chunk) {
  constexpr int kThreadsY = kBlockThreads / kThreadsX;
  constexpr int kRowsPerTile = kThreadsX * kRowsPerThread;
  const int64_t tile_row0 = int64_t(blockIdx.x) * kRowsPerTile;
  const int64_t rows = args.rows;

  float bias[kRowsPerThread] = {};
  if constexpr (op_reads_bias(kOp)) {
    load_bias_rows<kVector, kThreadsX>(args.bias, args.bias_dtype, tile_row0, rows, bias);
  }
  float sums[kRowsPerThread] = {};

  const int64_t column_begin = int64_t(blockIdx.y) * columns_per_chunk;
  const int64_t column_end = min(args.cols, column_begin + columns_per_chunk);
  constexpr int64_t kStep = int64_t(kThreadsY) * kBatch;  // columns a thread row advances per batch

  // The batch of columns j0, j0 + kThreadsY, ...: every load issued before any is used, so that
  // they are in flight together.
  auto load_batch = [&](int64_t j0, Loaded<kVector, kWideAcc> (&acc_loaded)[kBatch],
                        Loaded<kVector, kWideAux> (&aux_loaded)[kBatch]) {
#pragma unroll
    for (int c = 0; c < kBatch; ++c) {
      const int64_t j = j0 + int64_t(kThreadsY) * c;
      if (j < column_end) {
        if constexpr (op_reads_acc(kOp)) {
          load_rows<kVector, kThreadsX>(args.acc, args.acc_dtype, args.ld_acc, tile_row0, rows, j, acc_loaded[c]);
        }
        if constexpr (op_reads_aux(kOp)) {
          load_rows<kVector, kThreadsX>(args.aux, args.aux_dtype, args.ld_aux, tile_row0, rows, j, aux_loaded[c]);
        }
      }
    }
  };
  auto compute_batch = [&](int64_t j0, const Loaded<kVector, kWideAcc> (&acc_loaded)[kBatch],
                           const Loaded<kVector, kWideAux> (&aux_loaded)[kBatch]) {
#pragma unroll
    for (int c = 0; c < kBatch; ++c) {
      const int64_t j = j0 + int64_t(kThreadsY) * c;
      if (j >= column_end) break;
      float acc[kRowsPerThread] = {};
      float aux[kRowsPerThread];
      if constexpr (op_reads_acc(kOp)) to_floats(acc_loaded[c], args.acc_dtype, acc);
      if constexpr (op_reads_aux(kOp)) to_floats(aux_loaded[c], args.aux_dtype, aux);
      float out[kRowsPerThread];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const float a = acc[r];
        if constexpr (kOp == TileOp::bias) {
          out[r] = a + bias[r];
        } else if constexpr (kOp == TileOp::bias_broadcast) {
          out[r] = bias[r];
        } else if constexpr (kOp == TileOp::gelu_aux) {
          aux[r] = a;
          out[r] = gelu_tanh(a);
        } else if constexpr (kOp == TileOp::gelu_aux_bias) {
          const float z = a + bias[r];
          aux[r] = z;
          out[r] = gelu_tanh(z);
        } else if constexpr (kOp == TileOp::dgelu || kOp == TileOp::dgelu_bgrad) {
          out[r] = a * gelu_tanh_grad(aux[r]);
        } else {  // row_sums
          out[r] = a;
        }
        // Rows past the end were loaded as 0 and their sums are never written.
        if constexpr (op_sums_rows(kOp)) sums[r] += out[r];
      }
      if constexpr (op_writes_d(kOp)) {
        store_rows<kVector, kThreadsX>(args.d, args.d_dtype, args.ld_d, tile_row0, rows, j, out);
      }
      if constexpr (op_writes_aux(kOp)) {
        store_rows<kVector, kThreadsX>(args.aux, args.aux_dtype, args.ld_aux, tile_row0, rows, j, aux);
      }
    }
  };

  if constexpr (kPrefetch) {
    // Software-pipelined: the next batch's loads are issued before this batch is computed, so
    // a thread always has loads in flight. For short blocks (a few batches per thread, as on a
    // 32M-element tensor in 8 waves) the plain loop waits a full memory latency per batch.
    Loaded<kVector, kWideAcc> acc_loaded[kBatch];
    Loaded<kVector, kWideAux> aux_loaded[kBatch];
    int64_t j0 = column_begin + threadIdx.y;
    if (j0 < column_end) load_batch(j0, acc_loaded, aux_loaded);
    for (; j0 < column_end; j0 += kStep) {
      Loaded<kVector, kWideAcc> acc_next[kBatch];
      Loaded<kVector, kWideAux> aux_next[kBatch];
      if (j0 + kStep < column_end) load_batch(j0 + kStep, acc_next, aux_next);
      compute_batch(j0, acc_loaded, aux_loaded);
#pragma unroll
      for (int c = 0; c < kBatch; ++c) {
        acc_loaded[c] = acc_next[c];
        aux_loaded[c] = aux_next[c];
      }
    }
  } else {
    for (int64_t j0 = column_begin + threadIdx.y; j0 < column_end; j0 += kStep) {
      Loaded<kVector, kWideAcc> acc_loaded[kBatch];
      Loaded<kVector, kWideAux> aux_loaded[kBatch];
      load_batch(j0, acc_loaded, aux_loaded);
      compute_batch(j0, acc_loaded, aux_loaded);
    }
  }

  if constexpr (op_sums_rows(kOp)) {
    // The finish kernel is launched as a programmatic dependent of this one: let it start
    // launching once every block has streamed its columns, so that its launch overlaps the last
    // blocks' partial sums. It still waits for this grid to complete (griddepcontrol.wait)
    // before it reads a partial, so this changes timing only. sm_90 and later only: before
    // Hopper there is no such instruction and the finish kernel starts after this grid.
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    // The kThreadsY threads of a row group hold sums over disjoint columns; add them in
    // threadIdx.y order, then write one partial per row for this column chunk.
    __shared__ float block_sums[kThreadsY][kRowsPerTile];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row_in_tile = kVector ? threadIdx.x * kRowsPerThread + r : threadIdx.x + kThreadsX * r;
      block_sums[threadIdx.y][row_in_tile] = sums[r];
    }
    __syncthreads();
    for (int row_in_tile = threadIdx.y * kThreadsX + threadIdx.x; row_in_tile < kRowsPerTile;
         row_in_tile += kBlockThreads) {
      float total = 0.0f;
#pragma unroll
      for (int y = 0; y < kThreadsY; ++y) total += block_sums[y][row_in_tile];
      const int64_t row = tile_row0 + row_in_tile;
      if (row < rows) args.row_partials[int64_t(blockIdx.y) * rows + row] = total;
    }
  }
}

// out[i] = sum over chunks c of partials[c * rows + i]. A block of 32 x 32 threads owns 32 rows;
// thread (x, y) adds chunks y, y + 32, y + 64, ... of row x in that order, then the 32 sums of
// a row are added in y order: a fixed order, so the result does not depend on timing. The
// kernel is latency-bound (a few MB of partials): 32 lanes and an unrolled loop put every load
// of a row in flight at once (with 8 lanes and a loop of dependent iterations it cost 10-20% of
// a bias reduction on the H200).
constexpr int kFinishRows = 32;
constexpr int kFinishLanes = 32;
__global__ void __launch_bounds__(kFinishRows * kFinishLanes)
    finish_row_sums_kernel(const float* partials, int64_t chunks, int64_t rows, void* out,
                           epigemm_dtype_t out_dtype) {
  // Launched with programmatic stream serialization (see launch_tile_kernel): wait until the
  // tile kernel has completed and its partials are visible. Before sm_90 the launch is plain
  // stream-ordered (the tile kernel has completed when this one starts) and the instruction
  // does not exist.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t i = int64_t(blockIdx.x) * kFinishRows + threadIdx.x;
  float total = 0.0f;
  if (i < rows) {
#pragma unroll 4
    for (int64_t c = threadIdx.y; c < chunks; c += kFinishLanes) total += partials[c * rows + i];
  }
  __shared__ float lane_sums[kFinishLanes][kFinishRows];
  lane_sums[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0 && i < rows) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < kFinishLanes; ++y) sum += lane_sums[y][threadIdx.x];
    store1(out, out_dtype, i, sum);
  }
}

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

// Which compiled tile kernel a launch uses. wide_acc / wide_aux: acc / aux in fp32 (vector path).
struct KernelChoice {
  bool vector = false;
  int config = 0;  // vector path: index into kTileConfigs
  bool wide_acc = false;
  bool wide_aux = false;
  int width_index() const { return (wide_acc ? 2 : 0) + (wide_aux ? 1 : 0); }
};

template <TileOp kOp, int kConfig, bool kWideAcc, bool kWideAux>
const void* vector_kernel() {
  constexpr TileConfig c = kTileConfigs[kConfig];
  return reinterpret_cast<const void*>(
      &tile_kernel<kOp, true, c.threads_x, c.batch, c.min_blocks, c.prefetch, kWideAcc, kWideAux>);
}

// Only the widths an op loads are instantiated: aux width matters where aux is read (dgelu*),
// acc width wherever acc is read.
template <TileOp kOp, int kConfig>
const void* vector_kernel_of_width(bool wide_acc, bool wide_aux) {
  if constexpr (op_reads_acc(kOp) && op_reads_aux(kOp)) {
    if (wide_acc) {
      return wide_aux ? vector_kernel<kOp, kConfig, true, true>() : vector_kernel<kOp, kConfig, true, false>();
    }
    return wide_aux ? vector_kernel<kOp, kConfig, false, true>() : vector_kernel<kOp, kConfig, false, false>();
  } else if constexpr (op_reads_acc(kOp)) {
    return wide_acc ? vector_kernel<kOp, kConfig, true, false>() : vector_kernel<kOp, kConfig, false, false>();
  } else {
    return vector_kernel<kOp, kConfig, false, false>();
  }
}

template <TileOp kOp>
const void* kernel_of(const KernelChoice& k) {
  if (!k.vector) {
    return reinterpret_cast<const void*>(
        &tile_kernel<kOp, false, kScalarThreadsX, kScalarBatch, 1, false, false, false>);
  }
  static_assert(kTileConfigCount == 13, "one case per configuration");
  switch (k.config) {
    case 0: return vector_kernel_of_width<kOp, 0>(k.wide_acc, k.wide_aux);
    case 1: return vector_kernel_of_width<kOp, 1>(k.wide_acc, k.wide_aux);
    case 2: return vector_kernel_of_width<kOp, 2>(k.wide_acc, k.wide_aux);
    case 3: return vector_kernel_of_width<kOp, 3>(k.wide_acc, k.wide_aux);
    case 4: return vector_kernel_of_width<kOp, 4>(k.wide_acc, k.wide_aux);
    case 5: return vector_kernel_of_width<kOp, 5>(k.wide_acc, k.wide_aux);
    case 6: return vector_kernel_of_width<kOp, 6>(k.wide_acc, k.wide_aux);
    case 7: return vector_kernel_of_width<kOp, 7>(k.wide_acc, k.wide_aux);
    case 8: return vector_kernel_of_width<kOp, 8>(k.wide_acc, k.wide_aux);
    case 9: return vector_kernel_of_width<kOp, 9>(k.wide_acc, k.wide_aux);
    case 10: return vector_kernel_of_width<kOp, 10>(k.wide_acc, k.wide_aux);
    case 11: return vector_kernel_of_width<kOp, 11>(k.wide_acc, k.wide_aux);
    default: return vector_kernel_of_width<kOp, 12>(k.wide_acc, k.wide_aux);
  }
}

const void* tile_kernel_for(TileOp op, const KernelChoice& k) {
  switch (op) {
    case TileOp::bias: return kernel_of<TileOp::bias>(k);
    case TileOp::gelu_aux: return kernel_of<TileOp::gelu_aux>(k);
    case TileOp::gelu_aux_bias: return kernel_of<TileOp::gelu_aux_bias>(k);
    case TileOp::dgelu: return kernel_of<TileOp::dgelu>(k);
    case TileOp::dgelu_bgrad: return kernel_of<TileOp::dgelu_bgrad>(k);
    case TileOp::row_sums: return kernel_of<TileOp::row_sums>(k);
    case TileOp::bias_broadcast: return kernel_of<TileOp::bias_broadcast>(k);
  }
  return nullptr;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits the columns into chunks so that the grid has about `target_blocks` blocks (a whole
// number of waves, kDefaultWaves in epilogue_kernels.hpp).
struct TilePlan {
  int64_t row_tiles = 0;
  int64_t column_chunks = 0;
  int64_t columns_per_chunk = 0;
};

TilePlan plan_tiles(int64_t rows, int64_t cols, int threads_x, int64_t target_blocks) {
  TilePlan plan;
  const int threads_y = kBlockThreads / threads_x;
  plan.row_tiles = ceil_div(rows, int64_t(threads_x) * kRowsPerThread);
  const int64_t wanted_chunks = std::max<int64_t>(1, ceil_div(target_blocks, plan.row_tiles));
  int64_t per_chunk = ceil_div(cols, wanted_chunks);
  per_chunk = ceil_div(per_chunk, threads_y) * threads_y;  // every thread row gets work
  per_chunk = std::max<int64_t>(per_chunk, ceil_div(cols, 65535));  // grid.y limit
  plan.columns_per_chunk = per_chunk;
  plan.column_chunks = ceil_div(cols, per_chunk);
  return plan;
}

int threads_x_of(const KernelChoice& k) {
  return k.vector ? kTileConfigs[k.config].threads_x : kScalarThreadsX;
}

// Blocks that fill the device `waves` times with the kernel a launch uses.
int64_t target_blocks(const KernelTuning& tuning, TileOp op, const KernelChoice& k, int64_t rows,
                      int64_t cols) {
  const int per_sm = std::max(
      1, k.vector ? tuning.blocks_per_sm[int(op)][1 + k.config][k.width_index()] : tuning.blocks_per_sm[int(op)][0][0]);
  int waves = std::min(kMaxWaves, std::max(1, tuning.waves[int(op)]));
  if (tuning.size_rules && rows * cols < kOneWaveBelowElements) waves = 1;
  return int64_t(tuning.sm_count) * per_sm * waves;
}

TilePlan plan_for(const KernelTuning& tuning, TileOp op, const KernelChoice& k, int64_t rows, int64_t cols) {
  return plan_tiles(rows, cols, threads_x_of(k), target_blocks(tuning, op, k, rows, cols));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

Status query_kernel_tuning(KernelTuning* tuning) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&tuning->sm_count, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return EPIGEMM_BACKEND_ERROR("reading the device: ", cudaGetErrorString(err));
  for (int op = 0; op < kTileOpCount; ++op) {
    tuning->vector_config[op] = kDefaultVectorConfig[op];
    tuning->waves[op] = kDefaultWaves[op];
    for (int kernel = 0; kernel <= kTileConfigCount; ++kernel) {  // 0: scalar, 1 + c: vector c
      for (int width = 0; width < 4; ++width) {
        KernelChoice k;
        k.vector = kernel > 0;
        k.config = kernel > 0 ? kernel - 1 : 0;
        k.wide_acc = k.vector && width >= 2;
        k.wide_aux = k.vector && width % 2 == 1;
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &tuning->blocks_per_sm[op][kernel][width], tile_kernel_for(TileOp(op), k), kBlockThreads, 0);
        if (err != cudaSuccess) {
          return EPIGEMM_BACKEND_ERROR("the epilogue kernels cannot run on this device: ",
                                       cudaGetErrorString(err));
        }
      }
    }
  }
  return Status();
}

bool tile_vector_path(TileOp op, const TileArgs& args) {
  if (args.rows % kRowsPerThread != 0) return false;
  if (op_reads_acc(op) && (!aligned16(args.acc) || args.ld_acc % kRowsPerThread != 0)) return false;
  if (op_writes_d(op) && (!aligned16(args.d) || args.ld_d % kRowsPerThread != 0)) return false;
  if ((op_reads_aux(op) || op_writes_aux(op)) &&
      (!aligned16(args.aux) || args.ld_aux % kRowsPerThread != 0)) {
    return false;
  }
  if (op_reads_bias(op) && !aligned16(args.bias)) return false;
  return true;
}

int64_t row_partial_elements(const KernelTuning& tuning, TileOp op, int64_t rows, int64_t cols) {
  if (!op_sums_rows(op) || rows == 0 || cols == 0) return 0;
  // More target blocks never means fewer chunks, so the largest target bounds every kernel (the
  // workspace is sized before the pointers, hence the path, are known), whatever the waves.
  KernelTuning most = tuning;
  most.waves[int(op)] = kMaxWaves;
  most.size_rules = false;
  int64_t chunks = plan_for(most, op, KernelChoice{}, rows, cols).column_chunks;  // scalar
  for (int config = 0; config < kTileConfigCount; ++config) {
    for (int width = 0; width < 4; ++width) {
      KernelChoice k;
      k.vector = true;
      k.config = config;
      k.wide_acc = width >= 2;
      k.wide_aux = width % 2 == 1;
      chunks = std::max(chunks, plan_for(most, op, k, rows, cols).column_chunks);
    }
  }
  return chunks * rows;
}

Status launch_tile_kernel(const KernelTuning& tuning, TileOp op, const TileArgs& args,
                          void* row_sums_out, epigemm_dtype_t row_sums_dtype, cudaStream_t stream) {
  KernelChoice k;
  k.vector = tile_vector_path(op, args);
  if (k.vector) {
    k.config = tuning.vector_config[int(op)];
    if (tuning.size_rules) k.config = tile_config_for_rows(k.config, args.rows);
    k.wide_acc = op_reads_acc(op) && args.acc_dtype == EPIGEMM_DTYPE_F32;
    k.wide_aux = op_reads_aux(op) && args.aux_dtype == EPIGEMM_DTYPE_F32;
  }
  const int threads_x = threads_x_of(k);
  const TilePlan plan = plan_for(tuning, op, k, args.rows, args.cols);
  const dim3 grid(unsigned(plan.row_tiles), unsigned(plan.column_chunks));
  const dim3 block(unsigned(threads_x), unsigned(kBlockThreads / threads_x));
  int64_t per_chunk = plan.columns_per_chunk;
  TileArgs kernel_args = args;
  void* params[] = {&kernel_args, &per_chunk};
  const cudaError_t err =
      cudaLaunchKernel(tile_kernel_for(op, k), grid, block, params, 0, stream);
  if (err != cudaSuccess) {
    return EPIGEMM_BACKEND_ERROR("tile epilogue kernel failed to launch: ", cudaGetErrorString(err));
  }
  EPIGEMM_RETURN_IF_ERROR(check_launch("tile epilogue kernel"));
  if (op_sums_rows(op)) {
    // Programmatic dependent launch: the finish kernel's launch overlaps the tail of the tile
    // kernel (which signals griddepcontrol.launch_dependents after its main loop) instead of
    // starting after it; stream order and CUDA graph capture are kept.
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(ceil_div(args.rows, kFinishRows)));
    config.blockDim = dim3(kFinishRows, kFinishLanes);
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = tuning.dependent_launch ? 1 : 0;
    config.attrs = attribute;
    config.numAttrs = 1;
    const float* partials = args.row_partials;
    const cudaError_t finish_err = cudaLaunchKernelEx(&config, finish_row_sums_kernel, partials,
                                                      plan.column_chunks, args.rows, row_sums_out,
                                                      row_sums_dtype);
    if (finish_err != cudaSuccess) {
      return EPIGEMM_BACKEND_ERROR("finish_row_sums_kernel failed to launch: ",
                                   cudaGetErrorString(finish_err));
    }
    EPIGEMM_RETURN_IF_ERROR(check_launch("finish_row_sums_kernel"));
  }
  return Status();
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
