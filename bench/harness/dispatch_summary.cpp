// The GPU benchmark's dispatch figures (dispatch_summary.hpp).
#include "harness/dispatch_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace epigemm_bench {
namespace {

std::string case_key(const std::string& shape, const std::string& pass, const std::string& epilogue,
                     const std::string& variant) {
  return shape + "|" + pass + "|" + epilogue + "|" + variant;
}

}  // namespace

CaseTable::CaseTable(const std::vector<CaseRow>& rows) {
  for (const CaseRow& r : rows) by_key_[case_key(r.shape, r.pass, r.epilogue, r.variant)] = &r;
}

const CaseRow* CaseTable::find(const std::string& shape, const std::string& pass, const std::string& epilogue,
                               const std::string& variant) const {
  const auto found = by_key_.find(case_key(shape, pass, epilogue, variant));
  return found == by_key_.end() ? nullptr : found->second;
}

CaseTimes CaseTable::times_of(const CaseRow& auto_row) const {
  auto ms_of = [&](const char* variant) {
    const CaseRow* row = find(auto_row.shape, auto_row.pass, auto_row.epilogue, variant);
    return row != nullptr ? row->ms : NAN;
  };
  CaseTimes t{ms_of("cuda"), ms_of("cublaslt"), ms_of("cutlass"), ms_of("lt_fused"), NAN, NAN};
  const bool cublaslt_is_the_contract = auto_row.activation != "gelu_tanh";
  t.best = t.cuda;
  for (const double other : {cublaslt_is_the_contract ? t.cublaslt : NAN, t.cutlass}) {
    if (!std::isnan(other)) t.best = std::min(t.best, other);
  }
  t.best_any = std::isnan(t.cublaslt) ? t.best : std::min(t.best, t.cublaslt);
  return t;
}

std::string format_fixed(double value, int digits) {
  if (std::isnan(value)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string dispatch_summary_by_shape_set(const std::vector<CaseRow>& rows,
                                          const std::map<std::string, std::string>& set_of_shape) {
  struct Tally {
    int cases = 0, large = 0, large_over = 0, small_aligned = 0, small_over = 0, unaligned = 0, over_best = 0,
        over_best_any = 0, lt_cases = 0;
    double log_floor = 0, log_floor_aligned = 0, log_lt = 0, worst_large = 0, worst_small = 0, worst_unaligned = 0,
           worst_best = 0, worst_best_any = 0;
  };
  const CaseTable table(rows);
  std::map<std::string, Tally> tallies;
  for (const CaseRow& r : rows) {
    if (r.variant != "auto" || r.epilogue == "DEFAULT" || std::isnan(r.ratio_to_floor)) continue;
    long long tokens = 0, in = 0, out = 0;
    if (std::sscanf(r.shape.c_str(), "%lld,%lld,%lld", &tokens, &in, &out) != 3) continue;
    const CaseTimes times = table.times_of(r);
    const auto set = set_of_shape.find(r.shape);
    Tally& t = tallies[set == set_of_shape.end() ? std::string("other") : set->second];
    const double x = r.ratio_to_floor;
    ++t.cases;
    t.log_floor += std::log(x);
    // bf16 rows of in and out features: every operand's leading dimension is one of the two.
    const bool aligned = (in * 2) % 16 == 0 && (out * 2) % 16 == 0;
    if (aligned) t.log_floor_aligned += std::log(x);
    if (!aligned) {
      ++t.unaligned;
      t.worst_unaligned = std::max(t.worst_unaligned, x);
    } else if (tokens >= 2048) {
      ++t.large;
      t.large_over += x > 1.05 ? 1 : 0;
      t.worst_large = std::max(t.worst_large, x);
    } else {
      ++t.small_aligned;
      t.small_over += x > 1.10 ? 1 : 0;
      t.worst_small = std::max(t.worst_small, x);
    }
    if (!std::isnan(times.best)) {
      const double over_best = r.ms / times.best, over_best_any = r.ms / times.best_any;
      t.over_best += over_best > 1.03 ? 1 : 0;
      t.worst_best = std::max(t.worst_best, over_best);
      t.over_best_any += over_best_any > 1.03 ? 1 : 0;
      t.worst_best_any = std::max(t.worst_best_any, over_best_any);
    }
    if (!std::isnan(times.lt_fused)) {
      t.log_lt += std::log(times.lt_fused / r.ms);
      ++t.lt_cases;
    }
  }
  const auto fmt = [](double value) { return format_fixed(value); };
  std::ostringstream o;
  o << "Per shape set (targets: auto / plain GEMM geometric mean <= 1.03; at least 2048 tokens: every case <= 1.05; "
       "fewer tokens, rows multiples of 16 bytes: every case <= 1.10; others reported; cuBLASLt fused / auto "
       "geometric mean >= 1.06; auto / best <= 1.03 on every case of the held-out part):\n\n"
    << "| shape set | epilogue cases | auto / plain GEMM, geomean | the same, rows 16-byte multiples | "
       ">= 2048 tokens: over 1.05 (worst) | < 2048 tokens, aligned: over 1.10 (worst) | "
       "rows not 16-byte multiples (worst) | cuBLASLt fused / auto, geomean (cases) | auto / best over 1.03 (worst) | "
       "the same, cuBLASLt's own GELU counted (worst) |\n"
    << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [name, t] : tallies) {
    const int aligned_cases = t.large + t.small_aligned;
    o << "| " << name << " | " << t.cases << " | " << fmt(std::exp(t.log_floor / t.cases)) << " | "
      << fmt(aligned_cases ? std::exp(t.log_floor_aligned / aligned_cases) : NAN) << " | " << t.large_over
      << " of " << t.large << " (" << fmt(t.worst_large) << ") | " << t.small_over << " of " << t.small_aligned << " ("
      << fmt(t.worst_small) << ") | " << t.unaligned << " (" << fmt(t.worst_unaligned) << ") | "
      << fmt(t.lt_cases ? std::exp(t.log_lt / t.lt_cases) : NAN) << " (" << t.lt_cases << ") | " << t.over_best
      << " of " << t.cases << " (" << fmt(t.worst_best) << ") | " << t.over_best_any << " of " << t.cases << " ("
      << fmt(t.worst_best_any) << ") |\n";
  }
  return o.str();
}

}  // namespace epigemm_bench
