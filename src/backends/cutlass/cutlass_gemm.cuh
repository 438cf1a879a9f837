// One CUTLASS sm90 GEMM with a fused epilogue, as a template over the element type, the storage of
// A and B, the epilogue family (one of the three fusions below) and the tile configuration; and
// the Kernel entry (cutlass_kernels.hpp) that the backend calls. Included only by the kernel
// translation units (through cutlass_kernel_families.cuh), compiled for sm_90a alone.
//
// GEMM coordinates (docs/conventions.md, "Layout"): D is gemm_m x gemm_n column-major with ld_d,
// op(A) gemm_m x gemm_k, op(B) gemm_k x gemm_n. CUTLASS's problem is the same (M, N, K) =
// (gemm_m, gemm_n, gemm_k), L = 1; A is (M, K), B is (N, K) in CUTLASS's index order, each with one
// unit stride (cutlass_kernels.hpp, OperandLayout) and the leading dimension as the other.
// D, C (D itself, read only when beta != 0; a kernel without a source has no C) and aux are
// column-major: (M, N) strides (1, ld).
// The bias and the bias gradient are per row of D, i.e. per M index: a column vector in CUTLASS's
// terms (ColBroadcast, ColReduction).
//
// Epilogue algebra (docs/conventions.md, "Epilogues"), with acc = alpha * A B + beta * D_old in
// fp32; CUTLASS computes beta * C + (alpha * acc_raw (+ bias)) in fp32, the same value:
//   LinearCombinationBias      D = acc (+ bias[i])                     (bias null: + 0)
//   ForwardActivationAux       z = acc (+ bias[i]); aux = z (if aux); D = act(z)
//   BackwardActivationBgrad    g = acc * act'(aux); D = g; bias_grad[i] = sum_j g (if bias_grad),
//                              summed in fp32 from the unrounded g: each tile writes its partial
//                              row sums to the workspace, then a kernel of its own adds them in
//                              tile order (no atomics: deterministic for a fixed tile shape).
// The first two also run with the epilogue of cutlass_direct_store_epilogue.cuh, which stages D
// and aux through shared memory (the direct-store configuration, for a D, aux or bias TMA cannot move):
// CollectiveEpilogueOf below picks it where the configuration says kDirectStore.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/kernel_hardware_info.h>

#include "backends/cutlass/cutlass_activation.cuh"
#include "backends/cutlass/cutlass_direct_store_epilogue.cuh"
#include "backends/cutlass/cutlass_kernels.hpp"
#include "backends/cutlass/cutlass_row_partial_sums.cuh"
#include "backends/cutlass/cutlass_tile_config.hpp"
#include "core/dtype.hpp"
#include "core/names.hpp"

namespace epigemm {
namespace cutlass_backend {

// CUTLASS's workspace must start 16-byte aligned; the caller's may not, so we ask for this much
// more and round the pointer up.
constexpr size_t kWorkspaceAlignment = 16;

template <epigemm_dtype_t dtype>
struct ElementOf;
template <>
struct ElementOf<EPIGEMM_DTYPE_BF16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct ElementOf<EPIGEMM_DTYPE_F16> {
  using type = cutlass::half_t;
};

template <OperandLayout layout>
struct LayoutTagsOf;
template <>
struct LayoutTagsOf<OperandLayout::nn> {
  using A = cutlass::layout::ColumnMajor;
  using B = cutlass::layout::ColumnMajor;
};
template <>
struct LayoutTagsOf<OperandLayout::nt> {
  using A = cutlass::layout::ColumnMajor;
  using B = cutlass::layout::RowMajor;
};
template <>
struct LayoutTagsOf<OperandLayout::tn> {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::ColumnMajor;
};
template <>
struct LayoutTagsOf<OperandLayout::tt> {
  using A = cutlass::layout::RowMajor;
  using B = cutlass::layout::RowMajor;
};

// A CUTLASS stride (mode 0, mode 1, batch) with one static unit stride and the leading dimension
// as the other (the batch stride is 0: one batch).
template <class Stride>
Stride stride_with_leading_dimension(int64_t ld) {
  Stride stride{};
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(stride))>>) {
    cute::get<1>(stride) = ld;
  } else {
    cute::get<0>(stride) = ld;
  }
  cute::get<2>(stride) = 0;
  return stride;
}

