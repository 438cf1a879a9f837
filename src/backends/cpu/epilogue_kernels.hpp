// The cpu backend's hand-written kernels: the epilogues of docs/conventions.md applied to a block
// of the fp32 accumulator (one instantiation per activation functor and structure of parts), the
// bias-gradient sums of an operand (BGRADB, BGRADA), and fp16/bf16 -> fp32 conversion.
// Three builds of the same templates (epilogue_kernels_impl.hpp): 16-wide AVX-512, 8-wide
// AVX2/FMA/F16C, and a portable one-float-at-a-time build; select_epilogue_kernels() picks the
// widest the CPU's flags allow.
// Every result depends only on the data and gemm_m, never on which thread ran which block, so the
// bias gradients are bitwise identical whatever the number of threads.
#pragma once

#include <cstdint>

#include "core/epilogue_parts.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

// One block of the panel: rows x cols, every pointer already offset to the block's element (0, 0),
// every matrix column-major with its own leading dimension.
struct EpilogueBlock {
  int64_t rows = 0;
  int64_t cols = 0;
  const float* acc = nullptr;  // alpha op(A) op(B) + beta D_old, fp32 (may be D itself)
  int64_t ld_acc = 0;
  void* d = nullptr;  // out, in d_dtype (may alias acc when D is fp32)
  epigemm_dtype_t d_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_d = 0;
  const float* bias = nullptr;  // per-row bias: rows entries, fp32
  void* aux = nullptr;          // out: the pre-activation (forward), in: a saved one (backward)
  epigemm_dtype_t aux_dtype = EPIGEMM_DTYPE_F32;
  int64_t ld_aux = 0;
  // Forward with aux written: acc is aux itself (the GEMM wrote the pre-activation there), so aux
  // is stored only where the pass adds a bias to it (z = acc + bias, in place).
  bool aux_holds_acc = false;
  // Forward: aux (when fp32) is written with non-temporal stores, vector by vector where a vector
  // is aligned to its size (ForwardAuxPlan::streamed_aux).
  bool stream_aux = false;
  // Rows of the gradient: row_sums[i] += sum over the block's columns of g[i, j], rows entries. The
  // block's columns are summed first in double, in column order, and the sum added to
  // row_sums[i] in double and rounded once: so the order of additions for a row depends on the
  // panel width only, and a call of one panel gives the correctly rounded double sum.
  float* row_sums = nullptr;
};

struct EpilogueKernels {
  const char* name;  // "avx512", "avx2" or "scalar"
  // The element-wise parts of an epilogue on one block: bias, activation (forward, with aux
  // written) or its derivative (backward, aux read), the row sums of g. With none of them it
  // copies acc into D's dtype. parts.bias_grad other than rows_of_gradient is not the block's.
  void (*apply)(const EpilogueParts& parts, const EpilogueBlock& block);
  // dst[i] = src[i] as fp32, count contiguous elements.
  void (*to_float)(const void* src, epigemm_dtype_t dtype, int64_t count, float* dst);
  // BGRADB with op(B) = B: sums[j] = sum over p < length of src[p + j ld], j < cols (summed in
  // double, rounded once).
  void (*sum_columns)(const void* src, epigemm_dtype_t dtype, int64_t ld, int64_t length,
                      int64_t cols, float* sums);
  // BGRADB with op(B) = B^T: sums[r] = sum over p < cols of src[r + p ld], r < rows.
  void (*sum_rows)(const void* src, epigemm_dtype_t dtype, int64_t ld, int64_t rows,
                   int64_t cols, float* sums);
  // value[i] = act(x[i]), derivative[i] = act'(x[i]) in this build's lanes (tests compare the
  // builds with the scalar functors over a dense sweep of x).
  void (*activation_values)(epigemm_activation_t activation, const float* x, int64_t count,
                            float* value, float* derivative);
};

const EpilogueKernels& scalar_epilogue_kernels();
// nullptr when not compiled in (not x86-64) or when this CPU lacks AVX2, FMA or F16C.
const EpilogueKernels* avx2_epilogue_kernels();
// nullptr when not compiled in or when this CPU lacks AVX512F.
const EpilogueKernels* avx512_epilogue_kernels();
// The widest build this CPU runs: AVX-512, else AVX2, else scalar.
const EpilogueKernels& select_epilogue_kernels();

}  // namespace epigemm
