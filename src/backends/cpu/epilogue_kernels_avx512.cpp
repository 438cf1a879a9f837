// The AVX-512 build of the cpu backend's kernels: 16 floats per __m512 (AVX512F only). The same
// templates as the AVX2 build (epilogue_kernels_impl.hpp, and epilogue_math.hpp's GELU
// instantiated for Float16); this file supplies the lane type and the primitives. Compiled with
// -mavx512f and reached only through avx512_epilogue_kernels(), which checks the CPU first.
#include <immintrin.h>

#include "backends/cpu/epilogue_kernels_impl.hpp"

namespace epigemm {
namespace {

struct Float16 {
  __m512 v;
  Float16() = default;
  Float16(float s) : v(_mm512_set1_ps(s)) {}  // implicit: the formulas mix lanes and constants
  explicit Float16(__m512 x) : v(x) {}
};

struct Mask16 {
  __mmask16 bits;
};

}  // namespace

// The constants of epilogue_math.hpp are taken in the lane type.
template <>
struct ScalarOf<Float16> {
  using type = float;
};

namespace {

inline Float16 operator+(Float16 a, Float16 b) { return Float16(_mm512_add_ps(a.v, b.v)); }
inline Float16 operator-(Float16 a, Float16 b) { return Float16(_mm512_sub_ps(a.v, b.v)); }
inline Float16 operator*(Float16 a, Float16 b) { return Float16(_mm512_mul_ps(a.v, b.v)); }
inline Float16 operator/(Float16 a, Float16 b) { return Float16(_mm512_div_ps(a.v, b.v)); }
// Ordered comparisons: false for NaN lanes, as the scalar comparisons.
inline Mask16 operator>(Float16 a, Float16 b) { return Mask16{_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)}; }
inline Mask16 operator<(Float16 a, Float16 b) { return Mask16{_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline Float16 where(Mask16 condition, Float16 if_true, Float16 if_false) {
  return Float16(_mm512_mask_blend_ps(condition.bits, if_false.v, if_true.v));
}

struct Avx512Ops {
  using V = Float16;
  static constexpr int64_t width = 16;

  // The primitives of exp_lanes (epilogue_kernels_impl.hpp).
  static Float16 fma(Float16 a, Float16 b, Float16 c) { return Float16(_mm512_fmadd_ps(a.v, b.v, c.v)); }
  static Float16 round_to_int(Float16 x) {
    return Float16(_mm512_roundscale_ps(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Float16 min(Float16 a, Float16 b) { return Float16(_mm512_min_ps(a.v, b.v)); }
  static Float16 max(Float16 a, Float16 b) { return Float16(_mm512_max_ps(a.v, b.v)); }
  // p 2^n by vscalefps: one instruction, one rounding of the exact product (Inf on overflow,
  // correctly rounded subnormals), like the AVX2 build's two normal factors, whose first product
  // is exact. It replaced those 9 instructions here (gelu and gelu' came out bitwise the same over
  // 983k values in [-120, 120] and the special values) and made the GELU passes about 17% faster:
  // they are bound by their arithmetic, not by memory (docs/dev/cpu_backend.md, "The kernels").
  static Float16 scale_by_two_to(Float16 p, Float16 n) { return Float16(_mm512_scalef_ps(p.v, n.v)); }

  static Float16 load(const float* p) { return Float16(_mm512_loadu_ps(p)); }
  static Float16 load(const Half* p) {
    return Float16(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static Float16 load(const BFloat16* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return Float16(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }

  static void store(float* p, Float16 v) { _mm512_storeu_ps(p, v.v); }
  // One whole 64-byte cache line, written without reading it first (p 64-byte aligned).
  static void stream(float* p, Float16 v) { _mm512_stream_ps(p, v.v); }
  static void stream_fence() { _mm_sfence(); }
  // Round to nearest even, subnormal halves, Inf on overflow, as float_to_half.
  static void store(Half* p, Float16 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // float_to_bf16 (src/core/numeric.hpp) on 16 lanes, as in the AVX2 build.
  static void store(BFloat16* p, Float16 v) {
    const __m512i bits = _mm512_castps_si512(v.v);
    const __m512i upper = _mm512_srli_epi32(bits, 16);
    const __m512i rounding =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(upper, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, rounding), 16);
    const __m512i quiet_nan = _mm512_or_si512(upper, _mm512_set1_epi32(0x0040));
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v.v, v.v, _CMP_UNORD_Q);
    const __m512i result = _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(result));
  }

  // Sixteen double lanes for the bias-gradient sums.
  struct Wide {
    __m512d low, high;
  };
  static Wide wide_zero() { return Wide{_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static Wide add_wide(Wide sum, Float16 v) {
    const __m256 low = _mm512_castps512_ps256(v.v);
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v.v), 1));
    return Wide{_mm512_add_pd(sum.low, _mm512_cvtps_pd(low)),
                _mm512_add_pd(sum.high, _mm512_cvtps_pd(high))};
  }
  static void store_wide(double* p, Wide sum) {
    _mm512_storeu_pd(p, sum.low);
    _mm512_storeu_pd(p + 8, sum.high);
  }
  // Pairs, then pairs of pairs, ...: a fixed order.
  static double wide_lane_sum(Wide sum) {
    double lanes[16];
    store_wide(lanes, sum);
    for (int width = 8; width >= 1; width /= 2) {
      for (int i = 0; i < width; ++i) lanes[i] = lanes[2 * i] + lanes[2 * i + 1];
    }
    return lanes[0];
  }
};

// Found by argument-dependent lookup from the activation functors (epilogue_math.hpp).
inline Float16 exp(Float16 x) { return epilogue_kernels_impl::exp_lanes<Avx512Ops>(x); }
inline Float16 exp2(Float16 x) { return epilogue_kernels_impl::exp2_lanes<Avx512Ops>(x); }
// NaN lanes (unordered with themselves).
inline Mask16 is_nan(Float16 x) { return Mask16{_mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q)}; }

}  // namespace

const EpilogueKernels& avx512_epilogue_kernels_unchecked() {
  static constexpr EpilogueKernels kernels =
      epilogue_kernels_impl::make_kernels<Avx512Ops>("avx512");
  return kernels;
}

}  // namespace epigemm