// ---- the three epilogue families -------------------------------------------------------------

// D = acc (+ bias[i]). DEFAULT and BIAS share it: a null bias pointer makes CUTLASS's
// ColBroadcast return its null default, 0.
template <class Element>
struct LinearCombinationBias {
  static std::string label() { return "linear_combination_bias"; }
  using Operation = cutlass::epilogue::fusion::LinCombPerRowBias<
      /*ElementOutput=*/Element, /*ElementCompute=*/float, /*ElementBias=*/Element,
      /*ElementSource=*/Element, /*ElementScalar=*/float>;
  // The activation of the direct-store epilogue (cutlass_direct_store_epilogue.cuh): none.
  using StoredActivation = Identity;
  static constexpr bool kSumsRows = false;
  template <class FusionArguments>
  static void set(FusionArguments& fusion, const GemmCall& call, float*) {
    fusion.bias_ptr = call.has_bias ? static_cast<const Element*>(call.bias.data) : nullptr;
  }
};

// z = acc (+ bias[i]); aux = z; D = act(z). ACT, ACT_BIAS, ACT_AUX and ACT_AUX_BIAS share it: a
// null bias reads as 0 (ColBroadcast), a null aux pointer skips the aux store (AuxStore's
// is_nullptr: no TMA store is issued).
template <class Element, class Activation>
struct ForwardActivationAux {
  static std::string label() {
    return std::string("forward_activation_aux(") + activation_name(Activation::id) + ")";
  }
  // ElementSource void: the beta * C node is left out (a kernel that does not read D's old values).
  template <class ElementSource>
  using OperationReading = cutlass::epilogue::fusion::LinCombPerRowBiasEltActAux<
      /*GmemLayoutTagAux=*/cutlass::layout::ColumnMajor, ForwardActivation<Activation>::template Fn,
      /*ElementOutput=*/Element, /*ElementCompute=*/float, /*ElementAux=*/Element,
      /*ElementBias=*/Element, ElementSource, /*ElementScalar=*/float>;
  using Operation = OperationReading<Element>;
  using OperationWithoutSource = OperationReading<void>;
  using StoredActivation = Activation;
  static constexpr bool kSumsRows = false;
  template <class FusionArguments>
  static void set(FusionArguments& fusion, const GemmCall& call, float*) {
    using StrideAux = typename FusionArguments::StrideAux;
    fusion.bias_ptr = call.has_bias ? static_cast<const Element*>(call.bias.data) : nullptr;
    fusion.aux_ptr = call.has_aux ? static_cast<Element*>(call.aux.data) : nullptr;
    fusion.dAux = stride_with_leading_dimension<StrideAux>(call.has_aux ? call.aux.ld : call.d.ld);
  }
};

