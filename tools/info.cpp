// `epigemm info`: the version, each backend (compiled in, usable here, and what it runs on, as
// the library describes it), the devices and the CUDA library versions.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "epigemm/epigemm.hpp"
#include "gpu_info.hpp"
#include "options.hpp"

namespace epigemm_cli {

int run_info(int argc, char** argv, int first) {
  Options options("info", "Prints the version, the backends compiled in and usable here with what\n"
                          "each runs on (GEMM engine and version, kernel build, device), and the\n"
                          "devices and CUDA libraries this program sees.");
  if (!options.parse(argc, argv, first)) return 0;

  epigemm::Handle handle;
  print_version(stdout);
  std::printf("backends:\n");
  const epigemm_backend_t backends[] = {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU,
                                        EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT,
                                        EPIGEMM_BACKEND_CUTLASS};
  for (const epigemm_backend_t b : backends) {
    const bool compiled = epigemm_backend_compiled(handle.get(), b) != 0;
    const bool usable = handle.usable(b);
    std::printf("  %-10s %s\n", epigemm_backend_name(b),
                !compiled ? "not compiled in" : usable ? "compiled in, usable here" : "compiled in, not usable here");
    // The library's own account: the engine and kernels a call runs, or why it cannot run.
    if (compiled) std::printf("  %-10s %s\n", "", handle.description(b).c_str());
  }
  std::printf("devices and libraries:\n");
  for (const auto& entry : gpu_info()) std::printf("  %-13s %s\n", entry.first.c_str(), entry.second.c_str());
  return 0;
}

}  // namespace epigemm_cli
