// cuBLASLt's fused tanh GELU and its derivative (CUBLASLT_EPILOGUE_GELU and CUBLASLT_EPILOGUE_DGELU,
// what the cublaslt backend would run for gelu_tanh) against the formulas of docs/conventions.md
// evaluated in double, one pre-activation at a time. Forward: D[m x 1] = GELU(A[m x 8] B[8 x 1])
// with A's first column every bf16 value of a range and B = (1, 0, ..., 0), so that acc is the
// bf16 value itself, exactly. Backward: D = acc * GELU'(aux) with acc = 1 (A's first column all
// ones) and aux the same bf16 values. For each binade of |x| (negative and positive apart) it
// prints the largest relative error of the fp32 D, and of the bf16 D the largest error in bf16
// ulps of the exact value and how many values are more than half an ulp off (not the nearest
// bf16).
//
//   epigemm_cublaslt_gelu_lab        (no arguments; well under a second)
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lab_check.hpp"


namespace {

// s = 0.5 (1 + tanh(u)) = sigmoid(2u), in the form that does not cancel for negative x (1 + tanh(u)
// cancels in double too: below about -6.5 it is a few multiples of 2^-53, or 0).
double sigmoid_2u(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 1.0 / (1.0 + std::exp(-2.0 * u));
}

double gelu_tanh(double x) { return x * sigmoid_2u(x); }

double gelu_tanh_grad(double x) {
  const double s = sigmoid_2u(x);
  return s + 2.0 * x * s * (1.0 - s) * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t word = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

// D = GELU(A B) (aux null) or D = (A B) * GELU'(aux) with cuBLASLt, D and aux in `d_type`
// (CUDA_R_32F or CUDA_R_16BF), column-major m x 1.
void run_gelu(cublasLtHandle_t lt, const __nv_bfloat16* a, const __nv_bfloat16* b, void* d, cudaDataType d_type,
              const void* aux, int m, int k, void* workspace, size_t workspace_bytes) {
  cublasLtMatmulDesc_t desc;
  LAB_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasLtEpilogue_t epilogue = aux ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_GELU;
  LAB_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (aux) {
    LAB_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    const int64_t ld_aux = m;
    LAB_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux));
    const cudaDataType aux_type = d_type;
    LAB_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                      sizeof aux_type));
  }
  cublasLtMatrixLayout_t la, lb, ld;
  LAB_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m));
  LAB_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, 1, k));
  LAB_CHECK(cublasLtMatrixLayoutCreate(&ld, d_type, m, 1, m));
  cublasLtMatmulPreference_t pref;
  LAB_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t bytes = workspace_bytes;
  LAB_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  LAB_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &result, &found));
  if (found == 0) {
    std::printf("cuBLASLt has no algorithm for the GELU epilogue with this D type\n");
    std::exit(1);
  }
  const float one = 1.0f, zero = 0.0f;
  LAB_CHECK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &result.algo, workspace,
                           workspace_bytes, 0));
  LAB_CHECK(cudaDeviceSynchronize());
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace

