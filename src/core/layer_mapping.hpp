// Layer coordinates (tokens, in_features, out_features; row-major tensors) to GEMM coordinates
// (gemm_m, gemm_n, gemm_k; column-major matrices). This is the only place in epigemm where that
// mapping is made; docs/conventions.md, "Layout", has the table it implements.
#pragma once

#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {

enum class LayerPass { fprop, dgrad, wgrad };

// The row-major tensors (and vectors) of one pass; unused ones stay null.
//   fprop: x [tokens, in], w [out, in], y [tokens, out], pre_act [tokens, out] (out)
//   dgrad: dy [tokens, out], w [out, in], dx [tokens, in], pre_act [tokens, in] (in)
//   wgrad: x [tokens, in], dy [tokens, out], dw [out, in]
//   bias [out] (fprop, in); bias_grad [in] (dgrad, out, needs pre_act) or [out] (wgrad, out)
// pre_act is the pre-activation (aux); pre_act_name what the caller calls it in messages.
struct LayerTensors {
  const epigemm_tensor_t* x = nullptr;
  const epigemm_tensor_t* w = nullptr;
  const epigemm_tensor_t* dy = nullptr;
  const epigemm_tensor_t* y = nullptr;
  const epigemm_tensor_t* dx = nullptr;
  const epigemm_tensor_t* dw = nullptr;
  const epigemm_tensor_t* pre_act = nullptr;
  const epigemm_vector_t* bias = nullptr;
  const epigemm_vector_t* bias_grad = nullptr;
  const char* pre_act_name = "pre_act";
};

// Checks each tensor in its own row-major terms and that the tensors and vectors agree on
// tokens / in_features / out_features (messages in layer terms), then fills call's transa,
// transb, gemm_m/n/k, a, b, d, aux, bias, bias_grad and operand names.
Status map_layer_to_gemm(LayerPass pass, const LayerTensors& tensors, GemmCall* call);

}  // namespace epigemm
