// An epilogue that stores D (and aux) without TMA, for the calls whose D, aux or bias breaks the
// rules of CUTLASS's TMA epilogue (a 16-byte aligned base address and leading dimension, a
// contiguous extent that is a multiple of 8): a GPT-2 output layer with out_features = 50257, a
// layer of 4094 outputs. cuBLAS runs such calls 3-7x slower than the aligned ones next to them
// (H200, bf16: 89-250 TFLOPS against 500-800), and our TMA kernels cannot run them at all.
//
// Each consumer thread computes the elements its wgmma accumulator fragment holds and writes them,
// rounded to D's type, into a staged copy of the CTA tile in shared memory (SharedStorage); then the
// warp group writes the tile out column by column, each warp a whole column of 128 rows (256 bytes)
// at a time, in the widest pieces that D's address and leading dimension allow (8, 4 or 2 bytes).
// Written straight from the fragment, a warp's store covers 16 bytes of each of four columns, and
// such stores ran at about 0.6 TB/s on H100 and H200 whatever the shape: they, not the main loop,
// set the time of these calls. Any leading dimension and any base address of D's element type is
// taken; the bounds are tested where the tile is written out. docs/dev/cutlass_backend.md,
// "Unaligned matrices: the epilogue from the registers" and "Staged stores for the unaligned
// epilogue".
//
// What it computes is the forward family's algebra (cutlass_gemm.cuh): with acc the fp32
// accumulator of A B,
//   z = alpha acc + beta D_old (read only where beta != 0) + bias[i] (a null bias: nothing added);
//   aux[i, j] = z (a null aux: no store); D[i, j] = Activation::forward(z)
// in the order of docs/conventions.md (alpha and beta inside acc, then the bias). With the identity
// and no aux it is DEFAULT and BIAS. The activation is the functor of core/epilogue_math.hpp. With
// an aux, z is computed twice from the same registers (once for aux, once for D): the same
// operations on the same values, so D is the activation of the very z that aux holds, unrounded.
//
// It has the interface of CUTLASS's DefaultEpilogue (cutlass/epilogue/collective/
// default_epilogue.hpp), which CUTLASS's Sm90TmaWarpSpecializedAdapter turns into an epilogue of its
// warp-specialized sm90 kernels (ours: the ping-pong kernel with a TMA main loop; A and B that TMA
// cannot load are copied first, cutlass_staged_operands.hpp): no pipeline of its own, the stores
// issued by the consumer warp groups themselves. The ping-pong kernel orders the two warp groups'
// epilogues (its math warp group order barrier), so one staged tile serves both.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/epilogue/dispatch_policy.hpp>
#include <cutlass/numeric_conversion.h>

namespace epigemm {
namespace cutlass_backend {

template <class Element, class Activation>
class DirectStoreEpilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;

  // What CUTLASS's device adapter reads of a thread operation (the element types).
  struct ThreadEpilogueOp {
    using ElementOutput = Element;
    using ElementAccumulator = float;
    using ElementCompute = float;
    using ElementC = Element;
    using ElementD = Element;
    static constexpr int kCount = 1;
  };
  using ElementOutput = Element;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  // C is D itself (D_old), column-major like D and aux: (M, N, L) strides (1, ld, 0).
  using ElementC = Element;
  using ElementD = Element;
  using StrideC = cute::Stride<cute::_1, int64_t, int64_t>;
  using StrideD = StrideC;
  // No TMA, no tiled copy: CUTLASS's adapter reads the alignment off these (void: one element).
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  // The staged tile: one CTA tile (128 x 128) of D or aux in D's element type, column-major like D,
  // each column padded by 8 elements so that a warp's stores of its fragment (8 rows of each of 8
  // columns) fall on 16 different banks. 34 KB, taken from the main loop's stages
  // (StageCountAutoCarveout in cutlass_gemm.cuh).
  static constexpr int kStagedRows = 128;
  static constexpr int kStagedColumns = 128;
  static constexpr int kStagedLd = kStagedRows + 8;
  struct SharedStorage {
    alignas(16) Element tile[kStagedColumns * kStagedLd];
  };
  using TensorStorage = SharedStorage;