// g = acc * act'(aux); D = g; bias_grad[i] = sum_j g[i, j]. DACT and DACT_BGRAD share it: a null
// partials pointer turns the row sums off (ColReduction's EnableNullptr).
//
// The row sums: each tile's partial sums go to the workspace (`partials`, fp32, laid out as
// RowPartials says: cutlass_row_partial_sums.cuh) and add_row_partials_kernel adds them afterwards
// in a fixed order. CUTLASS's own LinCombDeEltActDePerRowBias lets the last CTA of each tile row add
// them instead, behind a __threadfence and a tile counter per row of tiles (reset by a
// cudaMemsetAsync on every call); on the H200 that cost DACT_BGRAD 10-60% over DACT
// (docs/dev/cutlass_backend.md, "The row sums").
template <class Element, class Activation>
struct BackwardActivationBgrad {
  static std::string label() {
    return std::string("backward_activation_bgrad(") + activation_name(Activation::id) + ")";
  }
  // ElementSource void: the beta * C term is left out (a kernel that does not read D's old values).
  template <class ElementSource>
  using OperationReading =
      DeEltActRowPartialSums<cutlass::layout::ColumnMajor, GradientTimesDerivative<Activation>::template Fn,
                             /*ElementOutput=*/Element, /*ElementAux=*/Element, ElementSource>;
  using Operation = OperationReading<Element>;
  using OperationWithoutSource = OperationReading<void>;
  static constexpr bool kSumsRows = true;
  template <class FusionArguments>
  static void set(FusionArguments& fusion, const GemmCall& call, float* partials) {
    using StrideAux = typename FusionArguments::StrideAux;
    fusion.aux_ptr = static_cast<const Element*>(call.aux.data);
    fusion.dAux = stride_with_leading_dimension<StrideAux>(call.aux.ld);
    fusion.partials_ptr = call.has_bias_grad ? partials : nullptr;
  }
};

// ---- the kernel ---------------------------------------------------------------------------------

// The fusion operation of a family, reading D's old values (C = D) or not.
template <class Family, bool kReadsSource>
struct FusionOperationOf {
  using type = typename Family::Operation;
};
template <class Family>
struct FusionOperationOf<Family, false> {
  using type = typename Family::OperationWithoutSource;
};

// The collective epilogue of a family in a configuration: CUTLASS's TMA epilogue with the family's
// fusion operation, or where the configuration stores without TMA, ours with the family's
// activation (a family without StoredActivation has no such configuration: instantiated_in).
template <class Config, class Family, class Element, class ElementC, bool kDirectStore = Config::kDirectStore>
struct CollectiveEpilogueOf {
  using LayoutD = cutlass::layout::ColumnMajor;
  using type = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape,
      typename Config::ClusterShape, typename Config::EpilogueTile,
      /*ElementAccumulator=*/float, /*ElementCompute=*/float,
      ElementC, LayoutD, kTmaAlignmentElements,
      /*ElementD=*/Element, LayoutD, kTmaAlignmentElements,
      typename Config::EpilogueSchedule, typename FusionOperationOf<Family, Config::kReadsSource>::type>::CollectiveOp;
};
template <class Config, class Family, class Element, class ElementC>
struct CollectiveEpilogueOf<Config, Family, Element, ElementC, true> {
  using type = DirectStoreCollectiveEpilogue<Element, typename Family::StoredActivation>;
};

template <epigemm_dtype_t dtype, OperandLayout layout, class Family, TileConfig tile>
struct CutlassGemm {
  using Config = ConfigOf<tile>;
  static_assert(shapes_agree<tile>(), "tile_shape_of and ConfigOf describe different tiles");
  using Element = typename ElementOf<dtype>::type;
  // void: no source, no shared memory for it (the configuration's kReadsSource: Cooperative,
  // Pingpong); such a kernel takes calls with beta = 0 only (check_can_implement).
  using ElementC = std::conditional_t<Config::kReadsSource, Element, void>;
  using LayoutA = typename LayoutTagsOf<layout>::A;
  using LayoutB = typename LayoutTagsOf<layout>::B;

  using CollectiveEpilogue = typename CollectiveEpilogueOf<Config, Family, Element, ElementC>::type;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, LayoutA, kTmaAlignmentElements,
      Element, LayoutB, kTmaAlignmentElements,
      /*ElementAccumulator=*/float, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Config::KernelSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                          CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using Arguments = typename Gemm::Arguments;

  static constexpr int64_t kTileM = cute::size<0>(typename Config::TileShape{});
  static constexpr int64_t kTileN = cute::size<1>(typename Config::TileShape{});

