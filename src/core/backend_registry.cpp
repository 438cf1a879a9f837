// Every backend compiled into this build, one line each. Adding a backend: its folder under
// src/backends/, its sources in CMakeLists.txt, and one line here.
#include "backends/reference/reference_backend.hpp"
#include "core/backend.hpp"

namespace epigemm {

std::vector<std::unique_ptr<Backend>> create_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(create_reference_backend());
  return backends;
}

}  // namespace epigemm
