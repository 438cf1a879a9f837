// The `cuda` backend: the GEMM by cuBLAS (cublasGemmEx, fp32 compute), then epigemm's own
// epilogue kernels (epilogue_kernels.hpp). Design and measurements: docs/cuda_backend.md.
#pragma once

#include <memory>

#include "core/backend.hpp"

namespace epigemm {

// Choices the benchmark measures against each other; the defaults are what the library uses.
struct CudaBackendOptions {
  // When D is fp16/bf16 and the epilogue computes on acc (BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU,
  // DGELU_BGRAD), the GEMM writes acc in fp32 into the workspace and the epilogue reads it, so
  // the epilogue sees the unrounded fp32 value the contract speaks of. false: the GEMM writes D
  // and the epilogue works in place on the rounded value; fewer bytes, not the contract's
  // numerics (one extra rounding before the epilogue). Kept only to measure the cost.
  bool fp32_intermediate = true;
  // BGRADB: run the sum of op(B) on a second stream, concurrently with the GEMM, joined back to
  // the caller's stream with events. Measured faster than running it after the GEMM on all five
  // public shapes on the H200 (docs/cuda_backend.md).
  bool concurrent_bgradb = true;
};

std::unique_ptr<Backend> create_cuda_backend();
std::unique_ptr<Backend> create_cuda_backend(const CudaBackendOptions& options);

}  // namespace epigemm