  // The workspace, from the caller's pointer rounded up to 16 bytes: the row partial sums first
  // (DACT_BGRAD with a bias gradient), then CUTLASS's own (its tile scheduler's) at offset
  // `cutlass`, a multiple of 16.
  struct WorkspaceLayout {
    bool sums_rows = false;
    RowPartials partials_shape;
    size_t cutlass = 0;  // offset of CUTLASS's workspace
  };
  static WorkspaceLayout workspace_layout(const GemmCall& call) {
    WorkspaceLayout parts;
    parts.sums_rows = Family::kSumsRows && call.has_bias_grad;
    if (parts.sums_rows) {
      parts.partials_shape = row_partials_of(call.gemm_m, call.gemm_n, kTileM, kTileN);
      parts.cutlass = (parts.partials_shape.bytes() + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
                      kWorkspaceAlignment;
    }
    return parts;
  }
  static char* aligned_workspace(const GemmCall& call) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(call.workspace);
    return reinterpret_cast<char*>((address + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment);
  }

  // The call as CUTLASS's arguments; workspace is not part of them (partials: where the row
  // partial sums go, or null). C is D itself (read only when beta != 0: CUTLASS skips the source
  // load when beta is 0, so a NaN D_old is never read); a kernel without a source has none.
  static Arguments arguments(const GemmCall& call, const DeviceFacts& device, TileOrder order,
                             float* partials = nullptr) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideC = typename GemmKernel::StrideC;
    using StrideD = typename GemmKernel::StrideD;
    Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = cute::make_shape(int(call.gemm_m), int(call.gemm_n), int(call.gemm_k), 1);
    args.mainloop.ptr_A = static_cast<const Element*>(call.a.data);
    args.mainloop.dA = stride_with_leading_dimension<StrideA>(call.a.ld);
    args.mainloop.ptr_B = static_cast<const Element*>(call.b.data);
    args.mainloop.dB = stride_with_leading_dimension<StrideB>(call.b.ld);
    if constexpr (Config::kReadsSource) args.epilogue.ptr_C = static_cast<const Element*>(call.d.data);
    args.epilogue.dC = stride_with_leading_dimension<StrideC>(call.d.ld);
    args.epilogue.ptr_D = static_cast<Element*>(call.d.data);
    args.epilogue.dD = stride_with_leading_dimension<StrideD>(call.d.ld);
    args.epilogue.thread.alpha = call.alpha;
    args.epilogue.thread.beta = call.beta;
    Family::set(args.epilogue.thread, call, partials);
    args.hw_info.device_id = device.device_id;
    args.hw_info.sm_count = device.sm_count;
    args.scheduler.max_swizzle_size = order.swizzle;
    return args;
  }

  static Status check_can_implement(const GemmCall& call, const DeviceFacts& device, TileOrder order) {
    if (!Config::kReadsSource && call.beta != 0.0f) {
      return error(EPIGEMM_STATUS_NOT_SUPPORTED, name(), " does not read D's old values: beta is ", call.beta,
                   "; expected 0");
    }
    const cutlass::Status status = Gemm::can_implement(arguments(call, device, order));
    if (status != cutlass::Status::kSuccess) {
      return error(EPIGEMM_STATUS_NOT_SUPPORTED, "CUTLASS's can_implement refuses ", name(), ": ",
                   cutlassGetStatusString(status));
    }
    return Status();
  }

  static size_t workspace_bytes(const GemmCall& call, const DeviceFacts& device, TileOrder order) {
    const WorkspaceLayout parts = workspace_layout(call);
    const size_t bytes = parts.cutlass + Gemm::get_workspace_size(arguments(call, device, order));
    return bytes == 0 ? 0 : bytes + kWorkspaceAlignment;
  }

  // The prepared launch (cutlass_kernels.hpp, PreparedLaunch): CUTLASS's initialized adapter (its
  // kernel parameters), its arguments and workspace where it keeps state there, and where the row
  // partial sums go.
  struct Prepared final : PreparedLaunch {
    Gemm gemm;
    Arguments args;
    void* cutlass_workspace = nullptr;  // null: CUTLASS keeps no state between launches
    bool sums_rows = false;
    RowPartials partials_shape;
    float* partials = nullptr;
    Element* bias_grad = nullptr;

