// The portable build of the cpu backend's kernels (one float at a time), and the runtime choice
// among it and the AVX2 and AVX-512 builds.
#include "backends/cpu/epilogue_kernels_impl.hpp"

namespace epigemm {
namespace {

struct ScalarOps {
  using V = float;
  static constexpr int64_t width = 1;
  static float load(const float* p) { return *p; }
  static float load(const Half* p) { return half_to_float(*p); }
  static float load(const BFloat16* p) { return bf16_to_float(*p); }
  static void store(float* p, float v) { *p = v; }
  static void store(Half* p, float v) { *p = float_to_half(v); }
  static void store(BFloat16* p, float v) { *p = float_to_bf16(v); }
  using Wide = double;
  static double wide_zero() { return 0.0; }
  static double add_wide(double sum, float v) { return sum + double(v); }
  static void store_wide(double* p, double sum) { *p = sum; }
  static double wide_lane_sum(double sum) { return sum; }
};

}  // namespace

#if defined(EPIGEMM_CPU_AVX2_KERNELS)
// Defined in epilogue_kernels_avx2.cpp / _avx512.cpp; only called once the CPU is known to run
// them.
const EpilogueKernels& avx2_epilogue_kernels_unchecked();
const EpilogueKernels& avx512_epilogue_kernels_unchecked();
#endif

const EpilogueKernels& scalar_epilogue_kernels() {
  static constexpr EpilogueKernels kernels =
      epilogue_kernels_impl::make_kernels<ScalarOps>("scalar");
  return kernels;
}

const EpilogueKernels* avx2_epilogue_kernels() {
#if defined(EPIGEMM_CPU_AVX2_KERNELS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return &avx2_epilogue_kernels_unchecked();
  }
#endif
  return nullptr;
}

const EpilogueKernels* avx512_epilogue_kernels() {
#if defined(EPIGEMM_CPU_AVX2_KERNELS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return &avx512_epilogue_kernels_unchecked();
#endif
  return nullptr;
}

const EpilogueKernels& select_epilogue_kernels() {
  if (const EpilogueKernels* avx512 = avx512_epilogue_kernels()) return *avx512;
  if (const EpilogueKernels* avx2 = avx2_epilogue_kernels()) return *avx2;
  return scalar_epilogue_kernels();
}

}  // namespace epigemm
