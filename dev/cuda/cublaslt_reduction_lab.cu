// cuBLASLt's split-K reductions against the contract's "every reduction at least fp32": for skinny
// bf16 GEMMs with a long gemm_k (column-major D[m x n] = A[m x k] B[k x n], NN, fp32 compute), the
// algorithm cuBLASLt's heuristic picks left free and with CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
// = COMPUTE_TYPE (what the cublaslt backend asks, cublaslt_backend.cpp): its split-K count and
// reduction scheme, its time, and how many elements of the bf16 D are more than one bf16 ulp from
// cuBLAS's fp32 result. docs/dispatch.md ("What cublaslt declines") shows a run on the H200.
//
//   epigemm_cublaslt_reduction_lab        (no arguments; about a second)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <cmath>
// Any CUDA or cuBLAS status other than success ends the lab with the line that failed.
#define CK(x) do { auto s_ = (x); if ((int)s_ != 0) { printf("%s:%d error %d\n", __FILE__, __LINE__, (int)s_); exit(1);} } while (0)
int main() {
  struct Shape { int m, n, k; };
  std::vector<Shape> shapes = {{1022, 3001, 4094}, {1024, 3000, 4096}, {1024, 384, 16384}, {4094, 3001, 1022}, {768, 2048, 3072}, {512, 256, 8192}};
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  cublasHandle_t blas; CK(cublasCreate(&blas));
  CK(cublasSetMathMode(blas, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  size_t ws_bytes = 32u << 20; void* ws; CK(cudaMalloc(&ws, ws_bytes));
  for (auto s : shapes) {
    const int m = s.m, n = s.n, k = s.k;
    std::vector<__nv_bfloat16> ha(size_t(m) * k), hb(size_t(k) * n);
    std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : ha) x = __float2bfloat16(u(rng) * 2.0f / std::sqrt(float(m)));
    for (auto& x : hb) x = __float2bfloat16(u(rng));
    __nv_bfloat16 *a, *b, *d; float* truth;
    CK(cudaMalloc(&a, ha.size() * 2)); CK(cudaMalloc(&b, hb.size() * 2)); CK(cudaMalloc(&d, size_t(m) * n * 2)); CK(cudaMalloc(&truth, size_t(m) * n * 4));
    CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    float one = 1, zero = 0;
    CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, m, b, CUDA_R_16BF, k, &zero, truth, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    std::vector<float> ht(size_t(m) * n); CK(cudaMemcpy(ht.data(), truth, ht.size() * 4, cudaMemcpyDeviceToHost));
    auto evaluate = [&](const char* name) {
      std::vector<__nv_bfloat16> hd(size_t(m) * n); CK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
      long bad = 0; double worst = 0;
      for (size_t i = 0; i < hd.size(); ++i) {
        const float x = __bfloat162float(hd[i]), t = ht[i];
        const float ulp = std::ldexp(1.0f, std::ilogb(std::fmax(std::fabs(t), 1e-30f)) - 7);
        const double e = std::fabs(x - t) / ulp; worst = std::fmax(worst, e); if (e > 1.0) ++bad;
      }
      printf("  %-34s elements over 1 bf16 ulp of the fp32 result: %ld, worst %.1f ulp\n", name, bad, worst);
    };
    printf("m=%d n=%d k=%d\n", m, n, k);
    CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, m, b, CUDA_R_16BF, k, &zero, d, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    evaluate("cublasGemmEx (no reduced precision)");
    for (int masked = 0; masked < 2; ++masked) {
      cublasLtMatmulDesc_t desc; CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasLtMatrixLayout_t la, lb, ld;
      CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m)); CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k)); CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
      cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t wsb = ws_bytes; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
      uint32_t al = 4; // rows of 1022 bf16: 4-byte aligned
      for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        CK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al)));
      if (masked) { uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask))); }
      cublasLtMatmulHeuristicResult_t r{}; int got = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &r, &got));
      int32_t splitk = 0, scheme = 0; size_t w = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme), &w);
      CK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &r.algo, ws, ws_bytes, 0));
      CK(cudaDeviceSynchronize());
      cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
      cudaEventRecord(e0); for (int i = 0; i < 50; ++i) cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &r.algo, ws, ws_bytes, 0);
      cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1);
      char name[128]; snprintf(name, sizeof name, "lt %s: splitK %d scheme %d %.4f ms", masked ? "mask=COMPUTE_TYPE" : "default", splitk, scheme, ms / 50);
      evaluate(name);
      cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld); cublasLtMatmulDescDestroy(desc);
    }
    cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(truth);
  }
  printf("(reduction schemes: 0 none, 1 inplace, 2 compute type, 4 output type)\n");
}
