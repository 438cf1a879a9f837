// epigemm_dispatch_summary: the GPU benchmark's per-shape-set dispatch figures, recomputed from the
// CSV it wrote (bench_gpu.csv, or a merged bench/results/<device>-<date>.csv) by the same code the
// benchmark runs (harness/dispatch_summary.hpp). No GPU needed.
//
//   epigemm_dispatch_summary bench/results/h200-2026-12-04-2000.csv
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/dispatch_summary.hpp"

namespace {

constexpr char kUsage[] = "usage: epigemm_dispatch_summary BENCH_GPU_CSV";

// The fields of one CSV line (a field in double quotes may hold commas: the shapes).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (const char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

double number_or_nan(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return text.empty() || end == text.c_str() || *end != '\0' ? NAN : value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(argc == 2 ? stdout : stderr, "%s\n", kUsage);
    return argc == 2 ? 0 : 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "epigemm_dispatch_summary: cannot read %s\n", argv[1]);
    return 1;
  }
  std::vector<epigemm_bench::CaseRow> rows;
  std::map<std::string, std::string> set_of_shape;
  std::map<std::string, size_t> column;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;  // the runs' header lines
    const std::vector<std::string> fields = csv_fields(line);
    if (column.empty()) {
      for (size_t i = 0; i < fields.size(); ++i) column[fields[i]] = i;
      for (const char* name : {"shape", "pass", "epilogue", "activation", "variant", "ms", "ratio_to_floor", "shape_set"}) {
        if (!column.count(name)) {
          std::fprintf(stderr, "epigemm_dispatch_summary: %s has no column %s\n", argv[1], name);
          return 1;
        }
      }
      continue;
    }
    auto field = [&](const char* name) {
      const size_t i = column[name];
      return i < fields.size() ? fields[i] : std::string();
    };
    rows.push_back(epigemm_bench::CaseRow{field("shape"), field("pass"), field("epilogue"), field("activation"),
                                          field("variant"), number_or_nan(field("ms")),
                                          number_or_nan(field("ratio_to_floor"))});
    if (!field("shape_set").empty()) set_of_shape[field("shape")] = field("shape_set");
  }
  std::printf("%s", epigemm_bench::dispatch_summary_by_shape_set(rows, set_of_shape).c_str());
  return 0;
}
