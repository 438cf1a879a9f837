// DACT_BGRAD's row sums in the cutlass backend, in two steps: the GEMM's epilogue writes each
// tile's partial row sums of g (fp32, unrounded) to the workspace, and add_row_partials_kernel
// (core/row_partial_sums.cuh, the cuda backend's too) then adds each row's partials in a fixed order
// and rounds once to bias_grad's dtype, launched as a programmatic dependent of the GEMM.
//
// The first step is CUTLASS's epilogue visitor tree for LinCombDeEltActDePerRowBias with its
// column-vector reduction (Sm90ColReduction: per row of D, over the columns) told not to do the
// final reduction itself (FinalReduction = false). With the final reduction, the last CTA to
// finish a row of tiles adds that row's partials, one thread per row, one partial after the other,
// which needs a __threadfence and an atomic tile counter per row of tiles after every tile (and a
// cudaMemsetAsync of the counters per call).
//
// The partials' layout is CUTLASS's (sm90_visitor_store_tma_warpspecialized.hpp, "compact m-major
// (round_nearest(M, CTA_M), ceil_div(N, CTA_N), L)"): the partial of row i over tile column t is at
// i + t * rows_padded, rows_padded = gemm_m rounded up to the tile's M extent. Included by the
// kernel translation units only (via cutlass_gemm.cuh).
//
// CUTLASS's column reduction tests every element's coordinates against the problem's bounds
// before it adds it (two compares and a predicate per element, where the short-k data gradients'
// epilogue is bound by its instruction stream). RowPartialSumsTestedPerTile below makes that test
// once per tile: on a tile whose columns all lie inside gemm_n it adds without the per-element
// test, elsewhere CUTLASS's tested add runs. A tile's rows past gemm_m are then added too, into the
// padding rows of the partials (rows_padded), which nothing reads; its columns past gemm_n must not
// be: TMA reads the operands' out-of-bounds rows as zeros, and a product with 0 is NaN where the
// other operand holds an Inf. Every partial that is read gets the same terms in the same order
// either way, so the results keep their bits (docs/dev/cutlass_backend.md, "The row sums' bounds
// check", has its measurement and its test).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/numeric_conversion.h>

#include "core/row_partial_sums.cuh"
#include "core/status.hpp"

namespace epigemm {
namespace cutlass_backend {

// g = act'(aux) * (alpha acc + beta C) into D, and the per-tile partial row sums of g into an fp32
// buffer (null: none). The fusion operation's tag: FusionCallbacks below is what it builds.
// ElementSource void: no beta * C term (a kernel that does not read D's old values).
template <class GmemLayoutTagAux, template <class> class ActivationFn, class ElementOutput, class ElementAux,
          class ElementSource = ElementOutput>
struct DeEltActRowPartialSums
    : cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<
          GmemLayoutTagAux, ActivationFn, ElementOutput, /*ElementCompute=*/float, ElementAux,
          /*ElementBias=*/ElementOutput, ElementSource, /*ElementScalar=*/float> {};

// The partial row sums of a call's D (gemm_m x gemm_n) over tiles of tile_m x tile_n.
struct RowPartials {
  int64_t rows = 0;         // gemm_m
  int64_t rows_padded = 0;  // gemm_m rounded up to a multiple of tile_m
  int64_t tiles_n = 0;      // tile columns: ceil(gemm_n / tile_n)
  size_t bytes() const { return size_t(rows_padded) * size_t(tiles_n) * sizeof(float); }
};

inline RowPartials row_partials_of(int64_t gemm_m, int64_t gemm_n, int64_t tile_m, int64_t tile_n) {
  RowPartials p;
  p.rows = gemm_m;
  p.rows_padded = (gemm_m + tile_m - 1) / tile_m * tile_m;
  p.tiles_n = (gemm_n + tile_n - 1) / tile_n;
  return p;
}

}  // namespace cutlass_backend
}  // namespace epigemm

namespace cutlass::epilogue::fusion {

// CUTLASS's column reduction as the row sums use it: per row of the tile, the sum over its columns
// of the fp32 g, written as per-tile partials (no final reduction: add_row_partials_kernel does
// it), every element tested against the problem's bounds.
template <class CtaTileShapeMNK>
using RowPartialSumsTestedPerElement =
    Sm90ColReduction<plus, plus, plus, /*Stages=*/0, CtaTileShapeMNK, /*ElementOutput=*/float,
                     /*ElementCompute=*/float, FloatRoundStyle::round_to_nearest, Stride<_1, _0, int64_t>,
                     /*Alignment=*/4, /*EnableNullptr=*/true, /*FinalReduction=*/false, /*VisitCheckOOB=*/true>;

// The same reduction with the bounds tested once per tile (the comment at the top of this file).
// Only the per-element add (visit) differs; the warp, shared-memory and global steps of the
// reduction are CUTLASS's.
template <class CtaTileShapeMNK>
struct RowPartialSumsTestedPerTile : RowPartialSumsTestedPerElement<CtaTileShapeMNK> {
  using TestedPerElement = RowPartialSumsTestedPerElement<CtaTileShapeMNK>;
  using TestedPerElement::TestedPerElement;

  template <class ArgsTuple>
  struct ConsumerStoreCallbacks : TestedPerElement::template ConsumerStoreCallbacks<ArgsTuple> {
    using Tested = typename TestedPerElement::template ConsumerStoreCallbacks<ArgsTuple>;

    CUTLASS_DEVICE
    ConsumerStoreCallbacks(Tested&& tested, bool columns_inside)
        : Tested(cute::move(tested)), columns_inside(columns_inside) {}

    // Every column of this tile is < gemm_n.
    bool columns_inside;

