// The internal, validated form of one GEMM + epilogue call, in GEMM coordinates
// (docs/conventions.md, "Layout"). Every entry point (description call, classic call, layer
// calls) builds a GemmCall, validate() checks it, the dispatcher hands it to one backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/epilogue_parts.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

// Column-major gemm_rows x gemm_cols view: element (r, c) at data[r + c * ld].
struct Matrix {
  void* data = nullptr;
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  epigemm_memory_t memory = EPIGEMM_MEMORY_HOST;

  int64_t elements() const { return rows * cols; }
};

struct Vector {
  void* data = nullptr;
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  int64_t length = 0;
  epigemm_memory_t memory = EPIGEMM_MEMORY_HOST;
};

// A vector of the C interface as the library holds it.
inline Vector to_vector(const epigemm_vector_t& v) {
  Vector out;
  out.data = v.data;
  out.dtype = v.dtype;
  out.length = v.length;
  out.memory = v.memory;
  return out;
}

// The names the caller knows the operands by, for error messages ("W" rather than "A" when the
// call came through epigemm_linear_fprop).
struct OperandNames {
  const char* a = "A";
  const char* b = "B";
  const char* d = "D";
  const char* bias = "bias";
  const char* aux = "aux";
  const char* bias_grad = "bias_grad";
  // The size query whose answer the call's workspace must hold (INSUFFICIENT_WORKSPACE names it).
  const char* workspace_query = "epigemm_gemm_workspace_size";
};

struct GemmCall {
  epigemm_op_t transa = EPIGEMM_OP_N;
  epigemm_op_t transb = EPIGEMM_OP_N;
  // op(A) is gemm_m x gemm_k, op(B) gemm_k x gemm_n, D gemm_m x gemm_n.
  int64_t gemm_m = 0;
  int64_t gemm_n = 0;
  int64_t gemm_k = 0;
  Matrix a, b, d;
  float alpha = 1.0f;
  float beta = 0.0f;
  // The epilogue as the caller named it; what it is made of is parts() (epilogue_parts.hpp).
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  bool has_bias = false;
  Vector bias;  // in: per-row bias (length gemm_m)
  bool has_aux = false;
  Matrix aux;  // out: the pre-activation (forward); in: a saved one (backward); gemm_m x gemm_n
  bool has_bias_grad = false;
  Vector bias_grad;  // out: rows of g or of op(A) (gemm_m), columns of op(B) (gemm_n)
  bool allow_tf32 = false;
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;  // requested
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // True in a workspace size query (epigemm_gemm_workspace_size, epigemm_linear_workspace_size):
  // a backend whose fastest path needs more workspace than some calls are given (the cutlass
  // backend's copies of A and B) answers as if the workspace were large enough, and declines a call
  // whose workspace is not.
  bool sizing_workspace = false;
  void* stream = nullptr;  // cudaStream_t for device operands
  OperandNames names;

  epigemm_memory_t memory() const { return d.memory; }
  // What the epilogue is made of (valid once validate_enums has accepted the call).
  EpilogueParts parts() const { return epilogue_parts(epilogue, activation); }
  int64_t bias_grad_length() const { return parts().bias_grad_length(gemm_m, gemm_n); }
};

}  // namespace epigemm
