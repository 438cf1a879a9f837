// The fp32 GEMM engines of the cpu backend (gemm_engine.hpp).
#include "backends/cpu/gemm_engine.hpp"

#include <algorithm>
#include <climits>
#include <string>

#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
#include <cblas.h>
#endif
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
#include <dnnl.h>
#endif

namespace epigemm {

bool cpu_gemm_engine_available(CpuGemmEngine engine) {
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
  constexpr bool kOnednn = true;
#else
  constexpr bool kOnednn = false;
#endif
#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
  constexpr bool kOpenblas = true;
#else
  constexpr bool kOpenblas = false;
#endif
  switch (engine) {
    case CpuGemmEngine::onednn: return kOnednn;
    case CpuGemmEngine::openblas: return kOpenblas;
  }
  return false;
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

std::string cpu_gemm_engine_version(CpuGemmEngine engine) {
  if (!cpu_gemm_engine_available(engine)) {
    return std::string(cpu_gemm_engine_name(engine)) + ": not compiled into this build";
  }
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
  if (engine == CpuGemmEngine::onednn) {
    const dnnl_version_t* v = dnnl_version();
    const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP         ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_TBB        ? "TBB"
                          : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "sequential"
                          : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                                      : "unknown";
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch) + " (" + runtime + " runtime)";
  }
#endif
#if defined(EPIGEMM_CPU_WITH_OPENBLAS)
  if (engine == CpuGemmEngine::openblas) {
    // The configuration string starts with the version; the core is what the CPU was detected as.
    return std::string("OpenBLAS (") + openblas_get_config() + "; kernels for " +
           openblas_get_corename() + ")";
  }
#endif
  return cpu_gemm_engine_name(engine);
}

bool cpu_gemm_engine_fits(CpuGemmEngine engine, int64_t largest_dimension) {
  return engine == CpuGemmEngine::onednn || largest_dimension <= int64_t(INT_MAX);
}

// Measured with `epigemm_bench_cpu --engines` on the benchmark machine (2 cores, AVX-512, oneDNN
// 2.6), 87 layer passes of tokens 64-2048 x (in, out) in (768, 3072), (3072, 768), (1024, 4096),
// (4096, 1024), (4096, 4096); docs/dev/cpu_backend.md has the table. In every fprop layout (op(A) =
// A^T, op(B) = B: gemm_m = out_features, gemm_n = tokens, gemm_k = in_features) with gemm_n <= 512
// the matmul primitive took 0.58-1.00 of the time of dnnl_sgemm on a zero-filled D (the backend
// filled D before dnnl_sgemm then; since 2026-11-30 it does not, docs/dev/cpu_backend.md) (e.g.
// (512, 4096, 4096) fprop 92 vs 107 ms). Elsewhere dnnl_sgemm won most cases, the primitive losing
// by up to 2.6x (dgrad and wgrad of (tokens, 3072, 768)); the primitive's wins there are not in
// the rule because no group of them was consistent: fprop at 768-1024 tokens (3 of 8 cases), dgrad
// and wgrad at 64-128 tokens (7 of 12), dgrad at 256-768 tokens (3 of 13). Below the measured
// sizes (gemm_m or gemm_k < 768) the rule keeps dnnl_sgemm.
OnednnOverwrite onednn_overwrite_for_shape(epigemm_op_t transa, epigemm_op_t transb, int64_t m,
                                           int64_t n, int64_t k) {
  const bool fprop_layout = transa == EPIGEMM_OP_T && transb == EPIGEMM_OP_N;
  if (fprop_layout && n <= 512 && m >= 768 && k >= 768) return OnednnOverwrite::matmul_primitive;
  return OnednnOverwrite::sgemm;
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

#if defined(EPIGEMM_CPU_WITH_ONEDNN)
namespace {

// One CPU engine for the process (creating it queries the CPU once); streams are made per call.
dnnl_engine_t onednn_engine() {
  static dnnl_engine_t engine = [] {
    dnnl_engine_t created = nullptr;
    if (dnnl_engine_create(&created, dnnl_cpu, 0) != dnnl_success) return dnnl_engine_t(nullptr);
    return created;
  }();
  return engine;
}

// Destroys the oneDNN objects of one call however it returns.
struct OnednnObjects {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t primitive = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_memory_t memory[4] = {nullptr, nullptr, nullptr, nullptr};
  ~OnednnObjects() {
    for (dnnl_memory_t m : memory) {
      if (m != nullptr) dnnl_memory_destroy(m);
    }
    if (stream != nullptr) dnnl_stream_destroy(stream);
    if (primitive != nullptr) dnnl_primitive_destroy(primitive);
    if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
  }
};

// As in cpu_sgemm, oneDNN sees the row-major C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m), with
// strides read off each operand's transpose flag and leading dimension; the bias, one per i, is
// one per column of C^T.
Status onednn_matmul(epigemm_op_t transa, epigemm_op_t transb, int64_t m, int64_t n, int64_t k,
                     const float* a, int64_t lda, const float* b, int64_t ldb, const float* bias,
                     float* c, int64_t ldc) {
  dnnl_engine_t engine = onednn_engine();
  if (engine == nullptr) return EPIGEMM_BACKEND_ERROR("oneDNN could not create a CPU engine");
  const dnnl_dims_t src_dims = {n, k}, weights_dims = {k, m}, dst_dims = {n, m}, bias_dims = {1, m};
  const dnnl_dims_t src_strides = {transb == EPIGEMM_OP_N ? ldb : 1, transb == EPIGEMM_OP_N ? 1 : ldb};
  const dnnl_dims_t weights_strides = {transa == EPIGEMM_OP_N ? lda : 1,
                                       transa == EPIGEMM_OP_N ? 1 : lda};
  const dnnl_dims_t dst_strides = {ldc, 1}, bias_strides = {m, 1};
  dnnl_memory_desc_t src_md, weights_md, dst_md, bias_md;
  OnednnObjects o;
  dnnl_matmul_desc_t desc;
  dnnl_status_t st = dnnl_memory_desc_init_by_strides(&src_md, 2, src_dims, dnnl_f32, src_strides);
  if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&weights_md, 2, weights_dims, dnnl_f32, weights_strides);
  if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&dst_md, 2, dst_dims, dnnl_f32, dst_strides);
  if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&bias_md, 2, bias_dims, dnnl_f32, bias_strides);
  if (st == dnnl_success) st = dnnl_matmul_desc_init(&desc, &src_md, &weights_md, bias ? &bias_md : nullptr, &dst_md);
  // The library keeps a cache of primitives: the panels of a call (and repeated calls) hit it.
  if (st == dnnl_success) st = dnnl_primitive_desc_create(&o.pd, &desc, nullptr, engine, nullptr);
  if (st == dnnl_success) st = dnnl_primitive_create(&o.primitive, o.pd);
  if (st == dnnl_success) st = dnnl_stream_create(&o.stream, engine, dnnl_stream_default_flags);
  if (st == dnnl_success) st = dnnl_memory_create(&o.memory[0], &src_md, engine, const_cast<float*>(b));
  if (st == dnnl_success) st = dnnl_memory_create(&o.memory[1], &weights_md, engine, const_cast<float*>(a));
  if (st == dnnl_success) st = dnnl_memory_create(&o.memory[2], &dst_md, engine, c);
  if (st == dnnl_success && bias) st = dnnl_memory_create(&o.memory[3], &bias_md, engine, const_cast<float*>(bias));
  if (st == dnnl_success) {
    const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, o.memory[0]},
                                     {DNNL_ARG_WEIGHTS, o.memory[1]},
                                     {DNNL_ARG_DST, o.memory[2]},
                                     {DNNL_ARG_BIAS, o.memory[3]}};
    st = dnnl_primitive_execute(o.primitive, o.stream, bias ? 4 : 3, args);
  }
  if (st == dnnl_success) st = dnnl_stream_wait(o.stream);
  if (st != dnnl_success) {
    return EPIGEMM_BACKEND_ERROR("oneDNN matmul returned status ", int(st), " for m = ", m,
                                 ", n = ", n, ", k = ", k);
  }
  return Status();
}

}  // namespace
#endif

// Without oneDNN the bias is never read here: cblas_sgemm has no bias argument, and the caller
// adds it (*bias_added stays false).
Status cpu_sgemm_overwrite(CpuGemmEngine engine, epigemm_op_t transa, epigemm_op_t transb,
                           int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* b, int64_t ldb, [[maybe_unused]] const float* bias,
                           float* c, int64_t ldc, bool* bias_added) {
  *bias_added = false;
#if defined(EPIGEMM_CPU_WITH_ONEDNN)
  if (engine == CpuGemmEngine::onednn) {
    *bias_added = bias != nullptr;
    return onednn_matmul(transa, transb, m, n, k, a, lda, b, ldb, bias, c, ldc);
  }
#endif
  return cpu_sgemm(engine, transa, transb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

}  // namespace epigemm