  // The epilogue's own arguments, with the members the families' set() write
  // (cutlass_gemm.cuh: bias_ptr, aux_ptr, dAux) and alpha and beta.
  struct FusionArguments {
    using StrideAux = StrideD;
    float alpha = 1.0f;
    float beta = 0.0f;
    const Element* bias_ptr = nullptr;
    Element* aux_ptr = nullptr;
    StrideAux dAux{};
  };

  struct Arguments {
    FusionArguments thread{};
    const Element* ptr_C = nullptr;
    StrideC dC{};
    Element* ptr_D = nullptr;
    StrideD dD{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  // Every extent, leading dimension and base address of Element is stored correctly. C must be D
  // itself (or absent): D's old values are read where D is written.
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr_C == nullptr || (args.ptr_C == args.ptr_D && cute::get<1>(args.dC) == cute::get<1>(args.dD));
  }

  CUTLASS_HOST_DEVICE
  DirectStoreEpilogue(Params const& params, SharedStorage const& = SharedStorage()) : params_(params) {}

  // One output tile: blk_shape_mnk is the CTA tile (BLK_M, BLK_N, BLK_K), blk_coord_mnkl its
  // coordinates in tiles, accumulators this thread's fragment of it as tiled_mma partitions it
  // (for a 64 x N wgmma warp group: rows 16 w + l / 4 and 8 more, columns 2 (l % 4) + {0, 1} + 8 j,
  // w the warp and l the lane). The problem's extents fit an int (cutlass_backend.cpp).
  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_mnk,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char* smem_buf) {
    using namespace cute;
    static_assert(is_static<BlockShapeMNK>::value, "the CTA tile must be static");
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    static_assert(sizeof(Element) == 2, "a 16-bit element type (the bias is read as its bits)");

    const int M = int(get<0>(problem_shape_mnkl));
    const int N = int(get<1>(problem_shape_mnkl));
    const int m_coord = int(get<0>(blk_coord_mnkl));
    const int n_coord = int(get<1>(blk_coord_mnkl));
    constexpr int kTileM = int(size<0>(BlockShapeMNK{}));
    constexpr int kTileN = int(size<1>(BlockShapeMNK{}));

    // The (row, column) in the whole problem of each of this thread's elements, in the
    // accumulator's order: this thread's first element's plus a constant per element (the
    // fragment's layout is static), so that an element's address is one base per thread plus
    // (row offset + column offset x ld), and each column's product is made where it is used: the
    // consumer warp groups hold the accumulators (64 or 128 registers) while the epilogue runs.
    auto thread_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tile_coordinates = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_mnk),
                                         make_coord(m_coord, n_coord));                        // (BM, BN)
    Tensor coordinates = thread_mma.partition_C(tile_coordinates);                            // (VEC, MMA_M, MMA_N)
    static_assert(decltype(size(coordinates))::value == decltype(size(accumulators))::value,
                  "one stored element per accumulator");
    const int m_first = get<0>(coordinates(0));
    const int n_first = get<1>(coordinates(0));
    // A tile wholly past the problem's end: the persistent scheduler hands out the tiles of the
    // grid rounded up to its tile order's runs (cutlass_tile_config.hpp, scheduled_grid).
    if (int64_t(m_coord) * kTileM >= M || int64_t(n_coord) * kTileN >= N) return;

    static_assert(kTileM == kStagedRows && kTileN == kStagedColumns, "the staged tile is the CTA tile");

    const int64_t ld_d = get<1>(params_.dD);
    const int64_t ld_aux = get<1>(params_.thread.dAux);
    const Element* const bias_first = params_.thread.bias_ptr == nullptr ? nullptr : params_.thread.bias_ptr + m_first;
    // This thread's first element's place in the staged tile, and the tile's first element in D
    // and aux.
    const int m_tile = m_coord * kTileM, n_tile = n_coord * kTileN;
    Element* const staged = reinterpret_cast<Element*>(smem_buf);
    Element* const staged_first = staged + ((m_first - m_tile) + (n_first - n_tile) * kStagedLd);
    Element* const d_tile = params_.ptr_D + (m_tile + n_tile * ld_d);
    Element* const aux_tile = params_.thread.aux_ptr == nullptr ? nullptr : params_.thread.aux_ptr + (m_tile + n_tile * ld_aux);
    const int tile_rows = min(kTileM, M - m_tile), tile_columns = min(kTileN, N - n_tile);

