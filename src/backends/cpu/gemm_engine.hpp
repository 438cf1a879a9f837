// The plain fp32 GEMM under the cpu backend, in BLAS (column-major) terms: the "math floor" that
// the epilogue kernels are added to. Two engines, chosen per backend instance:
//   - oneDNN's dnnl_sgemm (libdnnl-dev): OpenMP threads, JIT kernels picked from CPUID flags;
//   - OpenBLAS's cblas_sgemm (libopenblas-dev): its own pthreads, kernels picked from the CPU model.
// docs/dev/cpu_backend.md has the measurements that make oneDNN the default where both exist.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

enum class CpuGemmEngine { onednn, openblas };

// How the oneDNN engine runs a GEMM with alpha = 1 and beta = 0 (every layer call but an
// accumulating wgrad): dnnl_sgemm with beta = 0, or oneDNN's matmul primitive (which also adds a
// bias; neither reads C). Neither is faster on every shape (docs/dev/cpu_backend.md has the
// measurements); by_shape picks per call with onednn_overwrite_for_shape.
enum class OnednnOverwrite { by_shape, sgemm, matmul_primitive };

// The per-shape choice for one engine call (m x n = op(A) op(B), op(A) m x k), a pure function
// measured on the benchmark machine (gemm_engine.cpp, docs/dev/cpu_backend.md); never by_shape.
OnednnOverwrite onednn_overwrite_for_shape(epigemm_op_t transa, epigemm_op_t transb, int64_t m,
                                           int64_t n, int64_t k);

// Whether the engine is compiled into this build.
bool cpu_gemm_engine_available(CpuGemmEngine engine);
// oneDNN when built, else OpenBLAS.
CpuGemmEngine default_cpu_gemm_engine();
const char* cpu_gemm_engine_name(CpuGemmEngine engine);
// The library under the engine and its version, as it reports itself at run time:
// "oneDNN 2.6.3 (OpenMP runtime)", "OpenBLAS (OpenBLAS 0.3.21 DYNAMIC_ARCH ... ; kernels for
// SkylakeX)"; "<name>: not compiled into this build" when it is not.
std::string cpu_gemm_engine_version(CpuGemmEngine engine);

// Whether the engine can take these sizes (cblas takes 32-bit ints here; oneDNN 64-bit).
bool cpu_gemm_engine_fits(CpuGemmEngine engine, int64_t largest_dimension);

// C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C, with op(A) m x k and op(B) k x n
// as in GemmCall. Needs m, n >= 1; with k = 0, C = beta C (C is not read when beta = 0).
Status cpu_sgemm(CpuGemmEngine engine, epigemm_op_t transa, epigemm_op_t transb, int64_t m,
                 int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float beta, float* c, int64_t ldc);

// C (m x n, column-major, ldc) = op(A) op(B) + bias[i] (bias: m floats, or nullptr for none):
// alpha = 1, beta = 0, and C is never read (it may hold NaN). Needs m, n, k >= 1. oneDNN runs
// its matmul primitive here, which adds the bias inside the GEMM; OpenBLAS runs cblas_sgemm with
// beta = 0 and returns with *bias_added = false, leaving the bias to the caller.
Status cpu_sgemm_overwrite(CpuGemmEngine engine, epigemm_op_t transa, epigemm_op_t transb,
                           int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* b, int64_t ldb, const float* bias, float* c, int64_t ldc,
                           bool* bias_added);

}  // namespace epigemm
