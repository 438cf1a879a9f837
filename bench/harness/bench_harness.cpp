// The benchmark harness (bench_harness.hpp).
#include "harness/bench_harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

namespace epigemm_bench {

void SteadyClockTimer::start() {
  start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
}

double SteadyClockTimer::stop() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  return double(now - start_ns_) * 1e-9;
}

std::vector<std::vector<double>> time_interleaved(
    Timer& timer, const TimingOptions& opts, int sets,
    const std::vector<std::function<void(int)>>& calls) {
  sets = std::max(1, sets);
  // Consecutive calls take consecutive sets, across paths too: call c reads set c % sets. (When
  // every path of round r read set r % sets, the first path of a round read its inputs from
  // memory and the others from the L3 the first had filled: a bias by position in the round of
  // a few % on the CPU, where a set of a benchmark shape is 40-90 MB and the L3 300 MB.)
  int next_set = 0;
  for (const auto& call : calls) {
    for (int w = 0; w < opts.warmup; ++w) call(next_set++ % sets);
  }
  // Each round runs the paths in its own order, shuffled from a fixed seed (the same orders in
  // every run). In a fixed order a path always followed the same path and held the same place in
  // the round; whatever that did to its time (the caches and the threads as the path before left
  // them, a slow phase of the machine that tends to start or end a round) went into every
  // comparison with the same sign. seconds[p][r] stays path p's time in round r, so the paths'
  // times of one round can still be paired.
  std::vector<std::vector<double>> seconds(calls.size());
  std::vector<size_t> order(calls.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 shuffle_engine(20261130u);
  for (int r = 0; r < opts.repetitions; ++r) {
    std::shuffle(order.begin(), order.end(), shuffle_engine);
    for (size_t p : order) {
      const int set = next_set++ % sets;
      timer.start();
      calls[p](set);
      seconds[p].push_back(timer.stop());
    }
  }
  return seconds;
}

std::string make_output_directory(const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (!error && std::filesystem::is_directory(out_dir, error)) return "";
  return "--out " + out_dir + ": cannot create that directory (" +
         (error ? error.message() : std::string("a file of that name exists")) + ")";
}

bool write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  return bool(out);
}

int rotation_sets(double bytes_per_set, double rotation_bytes, int max_sets) {
  if (bytes_per_set <= 0) return 1;
  const int wanted = int(std::ceil(rotation_bytes / bytes_per_set));
  return std::max(1, std::min(wanted, max_sets));
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t h = values.size() / 2;
  return values.size() % 2 ? values[h] : 0.5 * (values[h - 1] + values[h]);
}

void ResultTable::add(const BenchCase& c, bool floor_candidate, const std::vector<double>& seconds,
                      const std::string& note) {
  ResultRow row;
  row.c = c;
  row.floor_candidate = floor_candidate;
  row.seconds = seconds;
  row.median_seconds = median(seconds);
  row.note = note;
  rows_.push_back(row);
}

double ResultTable::floor_of(const ResultRow& row, std::string* floor_path) const {
  double best = 0;
  for (const ResultRow& r : rows_) {
    if (!r.floor_candidate || r.seconds.empty()) continue;
    if (r.c.shape != row.c.shape || r.c.pass != row.c.pass || r.c.dtype != row.c.dtype) continue;
    if (best == 0 || r.median_seconds < best) {
      best = r.median_seconds;
      if (floor_path != nullptr) *floor_path = r.c.path;
    }
  }
  return best;
}

namespace {

std::string format(const char* fmt, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, v);
  return buffer;
}

// min and max of the timed calls, for the spread.
std::pair<double, double> range(const std::vector<double>& v) {
  if (v.empty()) return {0, 0};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {*lo, *hi};
}

}  // namespace

void ResultTable::print(std::FILE* out) const {
  std::fprintf(out, "%-16s %-6s %-14s %-5s %-28s %10s %8s %10s  %s\n", "shape", "pass",
               "epilogue", "dtype", "path", "median ms", "x floor", "min-max ms", "note");
  for (const ResultRow& r : rows_) {
    const double floor = floor_of(r);
    const auto [lo, hi] = range(r.seconds);
    std::fprintf(out, "%-16s %-6s %-14s %-5s %-28s %10.3f %8s %4.1f-%-5.1f  %s\n",
                 r.c.shape.c_str(), r.c.pass.c_str(), r.c.epilogue.c_str(), r.c.dtype.c_str(),
                 r.c.path.c_str(), r.median_seconds * 1e3,
                 floor > 0 ? format("%.3f", r.median_seconds / floor).c_str() : "-", lo * 1e3,
                 hi * 1e3, r.note.c_str());
  }
}

bool ResultTable::write_csv(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return false;
  out << "shape,pass,epilogue,dtype,path,floor_candidate,median_ms,ratio_to_floor,floor_path,"
         "min_ms,max_ms,repetitions,note,times_ms\n";
  for (const ResultRow& r : rows_) {
    std::string floor_path;
    const double floor = floor_of(r, &floor_path);
    const auto [lo, hi] = range(r.seconds);
    out << '"' << r.c.shape << "\"," << r.c.pass << ',' << r.c.epilogue << ',' << r.c.dtype << ','
        << r.c.path << ',' << (r.floor_candidate ? 1 : 0) << ','
        << format("%.4f", r.median_seconds * 1e3) << ','
        << (floor > 0 ? format("%.4f", r.median_seconds / floor) : "") << ',' << floor_path << ','
        << format("%.4f", lo * 1e3) << ',' << format("%.4f", hi * 1e3) << ',' << r.seconds.size()
        << ",\"" << r.note << "\",";
    // Every timed call in call order: the paths of a pass are interleaved, so call t of two rows
    // ran in the same round and their ratio is a paired comparison (scripts/cpu_verdict.py).
    for (size_t t = 0; t < r.seconds.size(); ++t) out << (t ? ";" : "") << format("%.4f", r.seconds[t] * 1e3);
    out << "\n";
  }
  return bool(out);
}

bool ResultTable::write_markdown(const std::string& path, const std::string& header) const {
  std::ofstream out(path);
  if (!out) return false;
  out << header << "\n";
  out << "| shape (tok,in,out) | pass | epilogue | dtype | path | median ms | x floor | min-max ms | note |\n";
  out << "|---|---|---|---|---|---:|---:|---:|---|\n";
  for (const ResultRow& r : rows_) {
    const double floor = floor_of(r);
    const auto [lo, hi] = range(r.seconds);
    out << "| " << r.c.shape << " | " << r.c.pass << " | " << r.c.epilogue << " | " << r.c.dtype
        << " | " << r.c.path << " | " << format("%.2f", r.median_seconds * 1e3) << " | "
        << (floor > 0 ? format("%.3f", r.median_seconds / floor) : "-") << " | "
        << format("%.1f", lo * 1e3) << "-" << format("%.1f", hi * 1e3) << " | " << r.note
        << " |\n";
  }
  return bool(out);
}

}  // namespace epigemm_bench
