// The fuzz target's validity oracle: what docs/conventions.md says a call must answer, written
// from that page alone (it shares no code with src/core/validate.cpp or layer_mapping.cpp).
// Given the arguments of one call it predicts whether the library refuses it (INVALID_VALUE),
// whether no backend can run it (NOT_SUPPORTED), or whether it runs; and, for a call that runs,
// the GEMM it means (the layer and classic calls mapped to GEMM coordinates by the table of
// conventions.md §1 and §2), so that the fuzz target can recompute it on the reference backend.
// Which operands an epilogue takes comes from the parts table of conventions.md §2 ("Epilogues
// as parts"), restated here once (epilogue_parts).
#pragma once

#include <cstdint>
#include <string>

#include "epigemm/epigemm.h"

namespace epigemm_fuzz {

// The GEMM a call means, in GEMM coordinates (docs/conventions.md §1): pointers as the caller gave
// them, `has_*` for the operands the epilogue receives.
struct GemmMeaning {
  int transa = 0, transb = 0;  // raw values as passed
  epigemm_matrix_t a{}, b{}, d{}, aux{};
  epigemm_vector_t bias{}, bias_grad{};
  bool has_bias = false, has_aux = false, has_bias_grad = false;
  int epilogue = 0;  // raw value as passed (or derived)
  // Raw value as passed, or derived (the classic call, epigemm_linear_fprop / dgrad); a
  // description's default is gelu_tanh (§2).
  int activation = EPIGEMM_ACTIVATION_GELU_TANH;
  float alpha = 1.0f, beta = 0.0f;
  int backend = 0;  // raw value as passed (or the context's default)
  const void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Filled by check_gemm for a call that is valid:
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
};

enum class Verdict {
  invalid,        // INVALID_VALUE
  not_supported,  // NOT_SUPPORTED: no usable backend for it (under auto or by name)
  runs,           // SUCCESS, unless the workspace is too small (INSUFFICIENT_WORKSPACE); a
                  // non-reference backend asked by name may still decline it (NOT_SUPPORTED)
};

struct Prediction {
  Verdict verdict = Verdict::invalid;
  std::string why;  // the rule that decided, for the report of a mismatch
};

// The backends usable here (epigemm_backend_usable: a fact of the machine, not of validity).
struct Machine {
  bool usable[6] = {true, true, false, false, false, false};  // indexed by epigemm_backend_t
};

// The parts of an epilogue (conventions.md §2, "Epilogues as parts"): which operands it reads
// and writes. Values outside 0..9 have no parts (the call is refused for the value itself).
enum class AuxPart { none, written, read };  // written: the pre-activation z; read: a saved one
enum class BiasGradPart {
  none,
  rows_of_g,        // Σ_j g[i,j], length gemm_m (DACT_BGRAD)
  columns_of_op_b,  // Σ_p op(B)[p,j], length gemm_n (BGRADB)
  rows_of_op_a,     // Σ_p op(A)[i,p], length gemm_m (BGRADA)
};
struct EpilogueParts {
  bool bias = false;        // per row i, length gemm_m, added to acc
  bool activation = false;  // act (forward) or act' (backward); identity for the others
  AuxPart aux = AuxPart::none;
  bool backward = false;    // D = g = acc · act'(aux) rather than D = act(z)
  BiasGradPart bias_grad = BiasGradPart::none;
};
EpilogueParts epilogue_parts(int epilogue);

// epigemm_gemm / epigemm_gemm_workspace_size after the handle and NULL-descriptor checks, and the
// classic and layer calls once mapped: every rule of conventions.md §1-§4 and §6, the activation's
// range (§2, "Activations": refused whatever the epilogue) included. Fills gemm_m/n/k.
Prediction check_gemm(GemmMeaning* call, const Machine& machine);

// epigemm_classic_gemm's meaning (conventions.md §2, "The classic call"): the epilogue from which
// of bias / pre_gelu_out are given (non-NULL with non-NULL data) and grad; accumulate is beta = 1;
// the activation is gelu_tanh.
// A, B, D are non-NULL here.
GemmMeaning classic_meaning(const epigemm_matrix_t& A, const epigemm_matrix_t& B,
                            const epigemm_matrix_t& D, const epigemm_vector_t* bias,
                            const epigemm_matrix_t* pre_gelu_out, int transa, int transb, int grad,
                            int accumulate, int backend);

// The layer calls (conventions.md §1 table, §2 "The layer calls"). Tensors may be NULL; returns
// invalid for what the layer rules refuse, else fills *call with the GEMM and defers to check_gemm.
//   fprop: epigemm_linear_fprop, or epigemm_linear_fprop_act with with_activation
//   dgrad: epigemm_linear_dgrad, or epigemm_linear_dgrad_act with with_activation (pre_act required)
//   wgrad: epigemm_linear_wgrad
enum class Pass { fprop, dgrad, wgrad };
struct LayerArgs {
  Pass pass = Pass::fprop;
  bool with_activation = false;  // the _act call, taking `activation` (any int)
  int activation = EPIGEMM_ACTIVATION_IDENTITY;
  const epigemm_tensor_t* x = nullptr;   // fprop, wgrad
  const epigemm_tensor_t* w = nullptr;   // fprop, dgrad
  const epigemm_tensor_t* dy = nullptr;  // dgrad, wgrad
  const epigemm_tensor_t* out = nullptr; // Y (fprop), dX (dgrad), dW (wgrad)
  const epigemm_tensor_t* pre_act = nullptr;   // pre_gelu of the plain calls, pre_act of the _act ones
  const epigemm_vector_t* bias = nullptr;       // fprop
  const epigemm_vector_t* bias_grad = nullptr;  // dgrad, wgrad
  int accumulate = 0;                           // wgrad
  int backend = 0;
  const void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
Prediction check_layer(const LayerArgs& args, const Machine& machine, GemmMeaning* call);

// epigemm_linear_workspace_size with a non-NULL context and out pointer.
Prediction check_linear_workspace_size(int64_t tokens, int64_t in_features, int64_t out_features,
                                       int dtype, int memory, int backend, const Machine& machine);

// Bytes an operand spans from its first element (0 when it has none); -1 when that is more than
// 2^60 (conventions.md §4: refused).
int64_t span_bytes(const epigemm_matrix_t& m);
int64_t span_bytes(const epigemm_vector_t& v);

// Which operands of a call that runs are read or written (the rest must not be touched at all:
// a call with nothing to compute reads no input).
struct Access {
  bool a = false, b = false, d = false, bias = false, aux = false, bias_grad = false;
};
Access accessed(const GemmMeaning& call);

// Shorthands over epilogue_parts.
bool writes_aux(int epilogue);
bool reads_aux(int epilogue);
bool reads_bias(int epilogue);
bool writes_bias_grad(int epilogue);
// gemm_n for BGRADB, gemm_m for the other epilogues with a bias gradient.
int64_t bias_grad_length(int epilogue, int64_t gemm_m, int64_t gemm_n);

}  // namespace epigemm_fuzz