    Status launch(void* stream_pointer) override {
      const cudaStream_t stream = static_cast<cudaStream_t>(stream_pointer);
      if (cutlass_workspace != nullptr) {
        // A stream-K scheduler's barriers count the partial tiles added and must start at 0 on
        // every launch (another call may have used the same workspace since, with other offsets).
        // Measured with such a kernel in the tiles lab (docs/dev/cutlass_backend.md, "Stream-K").
        const cutlass::Status reset = GemmKernel::initialize_workspace(args, cutlass_workspace, stream);
        if (reset != cutlass::Status::kSuccess) {
          return EPIGEMM_BACKEND_ERROR("CUTLASS workspace reset of ", name(), ": ", cutlassGetStatusString(reset));
        }
      }
      const cutlass::Status status = gemm.run(stream);
      if (status != cutlass::Status::kSuccess) {
        const cudaError_t launch_error = cudaGetLastError();
        return EPIGEMM_BACKEND_ERROR("CUTLASS launch of ", name(), ": ", cutlassGetStatusString(status), " (",
                                     cudaGetErrorString(launch_error), ")");
      }
      if (!sums_rows) return Status();
      // bias_grad has D's dtype here (cutlass_backend.cpp declines the others).
      return launch_add_row_partials(partials, partials_shape.tiles_n, partials_shape.rows,
                                     /*row_stride=*/partials_shape.rows_padded, bias_grad, dtype,
                                     /*dependent_launch=*/true, stream);
    }
  };

  static Status prepare(const GemmCall& call, const DeviceFacts& device, TileOrder order,
                        std::unique_ptr<PreparedLaunch>* prepared) {
    const WorkspaceLayout parts = workspace_layout(call);
    char* base = aligned_workspace(call);
    auto launch = std::make_unique<Prepared>();
    launch->sums_rows = parts.sums_rows;
    launch->partials_shape = parts.partials_shape;
    launch->partials = parts.sums_rows ? reinterpret_cast<float*>(base) : nullptr;
    launch->bias_grad = parts.sums_rows ? static_cast<Element*>(call.bias_grad.data) : nullptr;
    launch->args = arguments(call, device, order, launch->partials);
    // CUTLASS's initialize sets up its own workspace on the stream (where a scheduler keeps state
    // there, as stream-K's does) and builds the kernel parameters; every launch repeats the former
    // (initialize_workspace) and reuses the latter.
    const bool has_cutlass_workspace = Gemm::get_workspace_size(launch->args) > 0;
    launch->cutlass_workspace = has_cutlass_workspace ? base + parts.cutlass : nullptr;
    const cutlass::Status status =
        launch->gemm.initialize(launch->args, launch->cutlass_workspace, static_cast<cudaStream_t>(call.stream));
    if (status != cutlass::Status::kSuccess) {
      return EPIGEMM_BACKEND_ERROR("CUTLASS initialize of ", name(), ": ", cutlassGetStatusString(status));
    }
    *prepared = std::move(launch);
    return Status();
  }

  static Status run(const GemmCall& call, const DeviceFacts& device, TileOrder order) {
    std::unique_ptr<PreparedLaunch> prepared;
    EPIGEMM_RETURN_IF_ERROR(prepare(call, device, order, &prepared));
    return prepared->launch(call.stream);
  }

  // "bf16 TN forward_activation_aux(gelu_tanh) cooperative 128x128x64 cluster 1x1x1"
  static const char* name() {
    static const std::string text = std::string(dtype_name(dtype)) + " " + operand_layout_name(layout) +
                                    " " + Family::label() + " " + tile_config_name(tile);
    return text.c_str();
  }

  static const Kernel* entry() {
    static const Kernel kernel{name(), tile, &check_can_implement, &workspace_bytes, &prepare, &run};
    return &kernel;
  }
};

}  // namespace cutlass_backend
}  // namespace epigemm