int main() {
  // Every bf16 value with 2^-4 <= |x| < 2^3, both signs: 128 per binade, 7 binades, 2 signs.
  std::vector<uint16_t> bits;
  for (int sign = 0; sign < 2; ++sign) {
    for (uint32_t exponent = 127 - 4; exponent < 127 + 3; ++exponent) {
      for (uint32_t mantissa = 0; mantissa < 128; ++mantissa) {
        bits.push_back(uint16_t((sign << 15) | (exponent << 7) | mantissa));
      }
    }
  }
  const int m = int(bits.size()), k = 8;
  cublasLtHandle_t lt;
  LAB_CHECK(cublasLtCreate(&lt));
  const size_t workspace_bytes = size_t(32) << 20;
  void *a, *b, *d32, *d16, *aux32, *aux16, *workspace;
  LAB_CHECK(cudaMalloc(&a, size_t(m) * k * 2));
  LAB_CHECK(cudaMalloc(&b, size_t(k) * 2));
  LAB_CHECK(cudaMalloc(&d32, size_t(m) * 4));
  LAB_CHECK(cudaMalloc(&d16, size_t(m) * 2));
  LAB_CHECK(cudaMalloc(&aux32, size_t(m) * 4));
  LAB_CHECK(cudaMalloc(&aux16, size_t(m) * 2));
  LAB_CHECK(cudaMalloc(&workspace, workspace_bytes));
  std::vector<uint16_t> host_b(k, 0);
  host_b[0] = 0x3f80;  // 1.0 in bf16
  LAB_CHECK(cudaMemcpy(b, host_b.data(), host_b.size() * 2, cudaMemcpyHostToDevice));
  std::vector<float> x32(m);
  for (int i = 0; i < m; ++i) x32[i] = bf16_bits_to_float(bits[i]);
  LAB_CHECK(cudaMemcpy(aux32, x32.data(), size_t(m) * 4, cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMemcpy(aux16, bits.data(), size_t(m) * 2, cudaMemcpyHostToDevice));
  std::printf("cuBLASLt %d, bf16 A and B, fp32 compute; forward: acc = x exactly; backward: acc = 1, aux = x\n",
              int(cublasLtGetVersion()));
  for (int backward = 0; backward < 2; ++backward) {
    std::vector<uint16_t> host_a(size_t(m) * k, 0);
    for (int i = 0; i < m; ++i) host_a[i] = backward ? uint16_t(0x3f80) : bits[i];  // column 0 of A
    LAB_CHECK(cudaMemcpy(a, host_a.data(), host_a.size() * 2, cudaMemcpyHostToDevice));
    run_gelu(lt, static_cast<__nv_bfloat16*>(a), static_cast<__nv_bfloat16*>(b), d32, CUDA_R_32F,
             backward ? aux32 : nullptr, m, k, workspace, workspace_bytes);
    run_gelu(lt, static_cast<__nv_bfloat16*>(a), static_cast<__nv_bfloat16*>(b), d16, CUDA_R_16BF,
             backward ? aux16 : nullptr, m, k, workspace, workspace_bytes);
    std::vector<float> out32(m);
    std::vector<uint16_t> out16(m);
    LAB_CHECK(cudaMemcpy(out32.data(), d32, size_t(m) * 4, cudaMemcpyDeviceToHost));
    LAB_CHECK(cudaMemcpy(out16.data(), d16, size_t(m) * 2, cudaMemcpyDeviceToHost));
    std::printf("\n%s\n", backward ? "CUBLASLT_EPILOGUE_DGELU: D = GELU'(x)" : "CUBLASLT_EPILOGUE_GELU: D = GELU(x)");
    std::printf("%-16s %8s %22s %22s %24s\n", "x in", "values", "fp32 D: max rel. err", "bf16 D: max err (ulp)",
                "bf16 D: not nearest");
    for (int sign = 0; sign < 2; ++sign) {
      for (int binade = -4; binade < 3; ++binade) {
        double worst_rel = 0.0, worst_ulp = 0.0;
        int not_nearest = 0, count = 0;
        for (int i = 0; i < m; ++i) {
          const float x = x32[i];
          if ((x < 0) != (sign == 1) || std::ilogb(x) != binade) continue;
          ++count;
          const double exact = backward ? gelu_tanh_grad(double(x)) : gelu_tanh(double(x));
          if (exact == 0.0) continue;
          // A NaN result counts as the worst (fmax would drop it) and as not the nearest.
          const double rel = std::fabs(double(out32[i]) - exact) / std::fabs(exact);
          worst_rel = std::isnan(rel) ? INFINITY : std::fmax(worst_rel, rel);
          // One bf16 ulp at the exact value: 2^(exponent - 7).
          const double ulp = std::ldexp(1.0, std::ilogb(exact) - 7);
          const double err = std::fabs(double(bf16_bits_to_float(out16[i])) - exact) / ulp;
          worst_ulp = std::isnan(err) ? INFINITY : std::fmax(worst_ulp, err);
          if (!(err <= 0.5 + 1e-9)) ++not_nearest;
        }
        char range[32];
        std::snprintf(range, sizeof range, "%s[%g, %g)", sign ? "-" : "+", std::ldexp(1.0, binade),
                      std::ldexp(1.0, binade + 1));
        std::printf("%-16s %8d %22.2e %22.2f %24d\n", range, count, worst_rel, worst_ulp, not_nearest);
      }
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(d32);
  cudaFree(d16);
  cudaFree(aux32);
  cudaFree(aux16);
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return 0;
}
