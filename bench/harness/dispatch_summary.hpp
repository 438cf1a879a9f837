// The GPU benchmark's dispatch figures, host code shared by epigemm_bench_gpu (which computes them
// after a run) and epigemm_dispatch_summary (which recomputes them from a committed CSV, so that the
// figures can be checked, and compared with scripts/merge_bench_runs.py, without a GPU).
//   CaseRow       one timed path of one epilogue case (a row of the benchmark's CSV)
//   CaseTable     the rows by (shape, pass, epilogue, variant); times_of() gives an `auto` row's
//                 case: each backend's time and the fastest of them
//   dispatch_summary_by_shape_set  the acceptance figures per shape set, as a markdown table
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace epigemm_bench {

struct CaseRow {
  std::string shape;       // "tokens,in,out" of the layer
  std::string pass;        // fprop, dgrad, wgrad
  std::string epilogue;    // "DACT_BGRAD(silu)", "BIAS", ...; "-" for a pass's plain GEMM rows
  std::string activation;  // "gelu_tanh", "identity", ...
  std::string variant;     // floor, cuda, cublaslt, cutlass, lt_fused, auto, ...
  double ms = NAN;
  double ratio_to_floor = NAN;
};

// The times of one epilogue case's paths (NAN where a path did not run), and the fastest of
// epigemm's three GPU backends. `best` counts only the paths that compute the contract's result,
// those auto may run: the cublaslt backend's gelu_tanh epilogues are cuBLASLt's own GELU
// (docs/dispatch.md, "The decision table"), which `best_any` counts too. Both start from cuda's
// time (NAN without it).
struct CaseTimes {
  double cuda, cublaslt, cutlass, lt_fused, best, best_any;
};

class CaseTable {
 public:
  explicit CaseTable(const std::vector<CaseRow>& rows);
  // The row of (shape, pass, epilogue, variant), or nullptr.
  const CaseRow* find(const std::string& shape, const std::string& pass, const std::string& epilogue,
                      const std::string& variant) const;
  CaseTimes times_of(const CaseRow& auto_row) const;

 private:
  std::map<std::string, const CaseRow*> by_key_;
};

// "%.{digits}f", or "n/a" for NAN.
std::string format_fixed(double value, int digits = 3);

// The dispatcher's acceptance figures per shape set (public, derive, heldout, other), over every
// epilogue case but DEFAULT: `auto` over the plain GEMM of its own loop (geometric mean, over all
// cases and over those whose rows are multiples of 16 bytes: where they are not, cuBLAS's plain
// GEMM itself is several times slower than on the aligned shapes beside them, and those cases say
// how much faster than cuBLAS such a layer runs, not what its epilogue costs; cases of at least
// 2048 tokens over 1.05; smaller ones whose rows are multiples of 16 bytes over 1.10; the others
// reported), over the fastest backend (over 1.03; of those that compute the contract's result, and
// with cuBLASLt's own GELU counted), and cuBLASLt's fused epilogue over auto (geometric mean where
// cuBLASLt has the epilogue). A markdown table, one row per set, after a line with the targets.
// set_of_shape: the shape set of each shape ("other" where a shape has none).
std::string dispatch_summary_by_shape_set(const std::vector<CaseRow>& rows,
                                          const std::map<std::string, std::string>& set_of_shape);

}  // namespace epigemm_bench
