// The cuda backend's tile kernel: one template over a tile op's parts (tile_plan.hpp,
// TileOpParts) and an activation functor (core/epilogue_math.hpp). Included by the library's
// epilogue_kernels.cu, which instantiates the configuration each op uses, and by the kernel lab
// dev/cuda/epilogue_kernels_lab.cu, which instantiates all of them.
//
// Geometry: tile_plan.hpp. Row sums (bias gradients) are reduced per block in a fixed order and
// written as per-chunk partials into the workspace; add_row_partials_kernel
// (core/row_partial_sums.cuh) adds the partials of a row in a fixed order. No floating-point
// atomics anywhere, so the sums are bitwise repeatable for a given shape on a given device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/epilogue_kernels.hpp"
#include "backends/cuda/tile_plan.hpp"
#include "core/dependent_launch.hpp"
#include "core/epilogue_math.hpp"
#include "core/row_partial_sums.cuh"
#include "core/status.hpp"

namespace epigemm {
namespace cuda {
namespace tile {

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

// Four 32-bit words to 16-byte aligned global memory in one instruction.
__device__ __forceinline__ void store_16_bytes(void* address, uint32_t x, uint32_t y, uint32_t z,
                                               uint32_t w) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(x), "r"(y), "r"(z),
               "r"(w)
               : "memory");
}

// dtype: fp32, fp16 or bf16; half_dtype: which of the two 16-bit ones it is when it is not fp32
// (the caller's compile-time constant where it knows, else dtype itself).
__device__ __forceinline__ void store8(void* base, epigemm_dtype_t dtype, epigemm_dtype_t half_dtype,
                                       int64_t offset, const float (&v)[8]) {
  if (dtype == EPIGEMM_DTYPE_F32) {
    float4* p = reinterpret_cast<float4*>(static_cast<float*>(base) + offset);
    p[0] = make_float4(v[0], v[1], v[2], v[3]);
    p[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    // One plain 16-byte store. Written as a uint4 assignment, the compiler split it into four
    // 4-byte stores (four times the store instructions, each covering a quarter of every 16 bytes
    // of the warp's span); the cache-hinted intrinsics (__stwb) keep it whole but make it a
    // strong store.
    store_16_bytes(static_cast<uint16_t*>(base) + offset,
                   pack_pair(v[0], v[1], half_dtype), pack_pair(v[2], v[3], half_dtype),
                   pack_pair(v[4], v[5], half_dtype), pack_pair(v[6], v[7], half_dtype));
  }
}

// One value of any dtype (scalar path and column sums). The width decides the load (a
// uniform branch: the dtype is a kernel argument); the conversion is a select among the three,
// not a branch per dtype: a switch here, in the scalar path's 16 to 32 unrolled loads per batch,
// had the compiler duplicate the loop body per dtype combination and cost about 8 s of nvcc time
// per kernel reading aux (ten such kernels with the activations).
__device__ __forceinline__ float load1(const void* base, epigemm_dtype_t dtype, int64_t offset) {
  uint32_t bits;
  if (dtype == EPIGEMM_DTYPE_F32) {
    bits = static_cast<const uint32_t*>(base)[offset];
  } else {
    bits = static_cast<const uint16_t*>(base)[offset];
  }
  const float as_f32 = __uint_as_float(bits);
  const float as_bf16 = __uint_as_float(bits << 16);
  const float as_f16 = __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  return dtype == EPIGEMM_DTYPE_F32 ? as_f32 : dtype == EPIGEMM_DTYPE_BF16 ? as_bf16 : as_f16;
}

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
// count as 0). kRowsInRange (vector path): the caller knows the thread's rows are inside.
template <bool kVector, int kThreadsX, bool kRowsInRange, bool kWide>
__device__ __forceinline__ void load_rows(const void* base, epigemm_dtype_t dtype, int64_t ld,
                                          int64_t tile_row0, int64_t rows, int64_t j,
                                          Loaded<kVector, kWide>& out) {
  if constexpr (kVector) {
    const int64_t row = thread_row<true, kThreadsX>(tile_row0, 0);
    if (kRowsInRange || row < rows) {
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

template <bool kVector, int kThreadsX, bool kRowsInRange>
__device__ __forceinline__ void store_rows(void* base, epigemm_dtype_t dtype, epigemm_dtype_t half_dtype,
                                           int64_t ld, int64_t tile_row0, int64_t rows, int64_t j,
                                           const float (&v)[8]) {
  if constexpr (kVector) {
    const int64_t row = thread_row<true, kThreadsX>(tile_row0, 0);
    if (kRowsInRange || row < rows) store8(base, dtype, half_dtype, row + j * ld, v);
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t row = thread_row<false, kThreadsX>(tile_row0, r);
      if (row < rows) store1(base, dtype, row + j * ld, v[r]);
    }
  }
}

// ---- the tile kernel ------------------------------------------------------------------------

// An op's parts as static members, usable in the kernel's lambdas without capture.
template <TileOp kOp>
struct Parts {
  static constexpr TileOpParts value = tile_op_parts(kOp);
  static constexpr bool reads_acc = value.reads_acc;
  static constexpr bool adds_bias = value.adds_bias;
  static constexpr bool writes_aux = value.writes_aux;
  static constexpr bool reads_aux = value.reads_aux;
  static constexpr bool sums_rows = value.sums_rows;
  static constexpr bool writes_d = value.writes_d;
};

// grid: (ceil(rows / (8 kThreadsX)), column_chunks); block: kThreadsX x (256 / kThreadsX).
// Block (bx, by) owns rows [8 kThreadsX bx, 8 kThreadsX (bx + 1)) and the columns
// [by * columns_per_chunk, (by + 1) * columns_per_chunk). A wider kThreadsX makes each column's
// run of consecutive bytes per block longer (DRAM pages are read in longer pieces); kBatch
// columns are loaded before any is computed (loads in flight per thread); kMinBlocks caps the
// registers so that that many blocks fit on a multiprocessor (warps in flight per SM).
//
// Per element, with the op's parts P (tile_op_parts) and the activation functor Act:
//   z = acc (+ bias[i]);  forward: aux = z (P.writes_aux), D = Act::forward(z)
//                         backward (P.reads_aux): D = acc * Act::derivative(aux)
//   P.sums_rows: the row's partial sum of D's value before rounding (g for DACT_BGRAD).
// kPrefetch: the next batch is loaded while this one is computed (see the loop).
// kWideAcc / kWideAux (vector path only): acc / aux are fp32 (else fp16 or bf16).
template <TileOp kOp, class Act, bool kVector, int kThreadsX, int kBatch, int kMinBlocks,
          bool kPrefetch, bool kWideAcc, bool kWideAux>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
    tile_kernel(TileArgs args, int64_t columns_per_chunk) {
  // Launched as a programmatic dependent of the kernel before it on the stream (launch_tile; the
  // GEMM that wrote acc): wait until that kernel has completed and its writes are visible, before
  // any global memory is read or written (bias, aux and D may be another kernel's too).
#if __CUDA_ARCH__ >= 900  // before Hopper the launch is plain stream-ordered: nothing to wait for
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  using P = Parts<kOp>;
  constexpr int kThreadsY = kBlockThreads / kThreadsX;
  constexpr int kRowsPerTile = kThreadsX * kRowsPerThread;
  const int64_t tile_row0 = int64_t(blockIdx.x) * kRowsPerTile;
  const int64_t rows = args.rows;
  // On the vector path a thread's 8 rows are all inside or all past the end (rows % 8 == 0). A
  // thread past the end has nothing to do unless it takes part in the block's row sums; the
  // others skip the row test (and the zeroing of what they would not load) per column.
  constexpr bool kRowsInRange = kVector && !P::sums_rows;
  if (kRowsInRange && thread_row<true, kThreadsX>(tile_row0, 0) >= rows) return;

  float bias[kRowsPerThread] = {};
  if constexpr (P::adds_bias) {
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
        if constexpr (P::reads_acc) {
          load_rows<kVector, kThreadsX, kRowsInRange>(args.acc, args.acc_dtype, args.ld_acc, tile_row0,
                                                      rows, j, acc_loaded[c]);
        }
        if constexpr (P::reads_aux) {
          load_rows<kVector, kThreadsX, kRowsInRange>(args.aux, args.aux_dtype, args.ld_aux, tile_row0,
                                                      rows, j, aux_loaded[c]);
        }
      }
    }
  };
  // The columns, with the 16-bit dtype of the vector path's loads and stores as a compile-time
  // constant when every 16-bit operand of the call is bf16 (kBf16Halves), else read from args. A
  // runtime dtype there has both conversions issued under predicates, 1.5 instructions more per
  // element (two per value loaded, two per pair packed), in kernels bound by their instructions.
  auto run_columns = [&](auto bf16_halves) {
    constexpr bool kBf16Halves = decltype(bf16_halves)::value;
    // The 16-bit dtype of an operand stored in `dtype` (only read where it is fp16 or bf16).
    auto half = [](epigemm_dtype_t dtype) { return kBf16Halves ? EPIGEMM_DTYPE_BF16 : dtype; };
    auto compute_batch = [&](int64_t j0, const Loaded<kVector, kWideAcc> (&acc_loaded)[kBatch],
                             const Loaded<kVector, kWideAux> (&aux_loaded)[kBatch]) {
#pragma unroll
      for (int c = 0; c < kBatch; ++c) {
        const int64_t j = j0 + int64_t(kThreadsY) * c;
        if (j >= column_end) break;
        float acc[kRowsPerThread] = {};
        [[maybe_unused]] float aux[kRowsPerThread];  // read or written by some ops only
        if constexpr (P::reads_acc) to_floats(acc_loaded[c], half(args.acc_dtype), acc);
        if constexpr (P::reads_aux) to_floats(aux_loaded[c], half(args.aux_dtype), aux);
        float out[kRowsPerThread];
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
          if constexpr (P::reads_aux) {
            out[r] = acc[r] * Act::derivative(aux[r]);
          } else {
            float z = acc[r];
            if constexpr (P::adds_bias) z = P::reads_acc ? z + bias[r] : bias[r];
            if constexpr (P::writes_aux) aux[r] = z;
            out[r] = Act::forward(z);
          }
          // Rows past the end were loaded as 0 and their sums are never written.
          if constexpr (P::sums_rows) sums[r] += out[r];
        }
        if constexpr (P::writes_d) {
          store_rows<kVector, kThreadsX, kRowsInRange>(args.d, args.d_dtype, half(args.d_dtype),
                                                       args.ld_d, tile_row0, rows, j, out);
        }
        if constexpr (P::writes_aux) {
          store_rows<kVector, kThreadsX, kRowsInRange>(args.aux, args.aux_dtype, half(args.aux_dtype),
                                                       args.ld_aux, tile_row0, rows, j, aux);
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
  };
  if constexpr (kVector) {
    if (args.acc_dtype != EPIGEMM_DTYPE_F16 && args.aux_dtype != EPIGEMM_DTYPE_F16 &&
        args.d_dtype != EPIGEMM_DTYPE_F16) {
      run_columns(std::true_type{});
    } else {
      run_columns(std::false_type{});
    }
  } else {
    run_columns(std::false_type{});  // the scalar path converts each value by its dtype (load1)
  }

  if constexpr (P::sums_rows) {
    // add_row_partials_kernel is launched as a programmatic dependent of this one: let it start
    // launching once every block has streamed its columns, so that its launch overlaps the last
    // blocks' partial sums. It still waits for this grid to complete (griddepcontrol.wait)
    // before it reads a partial, so this changes timing only.
#if __CUDA_ARCH__ >= 900  // before Hopper there is no such instruction: plain stream order
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

// ---- host side: kernel addresses and the launch ---------------------------------------------

// The vector-path kernel of an op in one configuration, for the widths the op loads (aux width
// where aux is read, acc width wherever acc is read; the other widths are not instantiated).
template <TileOp kOp, class Act, int kThreadsX, int kBatch, int kMinBlocks, bool kPrefetch>
const void* vector_tile_kernel(bool wide_acc, bool wide_aux) {
  constexpr TileOpParts P = tile_op_parts(kOp);
  auto kernel = [](auto wide_acc_tag, auto wide_aux_tag) {
    return reinterpret_cast<const void*>(
        &tile_kernel<kOp, Act, true, kThreadsX, kBatch, kMinBlocks, kPrefetch,
                     decltype(wide_acc_tag)::value, decltype(wide_aux_tag)::value>);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if constexpr (P.reads_acc && P.reads_aux) {
    if (wide_acc) return wide_aux ? kernel(Yes{}, Yes{}) : kernel(Yes{}, No{});
    return wide_aux ? kernel(No{}, Yes{}) : kernel(No{}, No{});
  } else if constexpr (P.reads_acc) {
    return wide_acc ? kernel(Yes{}, No{}) : kernel(No{}, No{});
  } else {
    return kernel(No{}, No{});
  }
}

// The scalar-path kernel of an op (any dtypes, alignments and leading dimensions).
template <TileOp kOp, class Act>
const void* scalar_tile_kernel() {
  return reinterpret_cast<const void*>(
      &tile_kernel<kOp, Act, false, kScalarThreadsX, kScalarBatch, 1, false, false, false>);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// One launch of a tile kernel over `plan` (block threads_x x 256 / threads_x) and, when the op
// sums rows, add_row_partials_kernel into row_sums_out (length args.rows, its own dtype). With
// dependent_launch each is a programmatic dependent of the kernel before it: the tile kernel's
// launch overlaps the GEMM's tail (its blocks wait in griddepcontrol.wait), the finish kernel's
// the tile kernel's (which signals griddepcontrol.launch_dependents after its main loop), instead
// of each starting after the previous grid; stream order and CUDA graph capture are kept.
inline Status launch_tile(const void* kernel, int threads_x, const TilePlan& plan, bool sums_rows,
                          const TileArgs& args, void* row_sums_out, epigemm_dtype_t row_sums_dtype,
                          bool dependent_launch, cudaStream_t stream) {
  const dim3 grid(unsigned(plan.row_tiles), unsigned(plan.column_chunks));
  const dim3 block(unsigned(threads_x), unsigned(kBlockThreads / threads_x));
  int64_t per_chunk = plan.columns_per_chunk;
  TileArgs kernel_args = args;
  void* params[] = {&kernel_args, &per_chunk};
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = dependent_launch_config(grid, block, stream, dependent_launch, &attribute);
  const cudaError_t err = cudaLaunchKernelExC(&config, kernel, params);
  if (err != cudaSuccess) {
    return EPIGEMM_BACKEND_ERROR("tile epilogue kernel failed to launch: ", cudaGetErrorString(err));
  }
  if (!sums_rows) return Status();
  return launch_add_row_partials(args.row_partials, plan.column_chunks, args.rows, /*row_stride=*/args.rows,
                                 row_sums_out, row_sums_dtype, dependent_launch, stream);
}

}  // namespace tile
}  // namespace cuda
}  // namespace epigemm
