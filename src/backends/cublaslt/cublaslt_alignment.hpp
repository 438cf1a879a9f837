// The alignment the cublaslt backend declares to cuBLASLt's heuristic for each operand of a call,
// and the address it shows the heuristic for the bias and aux pointers. Header-only and free of
// cuBLASLt types, so the rules are unit-tested on any machine (tests/test_cublaslt_backend.cpp).
//
// Why (cublasLt.h, CUDA 13.0):
//   - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES: "Selecting a smaller value will exclude
//     algorithms that can not work with matrix A that is not as strictly aligned as they need"
//     (default 256). An algorithm's CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*_BYTES is "required for
//     buffer pointer, leading dimension, and possibly other strides", so the alignment declared
//     for a matrix is the largest power of two that divides both its address and its leading
//     dimension in bytes.
//   - CUBLASLT_MATMUL_DESC_BIAS_POINTER and _EPILOGUE_AUX_POINTER: "Routines that don't
//     dereference this pointer, like cublasLtMatmulAlgoGetHeuristic() depend on its value to
//     determine expected pointer alignment." The heuristic is shown an address of exactly the
//     operand's alignment class (with_alignment), so that its answer depends on the class alone.
//   - Every alignment is capped at 16 bytes, the value the backend declared for every matrix
//     before it took alignment from the call: algorithms that need more than 16 were excluded then
//     and stay excluded, and two calls that differ only in alignments above 16 share one algorithm
//     (the same call gets the same algorithm, and so bitwise the same result, in every context).
// The alignments are part of the backend's plan key: a call whose pointers are less aligned than
// those the algorithm was chosen for never reuses it.
#pragma once

#include <cstdint>
#include <tuple>

#include "core/dtype.hpp"
#include "core/gemm_call.hpp"

namespace epigemm {

constexpr uint32_t kLtMaxAlignment = 16;

// The largest power of two <= 16 dividing `bytes` (16 for 0: a null pointer, or nothing to divide).
constexpr uint32_t lt_alignment_of(uint64_t bytes) {
  uint32_t alignment = 1;
  while (alignment < kLtMaxAlignment && bytes % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// A matrix: its address and its leading dimension in bytes.
inline uint32_t lt_matrix_alignment(const Matrix& m) {
  const uint64_t address = reinterpret_cast<uintptr_t>(m.data);
  const uint64_t ld_bytes = uint64_t(m.ld) * uint64_t(dtype_size(m.dtype));
  return lt_alignment_of(address | ld_bytes);
}

// A vector (the bias or the bias gradient): its address.
inline uint32_t lt_vector_alignment(const Vector& v) {
  return lt_alignment_of(reinterpret_cast<uintptr_t>(v.data));
}

// The alignment of every operand a call hands cuBLASLt (C is D: the backend computes in place);
// 0 for an operand the call does not have.
struct LtAlignments {
  uint32_t a = 0, b = 0, d = 0;
  uint32_t bias = 0;  // the bias, or the bias gradient (cuBLASLt's one bias pointer)
  uint32_t aux = 0;

  std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t> tie() const {
    return std::make_tuple(a, b, d, bias, aux);
  }
  bool operator==(const LtAlignments& other) const { return tie() == other.tie(); }
  bool operator!=(const LtAlignments& other) const { return !(*this == other); }
};

inline LtAlignments lt_alignments(const GemmCall& call) {
  LtAlignments al;
  al.a = lt_matrix_alignment(call.a);
  al.b = lt_matrix_alignment(call.b);
  al.d = lt_matrix_alignment(call.d);
  if (call.has_bias) al.bias = lt_vector_alignment(call.bias);
  if (call.has_bias_grad) al.bias = lt_vector_alignment(call.bias_grad);
  if (call.has_aux) al.aux = lt_matrix_alignment(call.aux);
  return al;
}

// An address whose alignment is exactly `alignment` (a power of two <= 16), within 32 bytes of
// `p`: what the heuristic is shown for the bias and aux pointers (it reads their value, never
// what they point to). p rounded down to 32 bytes, plus the alignment: divisible by it, not by
// twice it.
inline const void* lt_with_alignment(const void* p, uint32_t alignment) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(2 * kLtMaxAlignment - 1);
  return reinterpret_cast<const void*>(base + alignment);
}

}  // namespace epigemm
