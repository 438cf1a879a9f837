// Host operands of one GEMM-level call, and an independent naive computation of it written
// from docs/conventions.md (sections 1-2) in long double. `epigemm check` compares the reference
// backend with it when the reference is the only backend usable here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epigemm/epigemm.h"
#include "low_precision.hpp"

namespace epigemm_cli {

// A column-major matrix in host memory: element (r, c) at r + c * ld.
struct HostMatrix {
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  int64_t rows = 0, cols = 0, ld = 1;
  std::vector<unsigned char> bytes;

  HostMatrix() = default;
  HostMatrix(epigemm_dtype_t t, int64_t r, int64_t c, int64_t l)
      : dtype(t), rows(r), cols(c), ld(l), bytes(size_t(l * (c > 0 ? c : 1)) * dtype_bytes(t)) {}
  int64_t elements() const { return ld * (cols > 0 ? cols : 1); }  // padding included
  float at(int64_t r, int64_t c) const { return load_element(bytes.data(), dtype, r + c * ld); }
  void set(int64_t r, int64_t c, float v) { store_element(bytes.data(), dtype, r + c * ld, v); }
};

struct HostVector {
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  int64_t length = 0;
  std::vector<unsigned char> bytes;

  HostVector() = default;
  HostVector(epigemm_dtype_t t, int64_t n) : dtype(t), length(n), bytes(size_t(n > 0 ? n : 1) * dtype_bytes(t)) {}
  float at(int64_t i) const { return load_element(bytes.data(), dtype, i); }
  void set(int64_t i, float v) { store_element(bytes.data(), dtype, i, v); }
};

// What an epilogue reads and writes besides A, B and D (docs/conventions.md, "Epilogues"), the
// tool's own table. bias_grad_along_n: BGRADB's bias gradient has length gemm_n (the others' gemm_m).
struct EpilogueUse {
  bool reads_bias = false;
  bool writes_aux = false;  // the pre-activation (ACT_AUX, ACT_AUX_BIAS)
  bool reads_aux = false;   // a saved pre-activation (DACT, DACT_BGRAD)
  bool writes_bias_grad = false;
  bool has_activation = false;
  bool bias_grad_along_n = false;
  const char* name = "";  // ACT_AUX for the value GELU_AUX also has
};
EpilogueUse epilogue_use(epigemm_epilogue_t e);

// One call: D (gemm_m x gemm_n) = epilogue(alpha op(A) op(B) + beta D_old).
struct GemmProblem {
  epigemm_op_t transa = EPIGEMM_OP_N, transb = EPIGEMM_OP_N;
  float alpha = 1.0f, beta = 0.0f;
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;  // of the ACT* / DACT* epilogues
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  HostMatrix a, b;
  HostMatrix d;          // D_old (read when beta != 0); its dtype, shape and ld are D's
  HostVector bias;       // BIAS, ACT_BIAS, ACT_AUX_BIAS
  HostMatrix aux;        // input of DACT / DACT_BGRAD; dtype, shape and ld of the output otherwise
  HostVector bias_grad;  // dtype and length of the output of DACT_BGRAD / BGRADB / BGRADA
  EpilogueUse use() const { return epilogue_use(epilogue); }
};

// The outputs a call writes: D always, aux for ACT_AUX / ACT_AUX_BIAS, bias_grad for
// DACT_BGRAD / BGRADB / BGRADA. Unused members stay empty.
struct GemmOutputs {
  HostMatrix d, aux;
  HostVector bias_grad;
};

// "ACT_AUX_BIAS(relu)" for an epilogue with an activation, "BGRADB" for one without.
std::string epilogue_label(epigemm_epilogue_t e, epigemm_activation_t activation);

GemmOutputs naive_gemm(const GemmProblem& problem);

}  // namespace epigemm_cli
