// The decision table behind cublaslt_preferred(). Rows come from scripts/make_dispatch_table.py
// run over a benchmark CSV (bench/results/); see docs/dispatch.md for the data and the rule.
#include "backends/cublaslt/cublaslt_preference.hpp"

#include <cstdint>

#include "backends/cublaslt/cublaslt_alignment.hpp"
#include "core/epilogue_parts.hpp"

namespace epigemm {
namespace {

// One measured case: epilogue and activation (as the parts name them: epilogue_of_parts, and
// the identity for the epilogues without one), input dtype, and the GEMM size it was measured
// at. A call is matched to the measured case of its epilogue, activation and dtype whose size is
// nearest: the smallest product of the per-dimension ratios (larger / smaller).
struct MeasuredCase {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
  epigemm_dtype_t dtype;
  int64_t gemm_m, gemm_n, gemm_k;
  bool cublaslt_faster;
};

#include "backends/cublaslt/dispatch_table.inc"

double size_mismatch(const MeasuredCase& c, const GemmCall& call) {
  auto term = [](int64_t measured, int64_t asked) {
    double ratio = double(measured) / double(asked);
    if (ratio < 1.0) ratio = 1.0 / ratio;
    return ratio;
  };
  return term(c.gemm_m, call.gemm_m) * term(c.gemm_n, call.gemm_n) * term(c.gemm_k, call.gemm_k);
}

// Whether every matrix the call hands cuBLASLt has the 16-byte alignment the table was measured
// with (cublaslt_alignment.hpp: the address and the leading dimension in bytes).
bool matrices_fully_aligned(const GemmCall& call) {
  if (lt_matrix_alignment(call.a) < kLtMaxAlignment || lt_matrix_alignment(call.b) < kLtMaxAlignment ||
      lt_matrix_alignment(call.d) < kLtMaxAlignment) {
    return false;
  }
  return !call.has_aux || lt_matrix_alignment(call.aux) >= kLtMaxAlignment;
}

}  // namespace

bool cublaslt_preferred(const GemmCall& call) {
  // The call's epilogue as its parts name it, so that ACT(identity) is looked up as DEFAULT,
  // ACT_BIAS(identity) as BIAS, and an epilogue without an activation whatever the description's
  // activation setting.
  const EpilogueParts parts = call.parts();
  // cuBLASLt's GELU and GELU derivative are not the contract's gelu_tanh for negative
  // pre-activations: measured on the H200 (cuBLASLt 13.1, bf16, every bf16 x of [-8, -2),
  // 2026-12-02, dev/cuda/cublaslt_gelu_lab.cu), up to 2 bf16 ulps off (a quarter of the values not
  // the nearest bf16) in [-4, -2), and 0 or far off below -4 (relative error 1), both forward and
  // backward: the 1 + tanh(u) form that docs/conventions.md rejects. So AUTO never prefers it for
  // gelu_tanh, however fast; the cublaslt backend still runs those epilogues when a call names it.
  if (parts.activation == EPIGEMM_ACTIVATION_GELU_TANH) return false;
  // Every case of the table had each matrix (A, B, D, aux) 16-byte aligned in its address and its
  // leading dimension. Below that cuBLASLt's heuristic chooses among other algorithms, measured
  // apart (H200, bf16, 2026-12-02 15:41 UTC, the derive shapes 2048,768,50257 and 1024,1600,50257,
  // GPT-2's output layers, whose 50257 out_features leave D's rows 2-byte aligned): the bias and
  // ReLU forward (BIAS, ACT and ACT_BIAS with relu) took 0.91-0.95x the cuda backend's time, and
  // the bias gradients (BGRADB, BGRADA) 3.4-3.9x. A call below that alignment goes to cublaslt for
  // the former, whatever its size, and to cuda for everything else. (The held-out 3001,1022,4094
  // and 512,1280,50257 then checked it: 0.79-0.86x and 0.94-0.95x; before, from that held-out
  // 3001,1022,4094 alone, where cuBLASLt's GELU took 6x cuda's time, every such call went to cuda.)
  if (!matrices_fully_aligned(call)) {
    const bool relu_or_identity = parts.activation == EPIGEMM_ACTIVATION_RELU ||
                                  parts.activation == EPIGEMM_ACTIVATION_IDENTITY;
    return relu_or_identity && parts.computes_on_acc() && !parts.uses_aux() && !parts.writes_bias_grad();
  }
  const epigemm_epilogue_t epilogue = epilogue_of_parts(parts);
  const MeasuredCase* nearest = nullptr;
  double nearest_distance = 0.0;
  for (const MeasuredCase& c : kMeasuredCases) {
    if (c.epilogue != epilogue || c.activation != parts.activation || c.dtype != call.a.dtype) continue;
    const double distance = size_mismatch(c, call);
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &c;
      nearest_distance = distance;
    }
  }
  // No measured case of this epilogue, activation and dtype: cuda, which runs every call.
  return nearest != nullptr && nearest->cublaslt_faster;
}

}  // namespace epigemm
