// Validation of a GEMM call before anything is written (docs/conventions.md, "Errors").
#pragma once

#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {

// For the GEMM-level calls: gemm_m / gemm_n / gemm_k from the stored shapes of A and B and the
// transposes (A is gemm_m x gemm_k when transa = N, gemm_k x gemm_m when T; B likewise).
// Assumes the enums were checked by validate_enums.
void gemm_dims_from_operands(GemmCall* call);

// transa / transb / epilogue / backend / dtype / memory values are ones the header defines.
Status validate_enums(const GemmCall& call);

// Everything that does not depend on the backend: pointers, dtypes, shapes, leading dimensions,
// the operands each epilogue needs (and no others), one memory space, no overlapping outputs.
Status validate_gemm_call(const GemmCall& call);

}  // namespace epigemm
