// The cutlass backend: one CUTLASS 4.2 sm90 kernel per call (TMA, warp-specialized, persistent),
// its epilogue fused through CUTLASS's epilogue visitor tree with our activation functors.
// Design record, the kernel list and what it declines: docs/dev/cutlass_backend.md.
//
// What it runs (cutlass_kernels.hpp): A and B bf16 or f16, D, bias, aux and bias_grad in the same
// dtype, fp32 accumulation and epilogue math;
//   DEFAULT, BIAS                           in every layout (NN, NT, TN, TT);
//   ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS    in TN (fprop), every activation (ACT and ACT_BIAS
//                                           with the identity are DEFAULT and BIAS);
//   DACT, DACT_BGRAD                        in NN (dgrad), every activation.
// Everything else is declined with the reason, and under AUTO another backend runs it.
//
// It checks every pointer, leading dimension and extent itself before a kernel is chosen:
// CUTLASS's can_implement looks only at the contiguous extents, and a TMA descriptor built from a
// misaligned address or stride fails inside CUTLASS with a message on stderr and a bad descriptor.
// TMA needs 16-byte aligned base addresses, strides that are multiples of 16 bytes (and below
// 2^40 bytes); CUTLASS needs the contiguous extent of each operand to be a multiple of its 16-byte
// access (8 elements of a 16-bit type) and the problem extents to fit an int. Where A or B break
// those rules, the kernel loads copies of them made in the workspace (staging_of); where D, aux or
// the bias do, DEFAULT, BIAS and the forward activation epilogues store and read them from the
// registers: matrix_movement_of.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "backends/cutlass/cutlass_kernels.hpp"
#include "backends/cutlass/cutlass_staged_operands.hpp"
#include "backends/cutlass/cutlass_tile_config.hpp"
#include "core/backend.hpp"
#include "core/cuda_device.hpp"
#include "core/dtype.hpp"
#include "core/names.hpp"

