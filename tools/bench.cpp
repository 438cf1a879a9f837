// `epigemm bench`: forwards to the benchmark program of bench/ (the one harness every backend is
// measured with, PERF.md), so there is one place that measures and the numbers are never made
// up here. Without it, it says which program to build and exits with code 2.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"

#ifndef EPIGEMM_BENCH_PROGRAM
#define EPIGEMM_BENCH_PROGRAM ""
#endif

namespace epigemm_cli {
namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// The directory of this program, from /proc/self/exe ("" when unknown).
std::string own_directory() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return "";
  path[length] = '\0';
  std::string text(path);
  return text.substr(0, text.rfind('/'));
}

// The path CMake knew at build time, else the usual names in ../bench next to this program.
std::string find_bench_program(std::vector<std::string>* tried) {
  std::vector<std::string> candidates;
  if (std::strlen(EPIGEMM_BENCH_PROGRAM) > 0) candidates.push_back(EPIGEMM_BENCH_PROGRAM);
  const std::string here = own_directory();
  if (!here.empty()) {
    for (const char* name : {"epigemm_bench", "epigemm_bench_gpu", "epigemm_bench_cpu"}) {
      candidates.push_back(here + "/../bench/" + name);
    }
  }
  for (const std::string& c : candidates) {
    tried->push_back(c);
    if (executable(c)) return c;
  }
  return "";
}

}  // namespace

int run_bench(int argc, char** argv, int first) {
  std::vector<std::string> tried;
  const std::string program = find_bench_program(&tried);
  const bool help = first < argc && (std::strcmp(argv[first], "--help") == 0 || std::strcmp(argv[first], "-h") == 0);
  if (program.empty()) {
    if (help) {
      std::printf("usage: epigemm bench [options of the benchmark program]\n\n"
                  "Runs the benchmark program of bench/ with the given options. It is not built yet.\n");
      return 0;
    }
    std::fprintf(stderr, "epigemm bench: no benchmark program of bench/ is built (targets epigemm_bench, epigemm_bench_gpu, epigemm_bench_cpu); looked for:");
    for (const std::string& t : tried) std::fprintf(stderr, " %s", t.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<char*> arguments;
  arguments.push_back(const_cast<char*>(program.c_str()));
  for (int i = first; i < argc; ++i) arguments.push_back(argv[i]);
  arguments.push_back(nullptr);
  std::fflush(stdout);
  execv(program.c_str(), arguments.data());
  std::fprintf(stderr, "epigemm bench: could not run %s: %s\n", program.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace epigemm_cli
