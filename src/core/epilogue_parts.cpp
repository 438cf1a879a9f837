// The table of epilogue_parts.hpp: each public epilogue value as a choice of parts.
#include "core/epilogue_parts.hpp"

#include "core/epilogue_math.hpp"
#include "core/names.hpp"

namespace epigemm {

bool epilogue_value_valid(epigemm_epilogue_t epilogue) {
  return int(epilogue) >= int(EPIGEMM_EPILOGUE_DEFAULT) && int(epilogue) <= int(EPIGEMM_EPILOGUE_ACT_BIAS);
}

bool activation_value_valid(epigemm_activation_t activation) {
#define EPIGEMM_ACTIVATION_IS(value, functor, name) || activation == value
  return false EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_ACTIVATION_IS);
#undef EPIGEMM_ACTIVATION_IS
}

EpilogueParts epilogue_parts(epigemm_epilogue_t epilogue, epigemm_activation_t activation) {
  using B = BiasPart;
  using X = AuxPart;
  using G = BiasGradPart;
  constexpr Direction fwd = Direction::forward, bwd = Direction::backward;
  constexpr epigemm_activation_t none = EPIGEMM_ACTIVATION_IDENTITY;
  //                                      bias          activation  aux                     direction  bias gradient
  switch (epilogue) {
    case EPIGEMM_EPILOGUE_DEFAULT:       return {B::none,    none,       X::none,                fwd, G::none};
    case EPIGEMM_EPILOGUE_BIAS:          return {B::per_row, none,       X::none,                fwd, G::none};
    case EPIGEMM_EPILOGUE_ACT:           return {B::none,    activation, X::none,                fwd, G::none};
    case EPIGEMM_EPILOGUE_ACT_BIAS:      return {B::per_row, activation, X::none,                fwd, G::none};
    case EPIGEMM_EPILOGUE_ACT_AUX:       return {B::none,    activation, X::write_preactivation, fwd, G::none};
    case EPIGEMM_EPILOGUE_ACT_AUX_BIAS:  return {B::per_row, activation, X::write_preactivation, fwd, G::none};
    case EPIGEMM_EPILOGUE_DACT:          return {B::none,    activation, X::read_preactivation,  bwd, G::none};
    case EPIGEMM_EPILOGUE_DACT_BGRAD:    return {B::none,    activation, X::read_preactivation,  bwd, G::rows_of_gradient};
    case EPIGEMM_EPILOGUE_BGRADB:        return {B::none,    none,       X::none,                fwd, G::columns_of_b};
    case EPIGEMM_EPILOGUE_BGRADA:        return {B::none,    none,       X::none,                fwd, G::rows_of_a};
  }
  return EpilogueParts{};  // not reached: validation rejects values outside the header's
}

epigemm_epilogue_t epilogue_of_parts(const EpilogueParts& parts) {
  const bool bias = parts.reads_bias();
  switch (parts.bias_grad) {
    case BiasGradPart::columns_of_b: return EPIGEMM_EPILOGUE_BGRADB;
    case BiasGradPart::rows_of_a: return EPIGEMM_EPILOGUE_BGRADA;
    case BiasGradPart::rows_of_gradient: return EPIGEMM_EPILOGUE_DACT_BGRAD;
    case BiasGradPart::none: break;
  }
  switch (parts.aux) {
    case AuxPart::read_preactivation: return EPIGEMM_EPILOGUE_DACT;
    case AuxPart::write_preactivation: return bias ? EPIGEMM_EPILOGUE_ACT_AUX_BIAS : EPIGEMM_EPILOGUE_ACT_AUX;
    case AuxPart::none: break;
  }
  if (parts.activation != EPIGEMM_ACTIVATION_IDENTITY) {
    return bias ? EPIGEMM_EPILOGUE_ACT_BIAS : EPIGEMM_EPILOGUE_ACT;
  }
  return bias ? EPIGEMM_EPILOGUE_BIAS : EPIGEMM_EPILOGUE_DEFAULT;
}

std::string epilogue_label(epigemm_epilogue_t epilogue, epigemm_activation_t activation) {
  const EpilogueParts parts = epilogue_parts(epilogue, activation);
  const bool has_activation = epilogue == EPIGEMM_EPILOGUE_ACT || epilogue == EPIGEMM_EPILOGUE_ACT_BIAS ||
                              parts.uses_aux();
  if (!has_activation) return epilogue_name(epilogue);
  if (activation == EPIGEMM_ACTIVATION_GELU_TANH && parts.uses_aux()) return epilogue_name(epilogue);
  const char* structural = "";
  switch (epilogue) {
    case EPIGEMM_EPILOGUE_ACT: structural = "ACT"; break;
    case EPIGEMM_EPILOGUE_ACT_BIAS: structural = "ACT_BIAS"; break;
    case EPIGEMM_EPILOGUE_ACT_AUX: structural = "ACT_AUX"; break;
    case EPIGEMM_EPILOGUE_ACT_AUX_BIAS: structural = "ACT_AUX_BIAS"; break;
    case EPIGEMM_EPILOGUE_DACT: structural = "DACT"; break;
    case EPIGEMM_EPILOGUE_DACT_BGRAD: structural = "DACT_BGRAD"; break;
    case EPIGEMM_EPILOGUE_DEFAULT:
    case EPIGEMM_EPILOGUE_BIAS:
    case EPIGEMM_EPILOGUE_BGRADB:
    case EPIGEMM_EPILOGUE_BGRADA: break;
  }
  return std::string(structural) + "(" + activation_name(activation) + ")";
}

}  // namespace epigemm
