// Copies of A or B that TMA can load, made in the workspace before a cutlass kernel runs: where an
// operand's address or leading dimension is not a multiple of 16 bytes, or its contiguous extent
// is gemm_k and not a multiple of 8 (docs/dev/cutlass_backend.md, "Operands copied for TMA").
#pragma once

#include <cstdint>

#include "core/status.hpp"

namespace epigemm {
namespace cutlass_backend {

// One operand of 2-byte elements seen as `outer` vectors of `inner` contiguous elements, vector o
// at source + o * source_ld. The copy holds `outer_padded` vectors of `copy_ld` elements (a multiple
// of 8, at least inner), vector o at copy + o * copy_ld: element i of vector o is the source's
// where i < inner and o < outer, and 0 elsewhere (where gemm_k is padded, the padding is zeros in
// both operands, so that it adds nothing to the products). `copy` is 16-byte aligned.
struct OperandCopy {
  const void* source = nullptr;
  int64_t source_ld = 0;
  int64_t inner = 0, outer = 0;
  void* copy = nullptr;
  int64_t copy_ld = 0;
  int64_t outer_padded = 0;
};

// Launches the copy on `stream` (cudaStream_t); stream-ordered, no allocation, no synchronization.
Status launch_operand_copy(const OperandCopy& copy, void* stream);

}  // namespace cutlass_backend
}  // namespace epigemm
