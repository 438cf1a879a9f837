// Validation of a GEMM call before anything is written (docs/conventions.md, "Errors").
#pragma once

#include <string>

#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {

// The dtype and memory values of one operand are ones the header defines.
Status check_dtype_and_memory(const char* name, epigemm_dtype_t dtype, epigemm_memory_t memory);

// A strided operand of `outer` runs of `inner` elements, `stride` elements apart (a column-major
// matrix: inner = rows, outer = cols, stride = ld; a row-major tensor: inner = cols, outer = rows,
// stride = row_stride), spans ((outer - 1) * stride + inner) elements; refuses more than 2^60
// bytes so that every offset fits in int64. Assumes 0 <= inner <= stride.
Status check_span(const char* name, int64_t inner, int64_t outer, int64_t stride,
                  const char* stride_name, epigemm_dtype_t dtype);

// For the GEMM-level calls: gemm_m / gemm_n / gemm_k from the stored shapes of A and B and the
// transposes (A is gemm_m x gemm_k when transa = N, gemm_k x gemm_m when T; B likewise).
// Assumes the enums were checked by validate_enums.
void gemm_dims_from_operands(GemmCall* call);

// transa / transb / epilogue / backend / dtype / memory values are ones the header defines.
// INVALID_VALUE unless `activation` is one of the registry's (EPIGEMM_FOR_EACH_ACTIVATION); the
// message names the range from that registry.
Status check_activation(epigemm_activation_t activation);

Status validate_enums(const GemmCall& call);

// Everything that does not depend on the backend: pointers, dtypes, shapes, leading dimensions,
// the operands each epilogue needs (and no others), one memory space, no overlapping outputs.
Status validate_gemm_call(const GemmCall& call);

// The first operand whose data pointer is not a multiple of its element size, as "A (bf16) is at
// 0x1001, not a multiple of its element size 2"; "" when every operand is element-aligned. Such
// storage is valid (docs/conventions.md: any alignment); a backend whose kernels access whole
// elements declines it with this text and its own reason.
std::string operand_off_its_element_size(const GemmCall& call);

}  // namespace epigemm
