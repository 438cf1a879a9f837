// Which of the library's linear-layer workspace queries sizes a call, for the extension module
// (epigemm_module.cpp) and the PyTorch operators (torch_ops.cpp): the query of the call's pass, and
// for a weight gradient the one with its accumulate. Not epigemm_linear_workspace_size, whose answer
// covers an accumulating weight gradient whatever the pass (on cuda an fp32 copy of a 16-bit dW,
// 4 x out x in bytes: 256 MiB for an 8192 x 8192 layer, even for a one-token forward call).
#pragma once

#include <cstddef>
#include <cstdint>

#include "epigemm/epigemm.h"

namespace epigemm_python {

enum class LinearQuery { fprop, dgrad, wgrad, wgrad_accumulate };

inline epigemm_status_t linear_query_size(LinearQuery query, epigemm_context_t ctx, int64_t tokens,
                                          int64_t in_features, int64_t out_features, epigemm_dtype_t dtype,
                                          epigemm_memory_t memory, size_t* bytes) {
  switch (query) {
    case LinearQuery::fprop:
      return epigemm_linear_fprop_workspace_size(ctx, tokens, in_features, out_features, dtype, memory, bytes);
    case LinearQuery::dgrad:
      return epigemm_linear_dgrad_workspace_size(ctx, tokens, in_features, out_features, dtype, memory, bytes);
    case LinearQuery::wgrad:
      return epigemm_linear_wgrad_workspace_size(ctx, tokens, in_features, out_features, dtype, memory, 0, bytes);
    case LinearQuery::wgrad_accumulate:
      return epigemm_linear_wgrad_workspace_size(ctx, tokens, in_features, out_features, dtype, memory, 1, bytes);
  }
  return EPIGEMM_STATUS_INVALID_VALUE;
}

}  // namespace epigemm_python
