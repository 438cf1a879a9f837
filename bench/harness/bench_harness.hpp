// The benchmark harness shared by epigemm's benchmark programs (CPU now, GPU backends later):
//   Timer        what a repetition's time is measured with: SteadyClockTimer on the host; a GPU
//                program supplies one built on CUDA events (start records, stop records, waits
//                and returns the elapsed time)
//   time_interleaved  warm-up calls (not timed), then N timed calls of each of several paths,
//                one repetition of each in turn, rotating over input sets
//   ResultTable  one row per (shape, pass, epilogue, dtype, path): the median of the timed
//                calls and its ratio to the math floor of its (shape, pass, dtype) group, the
//                fastest row marked as a floor candidate, measured in the same run; printed as a
//                table and written as CSV and Markdown
// No row is ever dropped: a path that loses is in the table with its ratio.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace epigemm_bench {

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  // Seconds since start(), once the timed work is complete.
  virtual double stop() = 0;
};

class SteadyClockTimer final : public Timer {
 public:
  void start() override;
  double stop() override;

 private:
  int64_t start_ns_ = 0;
};

struct TimingOptions {
  int warmup = 2;       // untimed calls before the timed ones
  int repetitions = 7;  // timed calls; the median is reported
};

// Calls each path opts.warmup times, then opts.repetitions times under timer, interleaved: every
// path's warm-up calls first, then repetition r times every path once, in an order shuffled anew
// for each round. On a shared machine a load spike then lands on all paths of a comparison alike
// instead of on whichever path ran during it. The sets rotate with every call (not every round),
// so no call finds its inputs left in cache by the call before it. Returns one vector of times
// per path, in seconds.
std::vector<std::vector<double>> time_interleaved(
    Timer& timer, const TimingOptions& opts, int sets,
    const std::vector<std::function<void(int set)>>& calls);

// Input sets to rotate over so that sets x bytes_per_set is at least rotation_bytes (at most
// max_sets).
int rotation_sets(double bytes_per_set, double rotation_bytes, int max_sets);

double median(std::vector<double> values);

// Creates the output directory (and its parents) before a run, so that a run of minutes cannot
// end unable to write its tables. Returns "" when out_dir is a directory afterwards, else a
// message naming it and the reason.
std::string make_output_directory(const std::string& out_dir);

// Writes text to path; false if the file could not be written in full.
bool write_text_file(const std::string& path, const std::string& text);

struct BenchCase {
  std::string shape;     // "tokens,in,out" of the layer
  std::string pass;      // fprop, dgrad, wgrad
  std::string epilogue;  // DEFAULT, GELU_AUX_BIAS, ...
  std::string dtype;     // f32, bf16, ...
  std::string path;      // what ran: "cpu", "openblas-sgemm", "onednn-matmul-fused", ...
};

struct ResultRow {
  BenchCase c;
  bool floor_candidate = false;  // a plain GEMM with no epilogue: the math floor is the fastest
  std::vector<double> seconds;
  double median_seconds = 0;
  std::string note;  // e.g. "no aux written", "FAILED check: ..."
};

class ResultTable {
 public:
  void add(const BenchCase& c, bool floor_candidate, const std::vector<double>& seconds,
           const std::string& note = "");
  // The math floor of a row's (shape, pass, dtype) group: the smallest median among its floor
  // candidates (0 when it has none), and that candidate's path.
  double floor_of(const ResultRow& row, std::string* floor_path = nullptr) const;
  const std::vector<ResultRow>& rows() const { return rows_; }

  void print(std::FILE* out) const;
  bool write_csv(const std::string& path) const;
  // header: Markdown written above the table (date, machine, load, method).
  bool write_markdown(const std::string& path, const std::string& header) const;

 private:
  std::vector<ResultRow> rows_;
};

}  // namespace epigemm_bench
