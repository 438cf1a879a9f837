// Which cuBLASLt epilogue computes a call's epilogue with our meaning (docs/conventions.md), if
// any. The one mapping from epigemm's epilogue parts to cublasLtEpilogue_t: the cublaslt backend
// runs what it finds and declines the rest with the reason; the GPU benchmark calls cuBLASLt
// directly with the same epilogue.
#pragma once

#include <cublasLt.h>

#include <string>

#include "core/gemm_call.hpp"

namespace epigemm {

struct LtEpilogue {
  bool found = false;
  cublasLtEpilogue_t value = CUBLASLT_EPILOGUE_DEFAULT;
  std::string why_not;  // when not found: names the epilogue and what cuBLASLt lacks
};

// By the call's parts (call.parts()): DEFAULT, BIAS, BGRADB, BGRADA; with gelu_tanh (cuBLASLt's
// GELU is the tanh form) ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS, DACT, DACT_BGRAD; with relu ACT and
// ACT_BIAS only (cuBLASLt's RELU_AUX writes a bit mask, not the pre-activation). Whatever
// remains with the identity (an aux saved or read without an activation) and every other
// activation: not found.
LtEpilogue lt_epilogue(const GemmCall& call);

}  // namespace epigemm
