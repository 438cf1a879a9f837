// What `epigemm info` reports about the GPU and the CUDA libraries: gpu_info_cuda.cpp when the
// program is built with CUDA, gpu_info_none.cpp otherwise.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace epigemm_cli {

// ("device", "NVIDIA H200, compute capability 9.0, 139.8 GiB"), ("CUDA runtime", "13.0"), ...
std::vector<std::pair<std::string, std::string>> gpu_info();

}  // namespace epigemm_cli
