// The CUTLASS kernels the cutlass backend can run, as plain C++ seen from the backend
// (cutlass_backend.cpp includes no CUTLASS header). Each kernel is one instantiation of the
// template of cutlass_gemm.cuh, compiled for sm_90a only in one of three translation units, one per
// epilogue family (docs/dev/cutlass_backend.md has the list and why it is that list):
//
//   family                     CUTLASS fusion                epigemm epilogues it computes
//   linear_combination_bias    LinCombPerRowBias             DEFAULT, BIAS (bias pointer null: 0)
//   forward_activation_aux     LinCombPerRowBiasEltActAux    ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS
//                                                            (a null bias or aux switches that node off)
//   backward_activation_bgrad  LinCombDeEltActDePerRowBias   DACT, DACT_BGRAD (null bias_grad: off)
//                              with partial row sums         (cutlass_row_partial_sums.cuh)
//
// A lookup returns nullptr for what is not instantiated; the backend declines that call.
#pragma once

#include <cstddef>
#include <memory>

#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {
namespace cutlass_backend {

// The storage of A and B as CUTLASS sees it, from transa / transb (D is always column-major):
// A with transa = N is gemm_m x gemm_k column-major (CUTLASS's ColumnMajor A, M contiguous); with
// T it is gemm_k x gemm_m column-major, i.e. gemm_m x gemm_k row-major (RowMajor A, K contiguous).
// B with transb = N is gemm_k x gemm_n column-major (ColumnMajor B, K contiguous); with T it is
// gemm_n x gemm_k column-major, i.e. gemm_k x gemm_n row-major (RowMajor B, N contiguous).
// The passes of a linear layer: fprop is tn, dgrad nn, wgrad nt (docs/conventions.md, "Layout").
enum class OperandLayout { nn, nt, tn, tt };

inline OperandLayout operand_layout(const GemmCall& call) {
  const bool a_t = call.transa == EPIGEMM_OP_T, b_t = call.transb == EPIGEMM_OP_T;
  return a_t ? (b_t ? OperandLayout::tt : OperandLayout::tn) : (b_t ? OperandLayout::nt : OperandLayout::nn);
}

inline const char* operand_layout_name(OperandLayout layout) {
  switch (layout) {
    case OperandLayout::nn: return "NN";
    case OperandLayout::nt: return "NT";
    case OperandLayout::tn: return "TN";
    case OperandLayout::tt: return "TT";
  }
  return "invalid layout";
}

// The device a kernel is launched for, read once when the backend is created: the persistent
// tile scheduler sizes its grid by the SM count, and asking for it per call would be a runtime
// query per call.
struct DeviceFacts {
  int device_id = 0;
  int sm_count = 0;
};

// The order in which the persistent grid walks the output tiles: CUTLASS's sm90 tile scheduler
// visits them in runs of `swizzle` tiles across the rasterized dimension (1, 2, 4 or 8; CUTLASS
// lowers it where the tile grid is narrower), so that the CTAs running at the same time share rows
// of A and columns of B in L2. It changes which tile runs when, not what any tile computes: D,
// aux and the bias-gradient sums (added in tile order) are the same for every value.
struct TileOrder {
  int swizzle = 1;
};

// A launch of one kernel for one call with the host's part done: CUTLASS's kernel parameters (the
// TMA descriptors of A, B, D and aux, encoded for the call's addresses, extents and strides; the
// tile scheduler's grid) and the kernel's shared-memory attribute. That host work is most of what a
// small call costs (docs/dev/cutlass_backend.md, "Small calls are host-bound"); the backend keeps
// the prepared launches of recent calls and repeats one for a call with the same launch key
// (cutlass_backend.cpp, LaunchKey).
class PreparedLaunch {
 public:
  virtual ~PreparedLaunch() = default;
  // Whether launch() may run again for another call with the same key: false where CUTLASS's own
  // workspace has to be set up anew for every call (none of the kernels instantiated now needs
  // that, but the check costs nothing and keeps a future configuration, stream-K say, correct).
  virtual bool reusable() const = 0;
  // Enqueues the kernel on `stream` (a cudaStream_t), and for DACT_BGRAD the sum of its partial
  // row sums after it. No allocation, no synchronization.
  virtual Status launch(void* stream) = 0;
};

// One compiled kernel. The call passed to each function has been accepted by validate() and by the
// backend's own checks (dtypes, alignment, extents: cutlass_backend.cpp), so only what CUTLASS
// itself decides is left to check_can_implement.
struct Kernel {
  // "bf16 TN forward_activation_aux(gelu_tanh) cooperative 128x128x64 cluster 1x1x1"
  const char* name;
  // CUTLASS's can_implement for the call's arguments (a status naming the kernel when it refuses).
  Status (*check_can_implement)(const GemmCall& call, const DeviceFacts& device, TileOrder order);
  // Bytes of workspace the kernel uses for this call's shapes (the DACT_BGRAD partial row sums,
  // CUTLASS's tile scheduler), plus the slack to align the caller's workspace to 16 bytes.
  size_t (*workspace_bytes)(const GemmCall& call, const DeviceFacts& device, TileOrder order);
  // The launch of the kernel for `call` (CUTLASS's initialize: arguments, TMA descriptors, and
  // CUTLASS's workspace set up on call.stream where it has one), into *prepared.
  Status (*prepare)(const GemmCall& call, const DeviceFacts& device, TileOrder order,
                    std::unique_ptr<PreparedLaunch>* prepared);
  // prepare, then launch on call.stream: one call, nothing kept.
  Status (*run)(const GemmCall& call, const DeviceFacts& device, TileOrder order);
};

// The tile configuration a call runs with: a pure function of the call (cutlass_tile_config.hpp).
// Every family has cooperative_128x128x64; pingpong_128x128x64 is instantiated for the families
// that instantiated_in names (cutlass_tile_config.hpp); a lookup returns nullptr for the others.
enum class TileConfig { cooperative_128x128x64, pingpong_128x128x64 };

// Lookups, one per family and translation unit. dtype is the dtype of A, B and D (bias, aux and
// bias_grad are in it too).
const Kernel* find_linear_combination_bias_kernel(epigemm_dtype_t dtype, OperandLayout layout,
                                                  TileConfig tile);
const Kernel* find_forward_activation_aux_kernel(epigemm_dtype_t dtype, OperandLayout layout,
                                                 epigemm_activation_t activation, TileConfig tile);
const Kernel* find_backward_activation_bgrad_kernel(epigemm_dtype_t dtype, OperandLayout layout,
                                                    epigemm_activation_t activation, TileConfig tile);

}  // namespace cutlass_backend
}  // namespace epigemm
