// The smallest C++ use of epigemm: a GEMM-level call with a description object, DGELU_BGRAD in
// column-major coordinates: D (m x n) = (A B) * gelu_tanh'(aux), bias_grad[i] = sum_j D[i, j].
#include <epigemm/epigemm.hpp>

#include <cstdio>
#include <vector>

int main() {
  const int64_t m = 3, n = 2, k = 4;
  std::vector<float> a(m * k, 0.25f), b(k * n, 0.5f), aux(m * n, 0.1f), d(m * n), bias_grad(m);
  const epigemm_matrix_t A{a.data(), EPIGEMM_DTYPE_F32, m, k, m, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B{b.data(), EPIGEMM_DTYPE_F32, k, n, k, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t D{d.data(), EPIGEMM_DTYPE_F32, m, n, m, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t Aux{aux.data(), EPIGEMM_DTYPE_F32, m, n, m, EPIGEMM_MEMORY_HOST};
  const epigemm_vector_t G{bias_grad.data(), EPIGEMM_DTYPE_F32, m, EPIGEMM_MEMORY_HOST};
  try {
    epigemm::Handle handle;
    epigemm::GemmDesc desc;
    desc.epilogue(EPIGEMM_EPILOGUE_DGELU_BGRAD).aux(&Aux).bias_grad(&G);
    std::vector<unsigned char> workspace(epigemm::gemm_workspace_size(handle, desc, A, B, D));
    epigemm::gemm(handle, desc, A, B, D, workspace.data(), workspace.size());
    std::printf("bias_grad = %.6f %.6f %.6f (backend %s)\n", bias_grad[0], bias_grad[1],
                bias_grad[2], epigemm_backend_name(handle.last_backend().first));
  } catch (const epigemm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