namespace epigemm {
namespace {

using cutlass_backend::DeviceFacts;
using cutlass_backend::Kernel;
using cutlass_backend::OperandLayout;

constexpr uintptr_t kAlignmentBytes = 16;
constexpr int64_t kMaxTmaStrideBytes = int64_t(1) << 40;

// The pointer of an operand as the messages name it: "A (W) is at 0x...: not 16-byte aligned".
std::string address_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignmentBytes == 0; }

// The kernel family that computes a call's epilogue, from its parts, and its kernel where TMA moves
// the matrices; nullptr with the reason when none does. layout and dtype select the instantiation.
const Kernel* family_kernel_for(const GemmCall& call, const DeviceFacts& device, cutlass_backend::KernelFamily* family,
                                std::string* why_not) {
  const EpilogueParts parts = call.parts();
  const OperandLayout layout = cutlass_backend::operand_layout(call);
  using cutlass_backend::KernelFamily;
  using cutlass_backend::tile_config_for;
  // The reasons are built only when a call is declined: run() looks the kernel up on every call.
  auto label = [&] { return epilogue_label(call.epilogue, call.activation); };
  const char* layout_name = cutlass_backend::operand_layout_name(layout);
  switch (parts.bias_grad) {
    case BiasGradPart::columns_of_b:
    case BiasGradPart::rows_of_a:
      *why_not = label() + " sums an input operand, not an epilogue of D: not instantiated";
      return nullptr;
    case BiasGradPart::rows_of_gradient:
    case BiasGradPart::none: break;
  }
  const Kernel* kernel = nullptr;
  switch (parts.direction) {
    case Direction::backward:
      *family = KernelFamily::backward_activation_bgrad;
      kernel = cutlass_backend::find_kernel(KernelFamily::backward_activation_bgrad,
                                            tile_config_for(KernelFamily::backward_activation_bgrad, call, device),
                                            call.d.dtype, layout, parts.activation);
      if (kernel == nullptr) {
        *why_not = label() + " with transa/transb " + layout_name + ": instantiated for NN (dgrad) only";
      }
      return kernel;
    case Direction::forward:
      if (parts.activation == EPIGEMM_ACTIVATION_IDENTITY && !parts.uses_aux()) {
        *family = KernelFamily::linear_combination_bias;
        kernel = cutlass_backend::find_kernel(KernelFamily::linear_combination_bias,
                                              tile_config_for(KernelFamily::linear_combination_bias, call, device),
                                              call.d.dtype, layout, parts.activation);
        if (kernel == nullptr) *why_not = label() + " with transa/transb " + layout_name + ": not instantiated";
        return kernel;
      }
      *family = KernelFamily::forward_activation_aux;
      kernel = cutlass_backend::find_kernel(KernelFamily::forward_activation_aux,
                                            tile_config_for(KernelFamily::forward_activation_aux, call, device),
                                            call.d.dtype, layout, parts.activation);
      if (kernel == nullptr) {
        *why_not = label() + " with transa/transb " + layout_name + ": instantiated for TN (fprop) only";
      }
      return kernel;
  }
  *why_not = "invalid epilogue direction";
  return nullptr;
}

// The dtypes of A, B and D that kernels are instantiated for; empty when they are.
std::string main_dtype_rule_broken(const GemmCall& call) {
  const OperandNames& n = call.names;
  const epigemm_dtype_t dtype = call.a.dtype;
  if (dtype != EPIGEMM_DTYPE_BF16 && dtype != EPIGEMM_DTYPE_F16) {
    return std::string(n.a) + " and " + n.b + " are " + dtype_name(dtype) + "; instantiated: bf16, f16";
  }
  if (call.d.dtype != dtype) {
    return std::string(n.d) + " is " + dtype_name(call.d.dtype) + "; instantiated: D in the input dtype " +
           dtype_name(dtype);
  }
  return {};
}

// The bias and the bias gradient of a call, where present.
struct VectorOperand {
  bool present;
  const Vector& vector;
  const char* name;
};
std::array<VectorOperand, 2> vector_operands(const GemmCall& call) {
  return {VectorOperand{call.has_bias, call.bias, call.names.bias},
          VectorOperand{call.has_bias_grad, call.bias_grad, call.names.bias_grad}};
}

// The dtypes of the side operands and the extents' int range; empty when they hold.
std::string side_operand_rule_broken(const GemmCall& call) {
  const OperandNames& n = call.names;
  const epigemm_dtype_t dtype = call.a.dtype;
  for (const VectorOperand& v : vector_operands(call)) {
    if (v.present && v.vector.dtype != dtype) {
      return std::string(v.name) + " is " + dtype_name(v.vector.dtype) + "; instantiated: D's dtype " +
             dtype_name(dtype);
    }
  }
  if (call.has_aux && call.aux.dtype != dtype) {
    return std::string(n.aux) + " is " + dtype_name(call.aux.dtype) + "; instantiated: D's dtype " + dtype_name(dtype);
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (call.gemm_m > kIntMax || call.gemm_n > kIntMax || call.gemm_k > kIntMax) {
    return "gemm_m, gemm_n, gemm_k = " + std::to_string(call.gemm_m) + ", " + std::to_string(call.gemm_n) + ", " +
           std::to_string(call.gemm_k) + ": CUTLASS's problem shape holds each in an int (at most " +
           std::to_string(kIntMax) + ")";
  }
  return {};
}

// A matrix of the call as CUTLASS moves it: `outer_extent` vectors of `contiguous_extent`
// contiguous elements (A: gemm_m vectors of gemm_k when transa = T (row-major m x k), else gemm_k
// vectors of gemm_m; B: gemm_k vectors of gemm_n when transb = T, else gemm_n vectors of gemm_k; D
// and aux: gemm_n vectors of gemm_m, column-major).
struct MatrixOperand {
  bool present;
  const Matrix& matrix;
  const char* name;
  int64_t contiguous_extent;
  const char* contiguous_name;
  int64_t outer_extent;
  bool contiguous_along_k;
};

// TMA's rules for a matrix (file comment); empty when it keeps them.
std::string tma_rule_broken(const MatrixOperand& m, int64_t element_bytes) {
  if (!aligned(m.matrix.data)) {
    return std::string(m.name) + " is at " + address_text(m.matrix.data) + ": not 16-byte aligned";
  }
  const int64_t stride_bytes = m.matrix.ld * element_bytes;
  if (stride_bytes % int64_t(kAlignmentBytes) != 0) {
    return std::string(m.name) + " has leading dimension " + std::to_string(m.matrix.ld) + " (" +
           std::to_string(stride_bytes) + " bytes); TMA needs a multiple of 16 bytes";
  }
  if (stride_bytes >= kMaxTmaStrideBytes) {
    return std::string(m.name) + " has leading dimension " + std::to_string(m.matrix.ld) +
           "; TMA needs a stride below 2^40 bytes";
  }
  const int64_t elements_per_access = int64_t(kAlignmentBytes) / element_bytes;
  if (m.contiguous_extent % elements_per_access != 0) {
    return std::string(m.name) + "'s contiguous extent " + m.contiguous_name + " = " +
           std::to_string(m.contiguous_extent) + " is not a multiple of " + std::to_string(elements_per_access) +
           " (16 bytes), which CUTLASS needs";
  }
  return {};
}

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The copy of A or B in the workspace (cutlass_staged_operands.hpp): the operand's vectors
// (MatrixOperand), the copy's extents and leading dimension, and where it lies in the staging area.
struct OperandStaging {
  bool copied = false;
  int64_t inner = 0, outer = 0;                // the operand's
  int64_t inner_padded = 0, outer_padded = 0;  // the copy's (gemm_k padded where it is either)
  int64_t ld = 0;                              // the copy's: inner_padded rounded up to 8
  size_t offset = 0, bytes = 0;                // in the staging area, multiples of 16
};
// The copies of A and B that TMA can load, where either breaks TMA's rules, and the gemm_k the
// kernel then runs with (docs/dev/cutlass_backend.md, "Operands copied for TMA").
struct Staging {
  OperandStaging a, b;
  int64_t gemm_k = 0;
  bool any() const { return a.copied || b.copied; }
  // The workspace the copies take, with room to align their start to 16 bytes; the kernel's own
  // workspace follows them.
  size_t bytes() const { return any() ? a.bytes + b.bytes + kAlignmentBytes : 0; }
};

// The copies that let TMA load A and B where either breaks its rules (`broken`: the rule, empty where
// it keeps them); empty when they can, else the rule a copy cannot keep. A copy has a 16-byte
// aligned start and a leading dimension that is a multiple of 8 elements. Where a copied operand's
// contiguous extent is gemm_k and not a multiple of 8, gemm_k is rounded up to one and both
// operands are copied with zeros in the padding: its products are 0 and add nothing, as the zeros
// that TMA fills past gemm_k in the last k-block add nothing, so the results keep their bits. A
// contiguous extent gemm_m or gemm_n that is not a multiple of 8 cannot be padded (D's would change).
std::string staging_of(const GemmCall& call, const MatrixOperand (&loaded)[2], const std::string (&broken)[2],
                       int64_t element_bytes, Staging* staging) {
  const int64_t piece = int64_t(kAlignmentBytes) / element_bytes;
  staging->gemm_k = call.gemm_k;
  for (int i = 0; i < 2; ++i) {
    if (!broken[i].empty() && loaded[i].contiguous_along_k && call.gemm_k % piece != 0) {
      staging->gemm_k = round_up(call.gemm_k, piece);
    }
  }
  const bool pads_k = staging->gemm_k != call.gemm_k;
  OperandStaging* copies[2] = {&staging->a, &staging->b};
  size_t offset = 0;
  for (int i = 0; i < 2; ++i) {
    const MatrixOperand& m = loaded[i];
    if (broken[i].empty() && !pads_k) continue;
    if (reinterpret_cast<uintptr_t>(m.matrix.data) % uintptr_t(element_bytes) != 0) {
      return std::string(m.name) + " is at " + address_text(m.matrix.data) + ": not aligned to its " +
             std::to_string(element_bytes) + "-byte elements";
    }
    if (!m.contiguous_along_k && m.contiguous_extent % piece != 0) {
      return (broken[i].empty() ? tma_rule_broken(m, element_bytes) : broken[i]) +
             " (a copy for TMA can pad gemm_k only)";
    }
    OperandStaging& copy = *copies[i];
    copy.copied = true;
    copy.inner = m.contiguous_extent;
    copy.outer = m.outer_extent;
    copy.inner_padded = m.contiguous_along_k ? staging->gemm_k : copy.inner;
    copy.outer_padded = m.contiguous_along_k ? copy.outer : staging->gemm_k;
    copy.ld = round_up(copy.inner_padded, piece);
    copy.offset = offset;
    copy.bytes = size_t(round_up(copy.ld * copy.outer_padded * element_bytes, int64_t(kAlignmentBytes)));
    offset += copy.bytes;
  }
  return {};
}

// Where the copies start: the workspace's first 16-byte aligned address; in a size query, which has
// no workspace, an aligned address that nothing dereferences (CUTLASS's can_implement reads only the
// extents and strides).
char* staging_area(const GemmCall& call) {
  const uintptr_t base = call.workspace != nullptr ? reinterpret_cast<uintptr_t>(call.workspace) : uintptr_t(1) << 44;
  return reinterpret_cast<char*>((base + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes);
}

// The call the kernel runs: A and B replaced by their copies, gemm_k by the staging's, and the
// workspace by what follows the copies. `call` itself where nothing is copied.
GemmCall staged_call(const GemmCall& call, const Staging& staging) {
  if (!staging.any()) return call;
  GemmCall staged = call;
  char* area = staging_area(call);
  staged.gemm_k = staging.gemm_k;
  auto place = [&](const OperandStaging& copy, Matrix* matrix) {
    if (!copy.copied) return;
    matrix->data = area + copy.offset;
    matrix->rows = copy.inner_padded;  // column-major: rows are the contiguous dimension
    matrix->cols = copy.outer_padded;
    matrix->ld = copy.ld;
  };
  place(staging.a, &staged.a);
  place(staging.b, &staged.b);
  const size_t used = call.workspace == nullptr
                          ? 0
                          : size_t(area - static_cast<char*>(call.workspace)) + staging.a.bytes + staging.b.bytes;
  if (call.workspace != nullptr && call.workspace_bytes >= used) {
    staged.workspace = static_cast<char*>(call.workspace) + used;
    staged.workspace_bytes = call.workspace_bytes - used;
  } else {
    staged.workspace = nullptr;
    staged.workspace_bytes = 0;
  }
  return staged;
}

// How the kernel can move the call's matrices (cutlass_tile_config.hpp, MatrixMovement), or why no
// kernel can: TMA stores where D, aux and the vectors keep TMA's rules (the bias and the bias gradient
// 16-byte aligned, for their vector loads and stores), else D and aux staged through shared memory and the bias
// read element by element (any address of their element type); A and B through TMA, from copies in the workspace where they
// break its rules (staging_of).
struct Movement {
  bool possible = true;
  cutlass_backend::MatrixMovement kind = cutlass_backend::MatrixMovement::tma;
  Staging staging;
  std::string why_not;             // !possible: the rule broken
  std::string why_stores_not_tma;  // kind != tma: the first TMA rule D, aux or a vector breaks
};

Movement matrix_movement_of(const GemmCall& call) {
  using cutlass_backend::MatrixMovement;
  const OperandNames& n = call.names;
  const int64_t element_bytes = int64_t(dtype_size(call.a.dtype));
  const bool a_t = call.transa == EPIGEMM_OP_T, b_t = call.transb == EPIGEMM_OP_T;
  const MatrixOperand loaded[2] = {
      {true, call.a, n.a, a_t ? call.gemm_k : call.gemm_m, a_t ? "gemm_k" : "gemm_m", a_t ? call.gemm_m : call.gemm_k,
       a_t},
      {true, call.b, n.b, b_t ? call.gemm_n : call.gemm_k, b_t ? "gemm_n" : "gemm_k", b_t ? call.gemm_k : call.gemm_n,
       !b_t},
  };
  const MatrixOperand stored[] = {
      {true, call.d, n.d, call.gemm_m, "gemm_m", call.gemm_n, false},
      {call.has_aux, call.aux, n.aux, call.gemm_m, "gemm_m", call.gemm_n, false},
  };
  Movement movement;
  // The stores: the vectors' alignment, then D and aux.
  for (const VectorOperand& v : vector_operands(call)) {
    if (v.present && !aligned(v.vector.data) && movement.why_stores_not_tma.empty()) {
      movement.why_stores_not_tma =
          std::string(v.name) + " is at " + address_text(v.vector.data) + ": not 16-byte aligned";
    }
  }
  for (const MatrixOperand& m : stored) {
    if (!m.present || !movement.why_stores_not_tma.empty()) continue;
    movement.why_stores_not_tma = tma_rule_broken(m, element_bytes);
  }
  if (!movement.why_stores_not_tma.empty()) {
    // From the registers: D, aux and the bias at any address of their element type (a bias gradient
    // exists only where the kernels read aux through TMA: the family declines it).
    auto element_misaligned = [&](const void* data, const char* name) {
      if (reinterpret_cast<uintptr_t>(data) % uintptr_t(element_bytes) == 0) return false;
      movement.possible = false;
      movement.why_not = std::string(name) + " is at " + address_text(data) + ": not aligned to its " +
                         std::to_string(element_bytes) + "-byte elements";
      return true;
    };
    for (const MatrixOperand& m : stored) {
      if (m.present && element_misaligned(m.matrix.data, m.name)) return movement;
    }
    if (call.has_bias && element_misaligned(call.bias.data, n.bias)) return movement;
    movement.kind = MatrixMovement::tma_loads_register_stores;
  }
  // The loads.
  const std::string broken[2] = {tma_rule_broken(loaded[0], element_bytes), tma_rule_broken(loaded[1], element_bytes)};
  movement.staging.gemm_k = call.gemm_k;
  if (broken[0].empty() && broken[1].empty()) return movement;
  std::string not_stageable = staging_of(call, loaded, broken, element_bytes, &movement.staging);
  if (!not_stageable.empty()) {
    movement.possible = false;
    movement.why_not = std::move(not_stageable);
  }
  return movement;
}

// The kernel that runs the call, with the copies of A and B it needs first (`staging`): its
// family's, with the tile the rule picks for the extents it runs and the way its matrices can be
// moved; nullptr with the reason where none. The first reason that applies is the one that says
// most: the epilogue and layout, then the side operands, then the matrices' alignment.
const Kernel* kernel_for(const GemmCall& call, const DeviceFacts& device, std::string* why_not, Staging* staging) {
  cutlass_backend::KernelFamily family{};
  const Kernel* kernel = family_kernel_for(call, device, &family, why_not);
  if (kernel == nullptr) return nullptr;
  std::string broken = side_operand_rule_broken(call);
  if (!broken.empty()) {
    *why_not = std::move(broken);
    return nullptr;
  }
  Movement movement = matrix_movement_of(call);
  if (!movement.possible) {
    *why_not = std::move(movement.why_not);
    return nullptr;
  }
  *staging = movement.staging;
  const bool pads_k = staging->gemm_k != call.gemm_k;
  switch (movement.kind) {
    case cutlass_backend::MatrixMovement::tma:
      if (!pads_k) return kernel;
      break;
    case cutlass_backend::MatrixMovement::tma_loads_register_stores: break;
  }
  // The tile rules read the extents the kernel runs with.
  GemmCall extents = call;
  extents.gemm_k = staging->gemm_k;
  kernel = cutlass_backend::find_kernel(family, cutlass_backend::tile_config_for(family, extents, device, movement.kind),
                                        call.d.dtype, cutlass_backend::operand_layout(call), call.parts().activation);
  if (kernel == nullptr) {
    *why_not = movement.why_stores_not_tma + " (this epilogue's kernels need TMA)";
  }
  return kernel;
}

// What a prepared launch (cutlass_kernels.hpp) was made from: the kernel (dtype, layout, family,
// activation, tile configuration), the tile order, and every value of the call that CUTLASS's
// parameters hold: the extents, the addresses and leading dimensions of the operands, alpha and
// beta, and the workspace (where the row partial sums and CUTLASS's own workspace lie). Two calls
// with the same key launch the same kernel with the same parameters. The stream is not part of
// it: a launch takes its stream when enqueued.
struct LaunchKey {
  std::array<uint64_t, 19> words{};
  bool operator==(const LaunchKey& other) const { return words == other.words; }
};
struct LaunchKeyHash {
  size_t operator()(const LaunchKey& key) const {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a over the words
    for (const uint64_t word : key.words) hash = (hash ^ word) * 1099511628211ull;
    return size_t(hash);
  }
};

uint64_t address_word(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }
uint64_t float_word(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

LaunchKey launch_key(const Kernel* kernel, cutlass_backend::TileOrder order, const GemmCall& call) {
  LaunchKey key;
  key.words = {address_word(kernel),
               uint64_t(order.swizzle),
               uint64_t(call.gemm_m),
               uint64_t(call.gemm_n),
               uint64_t(call.gemm_k),
               address_word(call.a.data),
               uint64_t(call.a.ld),
               address_word(call.b.data),
               uint64_t(call.b.ld),
               address_word(call.d.data),
               uint64_t(call.d.ld),
               address_word(call.has_bias ? call.bias.data : nullptr),
               address_word(call.has_aux ? call.aux.data : nullptr),
               uint64_t(call.has_aux ? call.aux.ld : 0),
               address_word(call.has_bias_grad ? call.bias_grad.data : nullptr),
               address_word(call.workspace),
               uint64_t(call.workspace_bytes),
               float_word(call.alpha),
               float_word(call.beta)};
  return key;
}

// At most this many prepared launches per context (a few kilobytes each: CUTLASS's parameters,
// with five 128-byte TMA descriptors); when full, they are all dropped and the cache starts again.
// A training step makes a few dozen distinct calls.
constexpr size_t kMaxPreparedLaunches = 256;

class CutlassBackend final : public Backend {
 public:
  CutlassBackend() {
    const CudaDevice device = current_cuda_device();
    if (!device.present) {
      why_not_usable_ = device.why_absent;
      return;
    }
    device_.device_id = device.id;
    device_.sm_count = device.properties.multiProcessorCount;
    device_text_ = device.text();
    // The kernels are compiled for sm_90a alone, whose wgmma and TMA instructions run on compute
    // capability 9.0 only (not on a later major version).
    if (device.properties.major != 9 || device.properties.minor != 0) {
      why_not_usable_ = "the kernels are compiled for sm_90a (compute capability 9.0); " + device_text_;
      return;
    }
    usable_ = true;
  }

  epigemm_backend_t id() const override { return EPIGEMM_BACKEND_CUTLASS; }
  bool usable() const override { return usable_; }
  // The rule: cutlass_tile_config.hpp, auto_priority_for.
  int auto_priority(const GemmCall& call) const override {
    const Movement movement = matrix_movement_of(call);
    return cutlass_backend::auto_priority_for(call, device_, movement.kind, movement.staging.any());
  }
  Support supports(const GemmCall& call) const override;
  size_t workspace_bytes(const GemmCall& call) const override;
  Status run(const GemmCall& call) override;
  // "CUTLASS 4.2.0 sm90 kernels on device 0: NVIDIA H200, compute capability 9.0" (the version
  // of the headers it was built with, from their cutlass/version.h: CMakeLists.txt).
  std::string description() const override {
    if (!usable_) return "not usable here: " + why_not_usable_;
    return std::string("CUTLASS ") + EPIGEMM_CUTLASS_VERSION + " sm90 kernels on " + device_text_;
  }

 private:
  bool usable_ = false;
  std::string why_not_usable_;
  std::string device_text_;  // "device 0: NVIDIA H200, compute capability 9.0"
  DeviceFacts device_;
  // A prepared launch and the workspace its call needs.
  struct Prepared {
    std::unique_ptr<cutlass_backend::PreparedLaunch> launch;
    size_t workspace_bytes = 0;
  };
  // The tile order of a call that `kernel` runs (it depends on the kernel's tile configuration).
  cutlass_backend::TileOrder tile_order_of(const Kernel* kernel, const GemmCall& call) const {
    return cutlass_backend::tile_order_for(call, device_, kernel->tile);
  }
  // The prepared launch of this call, or nullptr: a call with a kept launch has passed
  // can_implement with these very values, and its workspace size is known, so supports() and
  // workspace_bytes() answer from it without building CUTLASS's arguments again (about 1 µs each).
  const Prepared* prepared_for(const Kernel* kernel, const GemmCall& call) const {
    const auto found = prepared_.find(launch_key(kernel, tile_order_of(kernel, call), call));
    return found == prepared_.end() ? nullptr : &found->second;
  }

  // The prepared launches of recent calls, by launch key (a context is used by one thread at a time).
  std::unordered_map<LaunchKey, Prepared, LaunchKeyHash> prepared_;
};

Support CutlassBackend::supports(const GemmCall& call) const {
  if (call.memory() != EPIGEMM_MEMORY_DEVICE) return Support::no("operands are in host memory");
  if (call.gemm_m == 0 || call.gemm_n == 0 || call.gemm_k == 0) {
    return Support::no("an empty dimension (gemm_m, gemm_n, gemm_k = " + std::to_string(call.gemm_m) + ", " +
                       std::to_string(call.gemm_n) + ", " + std::to_string(call.gemm_k) +
                       "): the degenerate cases are left to the cuda backend");
  }
  // The dtypes, then whether a kernel computes the epilogue in this layout, then the operands'
  // rules: the first reason that applies is the one that says most.
  const std::string dtypes_broken = main_dtype_rule_broken(call);
  if (!dtypes_broken.empty()) return Support::no(dtypes_broken);
  std::string why_not;
  Staging staging;
  const Kernel* kernel = kernel_for(call, device_, &why_not, &staging);
  if (kernel == nullptr) return Support::no(why_not);
  const GemmCall kernel_call = staged_call(call, staging);
  // The copies of A and B take workspace that a call sized for an aligned layout may not have: then
  // another backend runs it (a size query, which asks what the call needs, is answered with them).
  if (staging.any() && !call.sizing_workspace) {
    const size_t needed = staging.bytes() + kernel->workspace_bytes(kernel_call, device_, tile_order_of(kernel, kernel_call));
    if (call.workspace == nullptr || call.workspace_bytes < needed) {
      return Support::no("the copies of " + std::string(staging.a.copied ? call.names.a : "") +
                         (staging.a.copied && staging.b.copied ? " and " : "") +
                         (staging.b.copied ? call.names.b : "") + " that TMA can load need " +
                         std::to_string(needed) + " bytes of workspace; the call gives " +
                         std::to_string(call.workspace == nullptr ? size_t(0) : call.workspace_bytes));
    }
  }
  if (prepared_for(kernel, kernel_call) != nullptr) return Support::yes();
  const Status can = kernel->check_can_implement(kernel_call, device_, tile_order_of(kernel, kernel_call));
  if (!can.ok()) return Support::no(can.message());
  return Support::yes();
}

size_t CutlassBackend::workspace_bytes(const GemmCall& call) const {
  std::string why_not;
  Staging staging;
  const Kernel* kernel = kernel_for(call, device_, &why_not, &staging);
  if (kernel == nullptr) return 0;
  const GemmCall kernel_call = staged_call(call, staging);
  if (const Prepared* prepared = prepared_for(kernel, kernel_call)) return staging.bytes() + prepared->workspace_bytes;
  return staging.bytes() + kernel->workspace_bytes(kernel_call, device_, tile_order_of(kernel, kernel_call));
}

// The copies of A and B (where staged) on the call's stream, then the kernel, which the stream
// orders after them.
Status launch_operand_copies(const GemmCall& call, const Staging& staging) {
  char* area = staging_area(call);
  const std::pair<const OperandStaging*, const Matrix*> operands[] = {{&staging.a, &call.a}, {&staging.b, &call.b}};
  for (const auto& [copy, matrix] : operands) {
    if (!copy->copied) continue;
    cutlass_backend::OperandCopy c;
    c.source = matrix->data;
    c.source_ld = matrix->ld;
    c.inner = copy->inner;
    c.outer = copy->outer;
    c.copy = area + copy->offset;
    c.copy_ld = copy->ld;
    c.outer_padded = copy->outer_padded;
    EPIGEMM_RETURN_IF_ERROR(cutlass_backend::launch_operand_copy(c, call.stream));
  }
  return Status();
}

Status CutlassBackend::run(const GemmCall& call) {
  std::string why_not;
  Staging staging;
  const Kernel* kernel = kernel_for(call, device_, &why_not, &staging);
  if (kernel == nullptr) return error(EPIGEMM_STATUS_NOT_SUPPORTED, "cutlass declines this call: ", why_not);
  if (staging.any()) EPIGEMM_RETURN_IF_ERROR(launch_operand_copies(call, staging));
  const GemmCall kernel_call = staged_call(call, staging);
  const cutlass_backend::TileOrder order = tile_order_of(kernel, kernel_call);
  const LaunchKey key = launch_key(kernel, order, kernel_call);
  const auto found = prepared_.find(key);
  if (found != prepared_.end()) return found->second.launch->launch(call.stream);
  std::unique_ptr<cutlass_backend::PreparedLaunch> prepared;
  EPIGEMM_RETURN_IF_ERROR(kernel->prepare(kernel_call, device_, order, &prepared));
  const Status launched = prepared->launch(call.stream);
  if (launched.ok()) {
    if (prepared_.size() >= kMaxPreparedLaunches) prepared_.clear();
    prepared_.emplace(key, Prepared{std::move(prepared), kernel->workspace_bytes(kernel_call, device_, order)});
  }
  return launched;
}

}  // namespace

std::unique_ptr<Backend> create_cutlass_backend() { return std::make_unique<CutlassBackend>(); }

namespace cutlass_backend {
namespace {

// The kernel of one family and configuration where the family instantiates it, without naming a
// translation unit's symbol where it does not.
template <KernelFamily family, TileConfig tile>
const Kernel* kernel_if_instantiated(epigemm_dtype_t dtype, OperandLayout layout, epigemm_activation_t activation) {
  if constexpr (instantiated_in(family, tile)) {
    return instantiated_kernel<family, tile>(dtype, layout, activation);
  } else {
    return nullptr;
  }
}

template <KernelFamily family>
const Kernel* kernel_in_family(TileConfig tile, epigemm_dtype_t dtype, OperandLayout layout,
                               epigemm_activation_t activation) {
  switch (tile) {
    case TileConfig::pingpong_128x128x64_direct_store:
      return kernel_if_instantiated<family, TileConfig::pingpong_128x128x64_direct_store>(dtype, layout, activation);
    case TileConfig::cooperative_128x128x64:
      return kernel_if_instantiated<family, TileConfig::cooperative_128x128x64>(dtype, layout, activation);
    case TileConfig::pingpong_128x128x64:
      return kernel_if_instantiated<family, TileConfig::pingpong_128x128x64>(dtype, layout, activation);
    case TileConfig::pingpong_128x128x64_epilogue_64x64:
      return kernel_if_instantiated<family, TileConfig::pingpong_128x128x64_epilogue_64x64>(dtype, layout,
                                                                                             activation);
    case TileConfig::pingpong_64x128x64:
      return kernel_if_instantiated<family, TileConfig::pingpong_64x128x64>(dtype, layout, activation);
    case TileConfig::cooperative_128x64x64:
      return kernel_if_instantiated<family, TileConfig::cooperative_128x64x64>(dtype, layout, activation);
    case TileConfig::pingpong_64x128x64_without_source:
      return kernel_if_instantiated<family, TileConfig::pingpong_64x128x64_without_source>(dtype, layout,
                                                                                             activation);
    case TileConfig::cooperative_128x64x64_without_source:
      return kernel_if_instantiated<family, TileConfig::cooperative_128x64x64_without_source>(dtype, layout,
                                                                                                activation);
    case TileConfig::cooperative_128x96x64_without_source:
      return kernel_if_instantiated<family, TileConfig::cooperative_128x96x64_without_source>(dtype, layout,
                                                                                                activation);
    case TileConfig::cooperative_128x192x64_without_source:
      return kernel_if_instantiated<family, TileConfig::cooperative_128x192x64_without_source>(dtype, layout,
                                                                                                 activation);
    case TileConfig::cooperative_256x128x64_cluster_1x2:
      return kernel_if_instantiated<family, TileConfig::cooperative_256x128x64_cluster_1x2>(dtype, layout,
                                                                                              activation);
    case TileConfig::cooperative_256x128x64_cluster_1x2_without_source:
      return kernel_if_instantiated<family, TileConfig::cooperative_256x128x64_cluster_1x2_without_source>(
          dtype, layout, activation);
    case TileConfig::pingpong_128x128x64_without_source:
      return kernel_if_instantiated<family, TileConfig::pingpong_128x128x64_without_source>(dtype, layout,
                                                                                              activation);
    case TileConfig::pingpong_128x128x64_epilogue_64x64_without_source:
      return kernel_if_instantiated<family, TileConfig::pingpong_128x128x64_epilogue_64x64_without_source>(
          dtype, layout, activation);
  }
  return nullptr;
}

}  // namespace

const Kernel* find_kernel(KernelFamily family, TileConfig tile, epigemm_dtype_t dtype, OperandLayout layout,
                          epigemm_activation_t activation) {
  switch (family) {
    case KernelFamily::linear_combination_bias:
      return kernel_in_family<KernelFamily::linear_combination_bias>(tile, dtype, layout, activation);
    case KernelFamily::forward_activation_aux:
      return kernel_in_family<KernelFamily::forward_activation_aux>(tile, dtype, layout, activation);
    case KernelFamily::backward_activation_bgrad:
      return kernel_in_family<KernelFamily::backward_activation_bgrad>(tile, dtype, layout, activation);
  }
  return nullptr;
}

}  // namespace cutlass_backend

}  // namespace epigemm
