// The AVX2/FMA/F16C build of the cpu backend's kernels: 8 floats per __m256. The GELU formulas are
// src/core/epilogue_math.hpp's templates instantiated for Float8; this file supplies the lane
// arithmetic they use and the primitives of the vectorized exp (exp_lanes). Compiled with -mavx2 -mfma -mf16c and reached only
// through avx2_epilogue_kernels(), which checks the CPU first.
#include <immintrin.h>

#include "backends/cpu/epilogue_kernels_impl.hpp"

namespace epigemm {
namespace {

struct Float8 {
  __m256 v;
  Float8() = default;
  Float8(float s) : v(_mm256_set1_ps(s)) {}  // implicit: the formulas mix lanes and constants
  explicit Float8(__m256 x) : v(x) {}
};

// A lane mask from a comparison: all ones where it holds.
struct Mask8 {
  __m256 v;
};

}  // namespace

// The constants of epilogue_math.hpp are taken in the lane type.
template <>
struct ScalarOf<Float8> {
  using type = float;
};

namespace {

inline Float8 operator+(Float8 a, Float8 b) { return Float8(_mm256_add_ps(a.v, b.v)); }
inline Float8 operator-(Float8 a, Float8 b) { return Float8(_mm256_sub_ps(a.v, b.v)); }
inline Float8 operator*(Float8 a, Float8 b) { return Float8(_mm256_mul_ps(a.v, b.v)); }
inline Float8 operator/(Float8 a, Float8 b) { return Float8(_mm256_div_ps(a.v, b.v)); }
// Ordered comparisons: false for NaN lanes, as the scalar comparisons.
inline Mask8 operator>(Float8 a, Float8 b) { return Mask8{_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)}; }
inline Mask8 operator<(Float8 a, Float8 b) { return Mask8{_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline Float8 where(Mask8 condition, Float8 if_true, Float8 if_false) {
  return Float8(_mm256_blendv_ps(if_false.v, if_true.v, condition.v));
}

struct Avx2Ops {
  using V = Float8;
  static constexpr int64_t width = 8;

  static Float8 load(const float* p) { return Float8(_mm256_loadu_ps(p)); }
  static Float8 load(const Half* p) {
    return Float8(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static Float8 load(const BFloat16* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return Float8(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }

  // The primitives of exp_lanes (epilogue_kernels_impl.hpp).
  static Float8 fma(Float8 a, Float8 b, Float8 c) { return Float8(_mm256_fmadd_ps(a.v, b.v, c.v)); }
  static Float8 round_to_int(Float8 x) {
    return Float8(_mm256_round_ps(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Float8 min(Float8 a, Float8 b) { return Float8(_mm256_min_ps(a.v, b.v)); }
  static Float8 max(Float8 a, Float8 b) { return Float8(_mm256_max_ps(a.v, b.v)); }
  // p 2^n as p 2^(n/2) 2^(n - n/2): each factor a normal float for n in [-150, 129], so an
  // overflowing result becomes Inf and one below 2^-126 the correctly rounded subnormal (or 0).
  static Float8 scale_by_two_to(Float8 p, Float8 n) {
    const __m256i n_int = _mm256_cvtps_epi32(n.v);
    const __m256i n_half = _mm256_srai_epi32(n_int, 1);
    const __m256i n_rest = _mm256_sub_epi32(n_int, n_half);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 half = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_half, bias), 23));
    const __m256 rest = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_rest, bias), 23));
    return Float8(_mm256_mul_ps(_mm256_mul_ps(p.v, half), rest));
  }

  static void store(float* p, Float8 v) { _mm256_storeu_ps(p, v.v); }
  // Half a cache line, written without reading it first (p 32-byte aligned); the write-combining
  // buffer joins the two halves of a line as the pass walks down the column.
  static void stream(float* p, Float8 v) { _mm256_stream_ps(p, v.v); }
  static void stream_fence() { _mm_sfence(); }
  // F16C rounds to nearest even, makes subnormal halves and Inf on overflow, as float_to_half.
  static void store(Half* p, Float8 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT));
  }
  // float_to_bf16 (src/core/numeric.hpp) on 8 lanes: round to nearest even on the upper 16 bits,
  // NaN kept a quiet NaN.
  static void store(BFloat16* p, Float8 v) {
    const __m256i bits = _mm256_castps_si256(v.v);
    const __m256i upper = _mm256_srli_epi32(bits, 16);
    const __m256i rounding =
        _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(upper, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, rounding), 16);
    const __m256i quiet_nan = _mm256_or_si256(upper, _mm256_set1_epi32(0x0040));
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v.v, v.v, _CMP_UNORD_Q));
    const __m256i result = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    // Every lane holds a value below 2^16, so the unsigned-saturating pack is exact.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(result),
                                            _mm256_extracti128_si256(result, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }

  // Eight double lanes for the bias-gradient sums.
  struct Wide {
    __m256d low, high;
  };
  static Wide wide_zero() { return Wide{_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static Wide add_wide(Wide sum, Float8 v) {
    return Wide{_mm256_add_pd(sum.low, _mm256_cvtps_pd(_mm256_castps256_ps128(v.v))),
                _mm256_add_pd(sum.high, _mm256_cvtps_pd(_mm256_extractf128_ps(v.v, 1)))};
  }
  static void store_wide(double* p, Wide sum) {
    _mm256_storeu_pd(p, sum.low);
    _mm256_storeu_pd(p + 4, sum.high);
  }
  // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)): a fixed order.
  static double wide_lane_sum(Wide sum) {
    double lanes[8];
    store_wide(lanes, sum);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  }
};

// Found by argument-dependent lookup from the activation functors (epilogue_math.hpp).
inline Float8 exp(Float8 x) { return epilogue_kernels_impl::exp_lanes<Avx2Ops>(x); }
inline Float8 exp2(Float8 x) { return epilogue_kernels_impl::exp2_lanes<Avx2Ops>(x); }
// NaN lanes (unordered with themselves).
inline Mask8 is_nan(Float8 x) { return Mask8{_mm256_cmp_ps(x.v, x.v, _CMP_UNORD_Q)}; }

}  // namespace

const EpilogueKernels& avx2_epilogue_kernels_unchecked() {
  static constexpr EpilogueKernels kernels = epilogue_kernels_impl::make_kernels<Avx2Ops>("avx2");
  return kernels;
}

}  // namespace epigemm
