// The portable build of the cpu backend's kernels (one float at a time), and the runtime choice
// among it and the AVX2 and AVX-512 builds.
#include "backends/cpu/epilogue_kernels_impl.hpp"

#if defined(EPIGEMM_CPU_AVX2_KERNELS)
#include <cpuid.h>
#endif

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
  // Portable: no non-temporal stores, so nothing to fence.
  static void stream(float* p, float v) { *p = v; }
  static void stream_fence() {}
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

namespace {

// What the CPU and the operating system support of the two vector builds' instruction sets. Read
// from CPUID and XGETBV directly: __builtin_cpu_supports has no "f16c" in clang 14 (GCC has it),
// and this one way serves both compilers.
struct X86Features {
  bool avx2_fma_f16c = false;
  bool avx512f = false;
};

X86Features read_x86_features() {
  X86Features features;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return features;
  const bool fma = (ecx & bit_FMA) != 0, f16c = (ecx & bit_F16C) != 0;
  // AVX registers are usable only when the OS saves them: OSXSAVE, then XCR0's XMM and YMM bits
  // (1, 2) for AVX2, and also its opmask / ZMM bits (5, 6, 7) for AVX-512.
  if ((ecx & bit_OSXSAVE) == 0 || (ecx & bit_AVX) == 0) return features;
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  const bool ymm_saved = (xcr0 & 0x06u) == 0x06u;
  const bool zmm_saved = (xcr0 & 0xe6u) == 0xe6u;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return features;
  features.avx2_fma_f16c = ymm_saved && (ebx & bit_AVX2) != 0 && fma && f16c;
  features.avx512f = zmm_saved && (ebx & bit_AVX512F) != 0;
  return features;
}

const X86Features& x86_features() {
  static const X86Features features = read_x86_features();
  return features;
}

}  // namespace
#endif

const EpilogueKernels& scalar_epilogue_kernels() {
  static constexpr EpilogueKernels kernels =
      epilogue_kernels_impl::make_kernels<ScalarOps>("scalar");
  return kernels;
}

const EpilogueKernels* avx2_epilogue_kernels() {
#if defined(EPIGEMM_CPU_AVX2_KERNELS)
  if (x86_features().avx2_fma_f16c) return &avx2_epilogue_kernels_unchecked();
#endif
  return nullptr;
}

const EpilogueKernels* avx512_epilogue_kernels() {
#if defined(EPIGEMM_CPU_AVX2_KERNELS)
  if (x86_features().avx512f) return &avx512_epilogue_kernels_unchecked();
#endif
  return nullptr;
}

const EpilogueKernels& select_epilogue_kernels() {
  if (const EpilogueKernels* avx512 = avx512_epilogue_kernels()) return *avx512;
  if (const EpilogueKernels* avx2 = avx2_epilogue_kernels()) return *avx2;
  return scalar_epilogue_kernels();
}

}  // namespace epigemm
