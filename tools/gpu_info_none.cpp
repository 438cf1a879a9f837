#include "gpu_info.hpp"

namespace epigemm_cli {

std::vector<std::pair<std::string, std::string>> gpu_info() {
  return {{"device", "no GPU support in this build (EPIGEMM_WITH_CUDA=OFF, or no CUDA compiler at configure time)"}};
}

}  // namespace epigemm_cli