    template <typename ElementAccumulator, typename ElementInput, int FragmentSize>
    CUTLASS_DEVICE auto visit(Array<ElementAccumulator, FragmentSize> const& frg_acc, int epi_v, int epi_m,
                              int epi_n, Array<ElementInput, FragmentSize> const& frg_input) {
      if (!columns_inside) {
        return Tested::visit(frg_acc, epi_v, epi_m, epi_n, frg_input);
      }
      if (this->params.ptr_col == nullptr) {  // no row sums in this call (EnableNullptr)
        return frg_input;
      }
      // The tuple's second element is the thread's fp32 partials (tCrCol in CUTLASS's visit).
      Tensor partials_mn = get<1>(this->args_tuple)(_, _, _, epi_m, epi_n);
      NumericArrayConverter<float, ElementInput, FragmentSize, FloatRoundStyle::round_to_nearest> convert_input{};
      plus<float> add{};
      Array<float, FragmentSize> const g = convert_input(frg_input);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        float& partial = partials_mn(epi_v * FragmentSize + i);
        partial = add(partial, g[i]);
      }
      return frg_input;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    auto tested = TestedPerElement::template get_consumer_store_callbacks<ReferenceSrc>(args);
    // residue_cD = (gemm_m, gemm_n) minus the tile's first coordinate.
    const bool columns_inside = get<1>(args.residue_cD) >= get<1>(args.tile_shape_mnk);
    return ConsumerStoreCallbacks<decltype(tested.args_tuple)>(cute::move(tested), columns_inside);
  }
};

// The visitor tree of DeEltActRowPartialSums: CUTLASS's Sm90LinCombDeEltActDePerRowBias with the
// column-vector reduction (RowPartialSumsTestedPerTile) writing fp32 partials to partials_ptr.
template <int StagesC, int StagesD, int FragmentSize, bool ReuseSmemC, bool DelayTmaStore, class GmemLayoutTagAux,
          template <class> class ActivationFn, class ElementOutput, class ElementAux, class ElementSource,
          class CtaTileShapeMNK, class EpilogueTile, class SmemLayoutAtom, class CopyOpS2R>
struct FusionCallbacks<epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>,
                       epigemm::cutlass_backend::DeEltActRowPartialSums<GmemLayoutTagAux, ActivationFn, ElementOutput,
                                                                        ElementAux, ElementSource>,
                       CtaTileShapeMNK, EpilogueTile, SmemLayoutAtom, CopyOpS2R>
    : Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Identity, ElementOutput, float, FloatRoundStyle::round_to_nearest>,
              Sm90EVT<RowPartialSumsTestedPerTile<CtaTileShapeMNK>,
                      Sm90LinCombDeEltAct<CtaTileShapeMNK, EpilogueTile, StagesC,
                                          cutlass::gemm::TagToStrideC_t<GmemLayoutTagAux>, SmemLayoutAtom, CopyOpS2R,
                                          ActivationFn, /*ElementOutput=*/float, /*ElementCompute=*/float, ElementAux,
                                          ElementSource, /*ElementScalar=*/float>>> {
  using Impl =
      Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Identity, ElementOutput, float, FloatRoundStyle::round_to_nearest>,
              Sm90EVT<RowPartialSumsTestedPerTile<CtaTileShapeMNK>,
                      Sm90LinCombDeEltAct<CtaTileShapeMNK, EpilogueTile, StagesC,
                                          cutlass::gemm::TagToStrideC_t<GmemLayoutTagAux>, SmemLayoutAtom, CopyOpS2R,
                                          ActivationFn, float, float, ElementAux, ElementSource, float>>>;
  using Operation = epigemm::cutlass_backend::DeEltActRowPartialSums<GmemLayoutTagAux, ActivationFn, ElementOutput,
                                                                     ElementAux, ElementSource>;

  struct Arguments {
    float alpha = 1.0f;
    float beta = 0.0f;
    float const* alpha_ptr = nullptr;
    float const* beta_ptr = nullptr;
    using StrideAlpha = Stride<_0, _0, int64_t>;
    using StrideBeta = Stride<_0, _0, int64_t>;
    StrideAlpha dAlpha = {_0{}, _0{}, 0};
    StrideBeta dBeta = {_0{}, _0{}, 0};

    using ActivationArguments =
        typename Sm90Compute<ActivationFn, float, float, FloatRoundStyle::round_to_nearest>::Arguments;
    ActivationArguments activation = ActivationArguments();

    using StrideAux = cutlass::gemm::TagToStrideC_t<GmemLayoutTagAux>;
    ElementAux const* aux_ptr = nullptr;
    StrideAux dAux = {};

    // (rows_padded x tiles_n) fp32, cutlass_row_partial_sums.cuh; null: no row sums.
    float* partials_ptr = nullptr;

    operator typename Impl::Arguments() const {
      return {
          // unary: convert g to D's type
          {
              // unary: the row partial sums of g, passing g through
              {
                  // binary: g = activation'(aux) * (beta C + alpha acc)
                  {
                      {{beta}, {beta_ptr}, {dBeta}},     // beta
                      {},                                // C
                      {{{alpha}, {alpha_ptr}, {dAlpha}},  // alpha
                       {},                               // acc
                       {}},                              // alpha * acc
                      {}                                 // beta * C + alpha * acc
                  },
                  {aux_ptr, ElementAux(0), dAux},  // aux
                  activation                       // the gradient times the derivative
              },
              {partials_ptr, 0.0f, Stride<_1, _0, int64_t>{}}  // the reduction: no final step
          },
          {}  // the conversion
      };
    }
  };

  using Impl::Impl;
};

}  // namespace cutlass::epilogue::fusion
