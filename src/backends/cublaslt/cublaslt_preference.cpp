// The decision table behind cublaslt_preferred(). Rows come from scripts/make_dispatch_table.py
// run over a benchmark CSV (bench/results/); see docs/dispatch.md for the data and the rule.
#include "backends/cublaslt/cublaslt_preference.hpp"

#include <cstdint>

namespace epigemm {
namespace {

// One measured case: epilogue, input dtype, and the GEMM size it was measured at. A call is
// matched to the measured case of its epilogue and dtype whose size is nearest: the smallest product of the per-dimension ratios (larger / smaller).
struct MeasuredCase {
  epigemm_epilogue_t epilogue;
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
  const MeasuredCase* nearest = nullptr;
  double nearest_distance = 0.0;
  for (const MeasuredCase& c : kMeasuredCases) {
    if (c.epilogue != call.epilogue || c.dtype != call.a.dtype) continue;
    const double distance = size_mismatch(c, call);
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &c;
      nearest_distance = distance;
    }
  }
  return nearest != nullptr && nearest->cublaslt_faster;
}

}  // namespace epigemm