    const float alpha = params_.thread.alpha, beta = params_.thread.beta;
    const bool reads_source = beta != 0.0f;
    const cutlass::NumericConverter<Element, float> to_element;
    const cutlass::NumericConverter<float, Element> to_float;

    // The fragment of an sm90 wgmma accumulator, ((2, 2, N / 8), MMA_M, MMA_N): the first value
    // mode steps one column, the second 8 rows, the third 8 columns; MMA_M steps 64 rows and MMA_N
    // a whole atom's columns. So a thread's rows are set by the second value mode and MMA_M alone,
    // and their bias is read once, before the stores (4 values in a ping-pong warp group's
    // 128 x 128 tile, 2 in a cooperative one's half).
    static_assert(rank(FrgLayout{}) == 3 && rank<0>(FrgLayout{}) == 3 && size<0, 0>(FrgLayout{}) == 2 &&
                      size<0, 1>(FrgLayout{}) == 2,
                  "an sm90 wgmma accumulator fragment, ((2, 2, N / 8), MMA_M, MMA_N)");
    constexpr int kMmaM = int(size<1>(FrgLayout{}));
    constexpr int kMmaN = int(size<2>(FrgLayout{}));
    constexpr int kColumnSteps = int(size<0, 2>(FrgLayout{}));
    const bool adds_bias = bias_first != nullptr;
    float bias_of_row[2][kMmaM];
    CUTLASS_PRAGMA_UNROLL
    for (int mma_m = 0; mma_m < kMmaM; ++mma_m) {
      CUTLASS_PRAGMA_UNROLL
      for (int row_step = 0; row_step < 2; ++row_step) {
        const int row = get<0>(coordinates(make_coord(make_coord(0, row_step, 0), mma_m, 0))) - m_first;
        const bool row_inside = m_first + row < M;
        bias_of_row[row_step][mma_m] = adds_bias && row_inside ? to_float(bias_first[row]) : 0.0f;
      }
    }

    // One element into the staged tile: z = alpha acc + beta D_old + bias[row], then z itself
    // (aux) or act(z) (D). D_old is the staged tile's value at the element's place (read in before,
    // where beta != 0), which the same thread then overwrites.
    auto stage = [&](auto element, float bias, auto activated) {
      const int row = get<0>(coordinates(element)) - m_first;     // a constant once unrolled
      const int column = get<1>(coordinates(element)) - n_first;  // likewise
      Element& place = staged_first[row + column * kStagedLd];
      float z = alpha * accumulators(element);
      if (reads_source) z += beta * to_float(place);
      if (adds_bias) z += bias;
      place = to_element(decltype(activated)::value ? Activation::forward(z) : z);
    };
    // Every element in the fragment's order; `tested`: only those inside the problem (a tile inside
    // it, all but the last row and column of tiles, runs the loop without the test). The elements
    // past the end are not staged, and not written out.
    auto stage_all = [&](auto tested, auto activated) {
      CUTLASS_PRAGMA_UNROLL
      for (int mma_n = 0; mma_n < kMmaN; ++mma_n) {
        CUTLASS_PRAGMA_UNROLL
        for (int mma_m = 0; mma_m < kMmaM; ++mma_m) {
          CUTLASS_PRAGMA_UNROLL
          for (int column_step = 0; column_step < kColumnSteps; ++column_step) {
            CUTLASS_PRAGMA_UNROLL
            for (int row_step = 0; row_step < 2; ++row_step) {
              CUTLASS_PRAGMA_UNROLL
              for (int column = 0; column < 2; ++column) {
                const auto element = make_coord(make_coord(column, row_step, column_step), mma_m, mma_n);
                if (!decltype(tested)::value || elem_less(coordinates(element), make_coord(M, N))) {
                  stage(element, bias_of_row[row_step][mma_m], activated);
                }
              }
            }
          }
        }
      }
    };
    const bool whole_tile = tile_rows == kTileM && tile_columns == kTileN;
    // The warp group's 128 threads: the staged tile is complete, or has been written out.
    auto staged_tile_barrier = [] {
      cutlass::arch::NamedBarrier::sync(kWarpGroupThreads, cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
    };
    // Stage, then write out: aux (z) first, then D (act(z)). C is D itself (cutlass_gemm.cuh's
    // arguments): where beta != 0, D's old values are read into the staged tile before each of the
    // two, and D is written only after both.
    auto stage_and_write = [&](auto activated, Element* tile, int64_t ld) {
      if (reads_source) {
        copy_tile</*kToStaged=*/true>(staged, d_tile, ld_d, tile_rows, tile_columns, thread_idx);
        staged_tile_barrier();
      }
      if (whole_tile) {
        stage_all(cute::false_type{}, activated);
      } else {
        stage_all(cute::true_type{}, activated);
      }
      staged_tile_barrier();
      copy_tile</*kToStaged=*/false>(staged, tile, ld, tile_rows, tile_columns, thread_idx);
      staged_tile_barrier();  // before the staged tile is written again (by this or the other group)
    };
    if (aux_tile != nullptr) stage_and_write(cute::false_type{}, aux_tile, ld_aux);
    stage_and_write(cute::true_type{}, d_tile, ld_d);
  }

