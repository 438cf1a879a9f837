// The cpu backend's kernels written once as templates over a lane type, instantiated three
// times: epilogue_kernels_avx512.cpp (16 floats in a __m512), epilogue_kernels_avx2.cpp (8 floats
// in a __m256) and epilogue_kernels_scalar.cpp (one float). Only included by those three files.
// Everything here is a template that depends on the Ops parameter, whose type is file-local in
// each instantiating file, so no code compiled for AVX2 can be merged by the linker into the
// portable build.
//
// Ops provides: V (the lane type), width (lanes in V), load/store of V from/to float, Half and
// BFloat16 storage (unaligned), stream(float*, V) (a non-temporal store to an address aligned to
// V's size) and stream_fence() (orders those stores before the ones that follow), the V arithmetic that the activation functors of
// src/core/epilogue_math.hpp need (exp and is_nan found for V by argument-dependent lookup,
// where, < and >), and for the bias-gradient sums Wide (width doubles):
// wide_zero(), add_wide(Wide, V), store_wide(double*, Wide), wide_lane_sum(Wide) (the lanes
// added in a fixed order). The sums are taken in double: a bias gradient sums up to tokens
// (16k+) terms that largely cancel, where fp32 accumulation loses digits the fp32 tolerance of
// docs/conventions.md does not allow; double costs two adds per 8 elements.
//
// A row tail shorter than a vector goes through a zero-padded copy and the same vector code, so
// an element's value never depends on where the block boundaries fall.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/epilogue_kernels.hpp"
#include "core/epilogue_math.hpp"
#include "core/numeric.hpp"

