// The fp32 GEMM engines of the cpu backend (gemm_engine.hpp).
#include "backends/cpu/gemm_engine.hpp"

#include <algorithm>
#include <climits>

#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
#include <cblas.h>
#endif
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
#include <dnnl.h>
#endif

namespace epigemm {

bool cpu_gemm_engine_available(CpuGemmEngine engine) {
  switch (engine) {
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
    case CpuGemmEngine::onednn: return true;
#endif
#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
    case CpuGemmEngine::openblas: return true;
#endif
    default: return false;
  }
}

CpuGemmEngine default_cpu_gemm_engine() {
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
  return CpuGemmEngine::onednn;
#else
  return CpuGemmEngine::openblas;
#endif
}

const char* cpu_gemm_engine_name(CpuGemmEngine engine) {
  return engine == CpuGemmEngine::onednn ? "onednn-sgemm" : "openblas-sgemm";
}

bool cpu_gemm_engine_fits(CpuGemmEngine engine, int64_t largest_dimension) {
  return engine == CpuGemmEngine::onednn || largest_dimension <= int64_t(INT_MAX);
}

Status cpu_sgemm(CpuGemmEngine engine, epigemm_op_t transa, epigemm_op_t transb, int64_t m,
                 int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!cpu_gemm_engine_available(engine)) {
    return EPIGEMM_BACKEND_ERROR(cpu_gemm_engine_name(engine), " is not compiled into this build");
  }
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
  if (engine == CpuGemmEngine::onednn) {
    // dnnl_sgemm is row-major. A column-major m x n C is the row-major n x m matrix C^T, and
    // C^T = op(B)^T op(A)^T: the operands swap places, each keeps its transpose flag and
    // leading dimension, and the sizes become (n, m, k).
    const char ta = transa == EPIGEMM_OP_T ? 'T' : 'N';
    const char tb = transb == EPIGEMM_OP_T ? 'T' : 'N';
    const dnnl_status_t status =
        dnnl_sgemm(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    if (status != dnnl_success) {
      return EPIGEMM_BACKEND_ERROR("dnnl_sgemm returned status ", int(status), " for m = ", m,
                                   ", n = ", n, ", k = ", k);
    }
    return Status();
  }
#endif
#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
  if (engine == CpuGemmEngine::openblas) {
    const int64_t largest = std::max({m, n, k, lda, ldb, ldc});
    if (!cpu_gemm_engine_fits(engine, largest)) {
      return EPIGEMM_BACKEND_ERROR("cblas_sgemm takes 32-bit sizes; got ", largest);
    }
    cblas_sgemm(CblasColMajor, transa == EPIGEMM_OP_T ? CblasTrans : CblasNoTrans,
                transb == EPIGEMM_OP_T ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
                a, int(lda), b, int(ldb), beta, c, int(ldc));
    return Status();
  }
#endif
  return EPIGEMM_BACKEND_ERROR("unknown GEMM engine");
}

}  // namespace epigemm
