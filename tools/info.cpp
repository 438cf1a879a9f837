// `epigemm info`: the version, the backends compiled in and usable here, the device, and the
// versions of the libraries underneath.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "epigemm/epigemm.hpp"
#include "gpu_info.hpp"
#include "options.hpp"

namespace epigemm_cli {
namespace {

// The hook for the BLAS under the cpu backend: the version call of whichever BLAS is linked
// into this process, found by name so the tool needs no BLAS headers. Empty when none is.
std::string blas_info() {
  using ConfigCall = const char* (*)();
  struct Candidate {
    const char* symbol;
    const char* library;
  };
  const Candidate candidates[] = {{"openblas_get_config", "OpenBLAS"},
                                  {"bli_info_get_version_str", "BLIS"}};
  for (const Candidate& c : candidates) {
    if (void* symbol = dlsym(RTLD_DEFAULT, c.symbol)) {
      return std::string(c.library) + " (" + reinterpret_cast<ConfigCall>(symbol)() + ")";
    }
  }
  return "";
}

}  // namespace

int run_info(int argc, char** argv, int first) {
  Options options("info", "Prints the version, the backends compiled in and usable here, the device\n"
                          "and the versions of the libraries underneath.");
  if (!options.parse(argc, argv, first)) return 0;

  epigemm::Handle handle;
  std::printf("epigemm %d.%d.%d\n", EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
  std::printf("backends:\n");
  const epigemm_backend_t backends[] = {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU,
                                        EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT};
  for (const epigemm_backend_t b : backends) {
    const bool compiled = epigemm_backend_compiled(handle.get(), b) != 0;
    const bool usable = handle.usable(b);
    std::printf("  %-10s %s\n", epigemm_backend_name(b),
                !compiled ? "not compiled in"
                          : usable ? "compiled in, usable here" : "compiled in, not usable here (it needs a GPU)");
  }
  std::printf("devices and libraries:\n");
  for (const auto& entry : gpu_info()) std::printf("  %-13s %s\n", entry.first.c_str(), entry.second.c_str());
  const std::string blas = blas_info();
  std::printf("  %-13s %s\n", "BLAS", blas.empty() ? "none linked into this program" : blas.c_str());
  return 0;
}

}  // namespace epigemm_cli
