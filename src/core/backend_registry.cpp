// Every backend compiled into this build, one line each. Adding a backend: its folder under
// src/backends/ (whose CMakeLists.txt defines EPIGEMM_HAVE_<NAME>_BACKEND), and one line here.
#include "backends/reference/reference_backend.hpp"
#include "core/backend.hpp"

namespace epigemm {

#ifdef EPIGEMM_HAVE_CPU_BACKEND
std::unique_ptr<Backend> create_cpu_backend();
#endif
#ifdef EPIGEMM_HAVE_CUDA_BACKEND
std::unique_ptr<Backend> create_cuda_backend();
#endif
#ifdef EPIGEMM_HAVE_CUBLASLT_BACKEND
std::unique_ptr<Backend> create_cublaslt_backend();
#endif
#ifdef EPIGEMM_HAVE_CUTLASS_BACKEND
std::unique_ptr<Backend> create_cutlass_backend();
#endif

std::vector<std::unique_ptr<Backend>> create_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(create_reference_backend());
#ifdef EPIGEMM_HAVE_CPU_BACKEND
  backends.push_back(create_cpu_backend());
#endif
#ifdef EPIGEMM_HAVE_CUDA_BACKEND
  backends.push_back(create_cuda_backend());
#endif
#ifdef EPIGEMM_HAVE_CUBLASLT_BACKEND
  backends.push_back(create_cublaslt_backend());
#endif
#ifdef EPIGEMM_HAVE_CUTLASS_BACKEND
  backends.push_back(create_cutlass_backend());
#endif
  return backends;
}

}  // namespace epigemm
