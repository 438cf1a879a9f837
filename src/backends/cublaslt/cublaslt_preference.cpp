// The decision table behind cublaslt_preferred(). Rows come from scripts/make_dispatch_table.py
// run over a benchmark CSV (bench/results/); see docs/dispatch.md for the data and the rule.
#include "backends/cublaslt/cublaslt_preference.hpp"

#include <cstdint>

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

}  // namespace

bool cublaslt_preferred(const GemmCall& call) {
  // The call's epilogue as its parts name it, so that ACT(identity) is looked up as DEFAULT,
  // ACT_BIAS(identity) as BIAS, and an epilogue without an activation whatever the description's
  // activation setting.
  const EpilogueParts parts = call.parts();
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