namespace epigemm {
namespace epilogue_kernels_impl {

template <class Ops, class Storage>
typename Ops::V load_lanes(const Storage* p, int64_t count) {
  if (count == Ops::width) return Ops::load(p);
  Storage lanes[Ops::width] = {};
  std::memcpy(lanes, p, size_t(count) * sizeof(Storage));
  return Ops::load(lanes);
}

template <class Ops, class Storage>
void store_lanes(Storage* p, int64_t count, typename Ops::V value) {
  if (count == Ops::width) {
    Ops::store(p, value);
    return;
  }
  Storage lanes[Ops::width];
  Ops::store(lanes, value);
  std::memcpy(p, lanes, size_t(count) * sizeof(Storage));
}

// A forward pass's aux store: non-temporal (Ops::stream) for a whole fp32 vector at an address
// aligned to its size when `stream` is set; otherwise as store_lanes. Returns whether it streamed.
template <class Ops, class Storage>
bool store_aux_lanes(Storage* p, int64_t count, typename Ops::V value, bool stream) {
  if constexpr (std::is_same_v<Storage, float>) {
    constexpr uintptr_t kVectorBytes = uintptr_t(Ops::width) * sizeof(float);
    if (stream && count == Ops::width && reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0) {
      Ops::stream(p, value);
      return true;
    }
  }
  store_lanes<Ops>(p, count, value);
  return false;
}

template <class Ops>
constexpr int64_t lesser(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// Elements of fp32 from p to the first address that is a multiple of a vector's size (0 to
// width - 1; p is element-aligned, the cpu backend declines other storage).
template <class Ops>
int64_t rows_before_aligned(const void* p) {
  constexpr uintptr_t kVectorBytes = uintptr_t(Ops::width) * sizeof(float);
  const uintptr_t offset = reinterpret_cast<uintptr_t>(p) % kVectorBytes;
  return int64_t((kVectorBytes - offset) % kVectorBytes / sizeof(float));
}

// exp and exp2 on the lanes of a SIMD build, from the primitives its Ops provides:
// fma(a, b, c) = a b + c (one rounding), round_to_int(V) (to nearest, as floats), min/max(V, V) (returning the second
// operand where either is NaN, as x86's minps/maxps), and scale_by_two_to(p, n) = p 2^n for
// integral n in [-150, 129].
//
// 2^n exp(r) for |r| <= ln2/2 and integral n in [-150, 128] (as floats): exp(r) is the Taylor
// series to r^7; the first term left out, (ln2/2)^8 / 8! = 5e-9, is below a tenth of an ulp.
template <class Ops>
typename Ops::V two_to_n_exp_r(typename Ops::V n, typename Ops::V r) {
  using V = typename Ops::V;
  V p = V(1.0f / 5040.0f);
  p = Ops::fma(p, r, V(1.0f / 720.0f));
  p = Ops::fma(p, r, V(1.0f / 120.0f));
  p = Ops::fma(p, r, V(1.0f / 24.0f));
  p = Ops::fma(p, r, V(1.0f / 6.0f));
  p = Ops::fma(p, r, V(0.5f));
  p = Ops::fma(p, r, V(1.0f));
  p = Ops::fma(p, r, V(1.0f));
  return Ops::scale_by_two_to(p, n);
}

// exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2]. ln 2 is split in
// two floats and r formed with FMAs, so r is good to about an ulp. x is first clamped to
// [-104, 89] (beyond which exp is 0 or Inf in float); NaN passes through the clamp (the NaN
// operand is the second one) and the polynomial.
template <class Ops>
typename Ops::V exp_lanes(typename Ops::V x) {
  using V = typename Ops::V;
  const V clamped = Ops::min(V(89.0f), Ops::max(V(-104.0f), x));
  const V n = Ops::round_to_int(clamped * V(1.44269504088896341f));
  const float ln2_high = 0.693147182464599609375f;  // float(ln 2)
  const float ln2_low = -1.904654299957768e-09f;    // ln 2 - ln2_high
  V r = Ops::fma(n, V(-ln2_high), clamped);
  r = Ops::fma(n, V(-ln2_low), r);
  return two_to_n_exp_r<Ops>(n, r);
}

// exp2 on the lanes: 2^x = 2^n exp((x - n) ln 2), n = round(x); x - n is exact, and the one
// rounding of (x - n) ln 2 is below an ulp of a number at most ln2/2. x is first clamped to
// [-150, 128] (beyond which 2^x is 0 or Inf in float); NaN passes through as in exp_lanes.
template <class Ops>
typename Ops::V exp2_lanes(typename Ops::V x) {
  using V = typename Ops::V;
  const V clamped = Ops::min(V(128.0f), Ops::max(V(-150.0f), x));
  const V n = Ops::round_to_int(clamped);
  return two_to_n_exp_r<Ops>(n, (clamped - n) * V(0.693147180559945309f));
}

// The structure of an epilogue's element-wise work, as compile-time flags: a bias per row, aux
// written (forward) or read (backward), and the row sums of g (backward only).
template <bool kBias, AuxPart kAux, bool kRowSums>
struct BlockStructure {
  static constexpr bool bias = kBias;
  static constexpr bool writes_aux = kAux == AuxPart::write_preactivation;
  static constexpr bool backward = kAux == AuxPart::read_preactivation;
  static constexpr bool uses_aux = kAux != AuxPart::none;
  static constexpr bool row_sums = kRowSums;
};

// One block, D stored as DStorage, aux as AuxStorage (float when the epilogue has no aux).
//   forward:  z = acc (+ bias[i]); aux = z (when written); D = Act::forward(z)
//   backward: g = acc * Act::derivative(aux); D = g; row_sums[i] += sum_j g[i, j]
// With the identity and no bias this is D = acc, a copy into D's dtype.
template <class Ops, class Structure, class Act, class DStorage, class AuxStorage>
void apply_block(const EpilogueBlock& b) {
  using V = typename Ops::V;
  constexpr int64_t W = Ops::width;
  // Every epilogue walks down whole columns of the block (the contiguous direction), the row sums
  // in chunks of 1024 rows whose sums (8 KB of doubles) stay in L1 across the columns.
  constexpr int64_t kChunkVectors = 1024 / W;
  const int64_t chunk_rows = Structure::row_sums ? kChunkVectors * W : (b.rows > 0 ? b.rows : 1);
  DStorage* const d = static_cast<DStorage*>(b.d);
  // The pass stores aux unless the GEMM already wrote z there (acc in aux, no bias to add).
  const bool store_aux = Structure::writes_aux && (!b.aux_holds_acc || Structure::bias);
  bool streamed = false;
  // The first `lead` rows (fewer than a vector) go as one short vector, so that the vectors after
  // them start at an address of column 0 of D (fp32) or else of acc that is a multiple of the
  // vector's size: a vector that straddles two cache lines costs two accesses. Buffers 16 bytes
  // off a line (a plain malloc's large blocks) made the relu pass of a (1024, 768, 3072) fprop
  // cost 8.5% of the GEMM instead of 4-5% (docs/dev/cpu_backend.md, "Where aux goes"). Every
  // column shares the lead, so a row keeps its lane in every column; the columns are all aligned
  // when the leading dimensions are multiples of a vector.
  const int64_t lead = lesser<Ops>(b.rows, std::is_same_v<DStorage, float>
                                                 ? rows_before_aligned<Ops>(b.d)
                                                 : rows_before_aligned<Ops>(b.acc));

  // Chunk [i0, i1) holds the vectors v = 0, 1, ...: vector 0 is `peel` rows (the lead, in the
  // first chunk only) or a whole vector, the others whole vectors (the last one maybe short).
  for (int64_t i0 = 0; i0 < b.rows;) {
    const int64_t peel = i0 == 0 && lead > 0 ? lead : W;
    const int64_t i1 = lesser<Ops>(i0 + (peel == W ? 0 : peel) + chunk_rows, b.rows);
    typename Ops::Wide sums[Structure::row_sums ? kChunkVectors + 1 : 1];
    for (auto& s : sums) s = Ops::wide_zero();
    for (int64_t j = 0; j < b.cols; ++j) {
      const float* acc_col = b.acc + j * b.ld_acc;
      DStorage* d_col = d + j * b.ld_d;
      AuxStorage* aux_col = nullptr;
      if constexpr (Structure::uses_aux) aux_col = static_cast<AuxStorage*>(b.aux) + j * b.ld_aux;
      int64_t count = lesser<Ops>(peel, i1 - i0);
      for (int64_t i = i0, v = 0; i < i1; i += count, count = lesser<Ops>(W, i1 - i), ++v) {
        const V acc = load_lanes<Ops>(acc_col + i, count);
        V out;
        if constexpr (Structure::backward) {
          out = acc * Act::derivative(load_lanes<Ops>(aux_col + i, count));
          if constexpr (Structure::row_sums) sums[v] = Ops::add_wide(sums[v], out);
        } else {
          V z = acc;
          if constexpr (Structure::bias) z = acc + load_lanes<Ops>(b.bias + i, count);
          if (store_aux) streamed |= store_aux_lanes<Ops>(aux_col + i, count, z, b.stream_aux);
          out = Act::forward(z);
        }
        store_lanes<Ops>(d_col + i, count, out);
      }
    }
    if constexpr (Structure::row_sums) {
      // Padded lanes summed zeros (acc = 0); only the block's rows are added.
      int64_t count = lesser<Ops>(peel, i1 - i0);
      for (int64_t i = i0, v = 0; i < i1; i += count, count = lesser<Ops>(W, i1 - i), ++v) {
        double lanes[W];
        Ops::store_wide(lanes, sums[v]);
        for (int64_t l = 0; l < count; ++l) {
          b.row_sums[i + l] = float(double(b.row_sums[i + l]) + lanes[l]);
        }
      }
    }
    i0 = i1;
  }
  // Non-temporal stores are weakly ordered: fenced before the block counts as written (another
  // thread, or the caller after the parallel loop, may read aux next).
  if (streamed) Ops::stream_fence();
}

template <class Ops, class Structure, class Act, class DStorage>
void apply_with_d(const EpilogueBlock& b) {
  if constexpr (Structure::uses_aux) {
    switch (b.aux_dtype) {
      case EPIGEMM_DTYPE_F32: return apply_block<Ops, Structure, Act, DStorage, float>(b);
      case EPIGEMM_DTYPE_F16: return apply_block<Ops, Structure, Act, DStorage, Half>(b);
      case EPIGEMM_DTYPE_BF16: return apply_block<Ops, Structure, Act, DStorage, BFloat16>(b);
    }
  } else {
    return apply_block<Ops, Structure, Act, DStorage, float>(b);
  }
}

template <class Ops, class Structure, class Act>
void apply_with_structure(const EpilogueBlock& b) {
  switch (b.d_dtype) {
    case EPIGEMM_DTYPE_F32: return apply_with_d<Ops, Structure, Act, float>(b);
    case EPIGEMM_DTYPE_F16: return apply_with_d<Ops, Structure, Act, Half>(b);
    case EPIGEMM_DTYPE_BF16: return apply_with_d<Ops, Structure, Act, BFloat16>(b);
  }
}

// The parts' structure as template flags: the combinations the epilogue table makes (a bias
// only forward, row sums only backward); the activation is identity where the epilogue has none.
template <class Ops, class Act>
void apply_with_activation(const EpilogueParts& parts, const EpilogueBlock& b) {
  const bool row_sums = parts.bias_grad == BiasGradPart::rows_of_gradient;
  switch (parts.aux) {
    case AuxPart::none:
      if (parts.reads_bias()) return apply_with_structure<Ops, BlockStructure<true, AuxPart::none, false>, Act>(b);
      return apply_with_structure<Ops, BlockStructure<false, AuxPart::none, false>, Act>(b);
    case AuxPart::write_preactivation:
      if (parts.reads_bias()) {
        return apply_with_structure<Ops, BlockStructure<true, AuxPart::write_preactivation, false>, Act>(b);
      }
      return apply_with_structure<Ops, BlockStructure<false, AuxPart::write_preactivation, false>, Act>(b);
    case AuxPart::read_preactivation:
      if (row_sums) return apply_with_structure<Ops, BlockStructure<false, AuxPart::read_preactivation, true>, Act>(b);
      return apply_with_structure<Ops, BlockStructure<false, AuxPart::read_preactivation, false>, Act>(b);
  }
}

template <class Ops>
void apply(const EpilogueParts& parts, const EpilogueBlock& b) {
  visit_activation(parts.activation, [&](auto act) { apply_with_activation<Ops, decltype(act)>(parts, b); });
}

template <class Ops, class Storage>
void to_float_typed(const Storage* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; i += Ops::width) {
    const int64_t n = lesser<Ops>(Ops::width, count - i);
    store_lanes<Ops>(dst + i, n, load_lanes<Ops>(src + i, n));
  }
}

template <class Ops>
void to_float(const void* src, epigemm_dtype_t dtype, int64_t count, float* dst) {
  switch (dtype) {
    case EPIGEMM_DTYPE_F16: return to_float_typed<Ops>(static_cast<const Half*>(src), count, dst);
    case EPIGEMM_DTYPE_BF16:
      return to_float_typed<Ops>(static_cast<const BFloat16*>(src), count, dst);
    case EPIGEMM_DTYPE_F32: return to_float_typed<Ops>(static_cast<const float*>(src), count, dst);
  }
}

template <class Ops, class Storage>
void sum_columns_typed(const Storage* src, int64_t ld, int64_t length, int64_t cols, float* sums) {
  for (int64_t j = 0; j < cols; ++j) {
    const Storage* column = src + j * ld;
    typename Ops::Wide total = Ops::wide_zero();
    for (int64_t p = 0; p < length; p += Ops::width) {
      total = Ops::add_wide(total, load_lanes<Ops>(column + p, lesser<Ops>(Ops::width, length - p)));
    }
    sums[j] = float(Ops::wide_lane_sum(total));
  }
}

template <class Ops>
void sum_columns(const void* src, epigemm_dtype_t dtype, int64_t ld, int64_t length, int64_t cols,
                 float* sums) {
  switch (dtype) {
    case EPIGEMM_DTYPE_F16:
      return sum_columns_typed<Ops>(static_cast<const Half*>(src), ld, length, cols, sums);
    case EPIGEMM_DTYPE_BF16:
      return sum_columns_typed<Ops>(static_cast<const BFloat16*>(src), ld, length, cols, sums);
    case EPIGEMM_DTYPE_F32:
      return sum_columns_typed<Ops>(static_cast<const float*>(src), ld, length, cols, sums);
  }
}

// Walks down a chunk of 1024 rows (4 KB of fp32 per column of src: a contiguous run the hardware
// prefetcher follows) column by column, adding into per-lane doubles that stay in L1 (8 KB). Each
// sums[r] is the sum over p in order, whatever the chunk or the caller's split of the rows.
// Measured on the benchmark machine: tasks of 16 rows (one cache line per column, columns 16 KB
// apart in a (2048, 1024, 4096) wgrad) read dY at about 2 GB/s; docs/dev/cpu_backend.md.
template <class Ops, class Storage>
void sum_rows_typed(const Storage* src, int64_t ld, int64_t rows, int64_t cols, float* sums) {
  constexpr int64_t W = Ops::width;
  constexpr int64_t kChunkVectors = 1024 / W;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunkVectors * W) {
    const int64_t r1 = lesser<Ops>(r0 + kChunkVectors * W, rows);
    const int64_t full = (r1 - r0) / W;  // whole vectors; then a tail of (r1 - r0) % W rows
    const int64_t tail = (r1 - r0) - full * W;
    typename Ops::Wide total[kChunkVectors];
    for (int64_t v = 0; v < full + (tail > 0 ? 1 : 0); ++v) total[v] = Ops::wide_zero();
    for (int64_t p = 0; p < cols; ++p) {
      const Storage* column = src + p * ld + r0;
      for (int64_t v = 0; v < full; ++v) {
        total[v] = Ops::add_wide(total[v], Ops::load(column + v * W));
      }
      if (tail > 0) total[full] = Ops::add_wide(total[full], load_lanes<Ops>(column + full * W, tail));
    }
    for (int64_t v = 0; v < full + (tail > 0 ? 1 : 0); ++v) {
      const int64_t r = r0 + v * W;
      double lanes[W];
      Ops::store_wide(lanes, total[v]);
      for (int64_t l = 0; l < lesser<Ops>(W, r1 - r); ++l) sums[r + l] = float(lanes[l]);
    }
  }
}

template <class Ops>
void sum_rows(const void* src, epigemm_dtype_t dtype, int64_t ld, int64_t rows, int64_t cols,
              float* sums) {
  switch (dtype) {
    case EPIGEMM_DTYPE_F16:
      return sum_rows_typed<Ops>(static_cast<const Half*>(src), ld, rows, cols, sums);
    case EPIGEMM_DTYPE_BF16:
      return sum_rows_typed<Ops>(static_cast<const BFloat16*>(src), ld, rows, cols, sums);
    case EPIGEMM_DTYPE_F32: return sum_rows_typed<Ops>(static_cast<const float*>(src), ld, rows, cols, sums);
  }
}

template <class Ops>
void activation_values(epigemm_activation_t activation, const float* x, int64_t count, float* value,
                       float* derivative) {
  visit_activation(activation, [&](auto act) {
    using Act = decltype(act);
    for (int64_t i = 0; i < count; i += Ops::width) {
      const int64_t n = lesser<Ops>(Ops::width, count - i);
      const typename Ops::V v = load_lanes<Ops>(x + i, n);
      store_lanes<Ops>(value + i, n, Act::forward(v));
      store_lanes<Ops>(derivative + i, n, Act::derivative(v));
    }
  });
}

template <class Ops>
constexpr EpilogueKernels make_kernels(const char* name) {
  return EpilogueKernels{name,           &apply<Ops>,    &to_float<Ops>,
                         &sum_columns<Ops>, &sum_rows<Ops>, &activation_values<Ops>};
}

}  // namespace epilogue_kernels_impl
}  // namespace epigemm
