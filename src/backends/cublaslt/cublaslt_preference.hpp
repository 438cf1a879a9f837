// Whether AUTO prefers cuBLASLt's fused epilogue over the `cuda` backend (cuBLAS + epigemm's
// kernels) for a call. The answer comes from a decision table measured on the GPU and committed
// with the data it came from (docs/dispatch.md); it is a pure function of the call's shape,
// dtype, epilogue and activation, so the same call always goes the same way.
#pragma once

#include "core/gemm_call.hpp"

namespace epigemm {

bool cublaslt_preferred(const GemmCall& call);

}  // namespace epigemm
