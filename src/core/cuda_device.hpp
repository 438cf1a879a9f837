// The CUDA device the calling thread uses, as the GPU backends find and describe it, or why
// there is none. Host code; included by the CUDA backends only (they link the CUDA runtime).
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace epigemm {

struct CudaDevice {
  bool present = false;
  // Why not present: "no CUDA device (cudaGetDeviceCount: <error or 0 devices>)", or the
  // cudaGetDevice / cudaGetDeviceProperties error.
  std::string why_absent;
  int id = 0;
  cudaDeviceProp properties{};

  // "device 0: NVIDIA H200, compute capability 9.0"
  std::string text() const {
    return "device " + std::to_string(id) + ": " + properties.name + ", compute capability " +
           std::to_string(properties.major) + "." + std::to_string(properties.minor);
  }
};

// Asks the runtime once; a failed query's sticky error is cleared, so that the next CUDA call
// (another backend's, the caller's) does not report it.
inline CudaDevice current_cuda_device() {
  CudaDevice device;
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    device.why_absent = std::string("no CUDA device (cudaGetDeviceCount: ") +
                        (counted != cudaSuccess ? cudaGetErrorString(counted) : "0 devices") + ")";
    cudaGetLastError();
    return device;
  }
  cudaError_t err = cudaGetDevice(&device.id);
  if (err == cudaSuccess) err = cudaGetDeviceProperties(&device.properties, device.id);
  if (err != cudaSuccess) {
    device.why_absent = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return device;
  }
  device.present = true;
  return device;
}

}  // namespace epigemm
