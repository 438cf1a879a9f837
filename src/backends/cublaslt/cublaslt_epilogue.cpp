// The mapping of cublaslt_epilogue.hpp.
#include "backends/cublaslt/cublaslt_epilogue.hpp"

#include <utility>

#include "core/epilogue_parts.hpp"

namespace epigemm {
namespace {

LtEpilogue lt_found(cublasLtEpilogue_t value) { return LtEpilogue{true, value, {}}; }
LtEpilogue lt_declined(std::string why) { return LtEpilogue{false, CUBLASLT_EPILOGUE_DEFAULT, std::move(why)}; }

}  // namespace

LtEpilogue lt_epilogue(const GemmCall& call) {
  const EpilogueParts parts = call.parts();
  const bool bias = parts.reads_bias();
  switch (parts.bias_grad) {
    case BiasGradPart::columns_of_b: return lt_found(CUBLASLT_EPILOGUE_BGRADB);
    case BiasGradPart::rows_of_a: return lt_found(CUBLASLT_EPILOGUE_BGRADA);
    case BiasGradPart::none:
    case BiasGradPart::rows_of_gradient: break;
  }
  const std::string label = epilogue_label(call.epilogue, call.activation);
  switch (parts.activation) {
    case EPIGEMM_ACTIVATION_IDENTITY:
      // The parts of ACT / ACT_BIAS with the identity are DEFAULT's / BIAS's; what remains here
      // with the identity saves or reads an aux, which no cuBLASLt epilogue does without an
      // activation.
      if (!parts.uses_aux()) return lt_found(bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
      return lt_declined("cuBLASLt has no epilogue for " + label + " (an aux without an activation)");
    case EPIGEMM_ACTIVATION_GELU_TANH:
      if (parts.backward()) {
        return lt_found(parts.bias_grad == BiasGradPart::rows_of_gradient ? CUBLASLT_EPILOGUE_DGELU_BGRAD
                                                                          : CUBLASLT_EPILOGUE_DGELU);
      }
      if (parts.writes_aux()) return lt_found(bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX);
      return lt_found(bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    case EPIGEMM_ACTIVATION_RELU:
      if (!parts.uses_aux()) return lt_found(bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU);
      return lt_declined("cuBLASLt's ReLU aux is a bit mask, not the pre-activation that " + label +
                         (parts.writes_aux() ? " saves" : " reads"));
    case EPIGEMM_ACTIVATION_GELU_ERF:
      return lt_declined("cuBLASLt has no gelu_erf epilogue (its GELU is the tanh form): " + label);
    case EPIGEMM_ACTIVATION_SILU:
      return lt_declined("cuBLASLt has no silu epilogue: " + label);
  }
  return lt_declined("activation value " + std::to_string(int(parts.activation)) + " is not one of epigemm.h's");
}

}  // namespace epigemm