 private:
  static constexpr int kWarpGroupThreads = 128;

  // Copies the staged tile's first `rows` x `columns` elements to `matrix` (kToStaged false: the
  // tile's first element there, leading dimension ld), or from it (kToStaged true): warp w copies
  // columns w, w + 4, ..., each lane kVector consecutive rows of 32 kVector at a time, so that one
  // instruction covers 64-256 consecutive bytes of a column of the matrix. kVector is the widest of
  // 4, 2 and 1 elements that the matrix's address and ld keep aligned (the tile's first row is a
  // multiple of 128, so every piece is).
  template <bool kToStaged, int kVector>
  CUTLASS_DEVICE static void copy_tile_pieces(Element* staged, Element* matrix, int64_t ld, int rows, int columns,
                                              int thread_idx) {
    using Piece = std::conditional_t<kVector == 4, uint2, std::conditional_t<kVector == 2, uint32_t, uint16_t>>;
    static_assert(sizeof(Piece) == kVector * sizeof(Element), "a piece is kVector elements");
    const int warp = thread_idx / 32, lane = thread_idx % 32;
    constexpr int kWarps = kWarpGroupThreads / 32;
    for (int column = warp; column < columns; column += kWarps) {
      Element* const staged_column = staged + column * kStagedLd;
      Element* const matrix_column = matrix + column * ld;
      Element* const to = kToStaged ? staged_column : matrix_column;
      const Element* const from = kToStaged ? matrix_column : staged_column;
      CUTLASS_PRAGMA_UNROLL
      for (int row = lane * kVector; row < kStagedRows; row += 32 * kVector) {
        if (row + kVector <= rows) {
          *reinterpret_cast<Piece*>(to + row) = *reinterpret_cast<const Piece*>(from + row);
        } else {
          CUTLASS_PRAGMA_UNROLL
          for (int e = 0; e < kVector; ++e) {
            if (row + e < rows) to[row + e] = from[row + e];
          }
        }
      }
    }
  }
  template <bool kToStaged>
  CUTLASS_DEVICE static void copy_tile(Element* staged, Element* matrix, int64_t ld, int rows, int columns,
                                       int thread_idx) {
    const auto address = reinterpret_cast<uintptr_t>(matrix);
    if (address % (4 * sizeof(Element)) == 0 && ld % 4 == 0) {
      copy_tile_pieces<kToStaged, 4>(staged, matrix, ld, rows, columns, thread_idx);
    } else if (address % (2 * sizeof(Element)) == 0 && ld % 2 == 0) {
      copy_tile_pieces<kToStaged, 2>(staged, matrix, ld, rows, columns, thread_idx);
    } else {
      copy_tile_pieces<kToStaged, 1>(staged, matrix, ld, rows, columns, thread_idx);
    }
  }

  Params params_;
};

// The collective epilogue the kernels take: ours, in CUTLASS's adapter for the warp-specialized
// sm90 kernels.
template <class Element, class Activation>
using DirectStoreCollectiveEpilogue =
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<DirectStoreEpilogue<Element, Activation>>;

}  // namespace cutlass_backend
}  // namespace epigemm
