// The `cuda` backend: the GEMM by cuBLAS (cublasGemmEx, fp32 compute), then epigemm's own
// epilogue kernels (epilogue_kernels.hpp). Design and measurements: docs/dev/cuda_backend.md.
#pragma once

#include <memory>

#include "core/backend.hpp"

namespace epigemm {

// Choices the benchmark measures against each other; the defaults are what the library uses.
struct CudaBackendOptions {
  // When D is fp16/bf16 and the epilogue computes on acc (everything but DEFAULT, BGRADB, BGRADA
  // and the epilogues that reduce to them), or the GEMM adds beta D_old (D_old widened into it
  // first: cuBLAS rounds alpha acc to a 16-bit C's dtype before it adds beta C), the GEMM writes
  // acc in fp32 into the workspace and one kernel rounds the result into D, so the epilogue sees
  // the unrounded fp32 value the contract speaks of. false: the GEMM writes D and the epilogue
  // works in place on the rounded value; fewer bytes, not the contract's numerics (one extra
  // rounding). Kept only to measure the cost.
  bool fp32_intermediate = true;
  // BGRADB and BGRADA: run the sums of the operand on a second stream, concurrently with the
  // GEMM, joined back to the caller's stream with events. Measured faster than running them on
  // the caller's stream on all five public shapes on the H200 (BGRADB; docs/dev/cuda_backend.md).
  bool concurrent_operand_sums = true;
  // BIAS with beta = 0 and an fp32 D: write the bias into every column of D, then let the GEMM
  // add acc with beta = 1 (in fp32, rounded once: the contract's numerics; with a 16-bit D cuBLAS
  // would round alpha acc first, so there the fp32 intermediate runs). The epilogue then costs one
  // write of D instead of a GEMM into an fp32 intermediate plus a read of it and a write of D.
  // false: the fp32 intermediate and the BIAS kernel, as for the other epilogues.
  bool bias_through_gemm_beta = true;
};

std::unique_ptr<Backend> create_cuda_backend();
std::unique_ptr<Backend> create_cuda_backend(const CudaBackendOptions& options);

}  // namespace epigemm
