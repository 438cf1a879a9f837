// An epilogue as a choice of independent parts (docs/conventions.md, "Epilogues as parts"), and
// the one table that says which parts each public epilogue value is made of. Validation, the
// backends and the tools ask the parts what a call reads and writes; nothing else lists epilogues.
//
//   bias       none, or one value per row i of D (length gemm_m), added to acc
//   activation act and act' (core/epilogue_math.hpp); identity where the epilogue has none
//   aux        none; written: the pre-activation z (forward); read: a saved pre-activation
//   direction  forward: D = act(z), z = acc (+ bias); backward: D = g = acc * act'(aux)
//   bias_grad  none; rows of the backward result g (sum over j, length gemm_m); columns of op(B)
//              (sum over p, length gemm_n: BGRADB); rows of op(A) (sum over p, length gemm_m:
//              BGRADA)
#pragma once

#include <cstdint>
#include <string>

#include "epigemm/epigemm.h"

namespace epigemm {

enum class BiasPart { none, per_row };
enum class AuxPart { none, write_preactivation, read_preactivation };
enum class Direction { forward, backward };
enum class BiasGradPart { none, rows_of_gradient, columns_of_b, rows_of_a };

struct EpilogueParts {
  BiasPart bias = BiasPart::none;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_IDENTITY;
  AuxPart aux = AuxPart::none;
  Direction direction = Direction::forward;
  BiasGradPart bias_grad = BiasGradPart::none;

  bool reads_bias() const { return bias == BiasPart::per_row; }
  bool writes_aux() const { return aux == AuxPart::write_preactivation; }
  bool reads_aux() const { return aux == AuxPart::read_preactivation; }
  bool uses_aux() const { return aux != AuxPart::none; }
  bool writes_bias_grad() const { return bias_grad != BiasGradPart::none; }
  bool backward() const { return direction == Direction::backward; }
  // D is acc itself (DEFAULT, BGRADB, BGRADA): no element-wise work on D.
  bool d_is_acc() const {
    return bias == BiasPart::none && activation == EPIGEMM_ACTIVATION_IDENTITY &&
           aux == AuxPart::none && direction == Direction::forward;
  }
  // The element-wise work depends on acc (everything but D = acc).
  bool computes_on_acc() const { return !d_is_acc(); }
  // Length of bias_grad for a call of these sizes (0 when there is none).
  int64_t bias_grad_length(int64_t gemm_m, int64_t gemm_n) const {
    switch (bias_grad) {
      case BiasGradPart::none: return 0;
      case BiasGradPart::rows_of_gradient:
      case BiasGradPart::rows_of_a: return gemm_m;
      case BiasGradPart::columns_of_b: return gemm_n;
    }
    return 0;
  }
  // "gemm_m" or "gemm_n": the dimension bias_grad runs along.
  const char* bias_grad_dimension() const {
    return bias_grad == BiasGradPart::columns_of_b ? "gemm_n" : "gemm_m";
  }
};

// Whether the value is one of the header's epilogues / activations.
bool epilogue_value_valid(epigemm_epilogue_t epilogue);
bool activation_value_valid(epigemm_activation_t activation);

// The table: the parts of a (valid) epilogue value with the description's activation. The
// activation is kept only where the epilogue has one (ACT*, DACT*); the others are identity.
EpilogueParts epilogue_parts(epigemm_epilogue_t epilogue, epigemm_activation_t activation);

// The public value whose parts these are, with its activation (the inverse of epilogue_parts):
// for names, messages and the tools.
epigemm_epilogue_t epilogue_of_parts(const EpilogueParts& parts);

// "GELU_AUX_BIAS" (gelu_tanh presets keep their names), "ACT_AUX_BIAS(relu)", "BGRADB": for
// messages and benchmark tables.
std::string epilogue_label(epigemm_epilogue_t epilogue, epigemm_activation_t activation);

}  // namespace epigemm
