// `epigemm bench`: runs the benchmark program of bench/ for this machine (the one harness every
// backend is measured with), so there is one place that measures and the numbers are never made
// up here: bench/epigemm_bench_gpu where a GPU backend is usable, else bench/epigemm_bench_cpu,
// with a line on stdout saying which and why. Without the program it needs, it says which target
// to build and exits with code 2.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"
#include "epigemm/epigemm.hpp"

#ifndef EPIGEMM_BENCH_GPU_PROGRAM
#define EPIGEMM_BENCH_GPU_PROGRAM ""
#endif
#ifndef EPIGEMM_BENCH_CPU_PROGRAM
#define EPIGEMM_BENCH_CPU_PROGRAM ""
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

// The path CMake knew at build time, else `name` in ../bench next to this program; "" when
// neither is there. Every path looked at is appended to `tried`.
std::string find_program(const char* built_path, const char* name, std::vector<std::string>* tried) {
  std::vector<std::string> candidates;
  if (std::strlen(built_path) > 0) candidates.push_back(built_path);
  const std::string here = own_directory();
  if (!here.empty()) candidates.push_back(here + "/../bench/" + name);
  for (const std::string& c : candidates) {
    tried->push_back(c);
    if (executable(c)) return c;
  }
  return "";
}

}  // namespace

int run_bench(int argc, char** argv, int first) {
  epigemm::Handle handle;
  const bool gpu = handle.usable(EPIGEMM_BACKEND_CUDA) || handle.usable(EPIGEMM_BACKEND_CUBLASLT);
  const char* name = gpu ? "epigemm_bench_gpu" : "epigemm_bench_cpu";
  std::vector<std::string> tried;
  const std::string program =
      find_program(gpu ? EPIGEMM_BENCH_GPU_PROGRAM : EPIGEMM_BENCH_CPU_PROGRAM, name, &tried);
  const bool help = first < argc && (std::strcmp(argv[first], "--help") == 0 || std::strcmp(argv[first], "-h") == 0);
  if (program.empty()) {
    if (help) {
      std::printf("usage: epigemm bench [options of the benchmark program]\n\n"
                  "Runs bench/epigemm_bench_gpu where a GPU is usable and bench/epigemm_bench_cpu\n"
                  "otherwise, with the given options. %s is not built here.\n", name);
      return 0;
    }
    std::fprintf(stderr,
                 "epigemm bench: %s is not built (make test builds it in build/; in another tree configure "
                 "with -DEPIGEMM_BUILD_BENCH=ON and build the CMake target %s%s); looked for:",
                 name, name, gpu ? "" : ", which needs the cpu backend with both OpenBLAS and oneDNN");
    for (const std::string& t : tried) std::fprintf(stderr, " %s", t.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  if (!gpu) {
    const std::string why = epigemm_backend_compiled(handle.get(), EPIGEMM_BACKEND_CUDA) != 0
                                ? "cuda: " + handle.description(EPIGEMM_BACKEND_CUDA)
                                : "this build has no GPU backends";
    // On stdout: a note, not an error (a usage error of the benchmark program stays its one line).
    std::printf("epigemm bench: no GPU backend is usable here (%s); running the CPU benchmark %s\n", why.c_str(),
                program.c_str());
  }
  std::vector<char*> arguments;
  arguments.push_back(const_cast<char*>(program.c_str()));
  for (int i = first; i < argc; ++i) arguments.push_back(argv[i]);
  arguments.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(program.c_str(), arguments.data());
  std::fprintf(stderr, "epigemm bench: could not run %s: %s\n", program.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace epigemm_cli
