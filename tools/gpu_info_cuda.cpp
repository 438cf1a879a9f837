// GPU queries through the CUDA runtime and the cuBLAS / cuBLASLt version calls. Every call is
// allowed to fail (no GPU, no driver): the failure is reported as text, never thrown.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "gpu_info.hpp"

namespace epigemm_cli {
namespace {

// 13000 -> "13.0"
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> gpu_info() {
  std::vector<std::pair<std::string, std::string>> info;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    info.emplace_back("device", std::string("no GPU (cudaGetDeviceCount: ") +
                                    (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")");
  } else {
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp p;
      if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
      char text[512];
      std::snprintf(text, sizeof text, "%s, compute capability %d.%d, %.1f GiB, %d SMs", p.name,
                    p.major, p.minor, double(p.totalGlobalMem) / double(1ull << 30), p.multiProcessorCount);
      info.emplace_back("device " + std::to_string(d), text);
    }
  }
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  info.emplace_back("CUDA runtime", cuda_version_text(runtime));
  info.emplace_back("CUDA driver", driver > 0 ? cuda_version_text(driver) : "none (no driver installed)");
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    info.emplace_back("cuBLAS", std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
  }
  const size_t lt = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  info.emplace_back("cuBLASLt", std::to_string(lt / 10000) + "." + std::to_string(lt % 10000 / 100) +
                                    "." + std::to_string(lt % 100));
  return info;
}

}  // namespace epigemm_cli
