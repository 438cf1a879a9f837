// The cpu backend's driver (cpu_backend.hpp): panels of D, the GEMM of each panel, its epilogue,
// the workspace, the threads. Formulas: docs/conventions.md; design and numbers:
// docs/dev/cpu_backend.md.
//
// D is cut into panels of columns: one panel (all of gemm_n) when A, B and D are fp32, which the
// benchmark measured fastest here (oneDNN repacks op(A) for every GEMM call, and the 300 MB L3
// keeps D cached for the epilogue anyway); panels of kWidenedPanelColumns when fp16/bf16 storage
// goes through the workspace. For a panel of w columns starting at column j0
// (D[:, j0:j0+w], gemm_m x w):
//   1. BGRADB: bias_grad[j0:j0+w] = column sums of op(B)[:, j0:j0+w] (k x w), read from B;
//   2. acc = alpha op(A) op(B)[:, j0:j0+w] + beta D_old[:, j0:j0+w], in fp32: in D itself when D
//      is fp32, else in a gemm_m x w workspace panel (D_old widened into it when beta != 0);
//      fp16/bf16 A and B are widened block by block (gemm_k blocks of conversion_k_block) into the
//      workspace and the GEMM accumulates over the blocks; an alpha = 1, beta = 0 GEMM on oneDNN
//      runs dnnl_sgemm with beta = 0 or, where onednn_overwrite_for_shape picks it, the matmul
//      primitive, which also adds the (fp32 or widened) bias; a forward epilogue that writes an
//      fp32 aux may keep acc there instead (ForwardAuxPlan);
//   3. the rest of the epilogue on the panel, split over the threads by columns (by rows for
//      DGELU_BGRAD, whose row sums stay on one thread).
// The GEMM engine's own threads run step 2; steps 1 and 3 are OpenMP loops, so the two never
// run at the same time.
#include "backends/cpu/cpu_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/epilogue_kernels.hpp"
#include "core/names.hpp"
#include "core/numeric.hpp"
#include "core/validate.hpp"

namespace epigemm {
namespace {

constexpr size_t kAlignment = 64;
// Epilogue tasks per thread (static schedule): a few, so that uneven tails balance out.
constexpr int64_t kTasksPerThread = 4;
// Below this many elements a step runs on the calling thread alone.
constexpr int64_t kParallelElements = 1 << 15;
// A call whose GEMM does at most this many multiply-adds (about 101^3), and whose operands each
// hold fewer than kParallelElements elements, runs on the calling thread alone (cpu_call_threads).
// Measured on the 2-core machine with the probe given the cores (SCHED_FIFO): one thread as fast
// or faster up to 96^3 (64^3 fprop: 8-17 us against 14-21 us on two), two threads faster from
// 112^3 (32-38 us against 40-44 us). And a call without an OpenMP team never waits for a second
// thread that the OS has descheduled: on a busy machine a 64^3 call took 28-32 ms on two threads
// and 8-17 us on one (docs/dev/cpu_backend.md, "Threads on a busy machine").
constexpr int64_t kOneThreadMultiplyAdds = int64_t(1) << 20;

size_t round_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// An engine call whose C has one row or one column is a matrix-vector product, and the engines add
// its gemm_k terms into each element of C one after another: with 2^25 terms of 0.5, C stalled at
// 2^23, where 0.5 is half an ulp (a 50% error; dnnl_sgemm, fp32 and fp16 operands, every
// transpose but one). Such a product over a longer gemm_k is summed in blocks of at most
// kVectorShapedDepth terms (fp32 operands; the conversion block for fp16/bf16 ones), each block
// computed into a buffer and then added to acc: at most one block's terms in a row, and one
// addition per block. The buffer: for fp16/bf16 operands a workspace region that holds the whole
// vector (one engine call per block, as before: a 2048-element slice per call made the bf16
// (1, 16384, 4096) fprop 22% slower here); for fp32 ones, which need no workspace, kVectorSlice
// elements on the stack, the vector cut into slices of that length.
constexpr int64_t kVectorShapedDepth = 4096;
constexpr int64_t kVectorSlice = 2048;

// acc (rows x cols, ld_acc; rows == 1 or cols == 1) = alpha op(A) op(B) (+ beta acc) where
// `first`, else acc += alpha op(A) op(B): op(A) rows x depth and op(B) depth x cols as in
// cpu_sgemm, computed into `block` (`capacity` floats) a slice of the vector at a time, then added.
Status add_vector_shaped_block(CpuGemmEngine engine, epigemm_op_t transa, epigemm_op_t transb,
                               int64_t rows, int64_t cols, int64_t depth, float alpha,
                               const float* a, int64_t lda, const float* b, int64_t ldb, bool first,
                               float beta, float* acc, int64_t ld_acc, float* block, int64_t capacity) {
  const bool one_row = rows == 1;
  const int64_t extent = one_row ? cols : rows;
  for (int64_t s0 = 0; s0 < extent; s0 += capacity) {
    const int64_t length = std::min(capacity, extent - s0);
    // One row: the columns s0.. of op(B); one column: the rows s0.. of op(A).
    const float* a_slice = one_row ? a : a + (transa == EPIGEMM_OP_N ? s0 : s0 * lda);
    const float* b_slice = one_row ? b + (transb == EPIGEMM_OP_N ? s0 * ldb : s0) : b;
    EPIGEMM_RETURN_IF_ERROR(cpu_sgemm(engine, transa, transb, one_row ? 1 : length, one_row ? length : 1,
                                      depth, alpha, a_slice, lda, b_slice, ldb, 0.0f, block,
                                      one_row ? 1 : length));
    for (int64_t i = 0; i < length; ++i) {
      float& target = one_row ? acc[(s0 + i) * ld_acc] : acc[s0 + i];
      if (!first) {
        target += block[i];
      } else {
        target = beta == 0.0f ? block[i] : block[i] + beta * target;  // beta = 0 does not read acc
      }
    }
  }
  return Status();
}

// Byte offset of element (row, col) of a column-major matrix.
char* element(const Matrix& m, int64_t row, int64_t col) {
  return static_cast<char*>(m.data) + (row + col * m.ld) * int64_t(dtype_size(m.dtype));
}

// The workspace of one call, in the order the regions are laid out (each 64-byte aligned). It
// depends on the sizes, dtypes and options only, never on the number of threads.
struct WorkspacePlan {
  int64_t panel_columns = 1;
  int64_t k_block = 1;
  size_t acc_panel = 0;     // gemm_m x panel fp32, when D is fp16/bf16
  size_t a_block = 0;       // op(A) block: gemm_m x k_block fp32, when A is fp16/bf16
  size_t b_block = 0;       // op(B) block: k_block x panel fp32, when B is fp16/bf16
  size_t bias = 0;          // gemm_m fp32, when the bias is fp16/bf16
  size_t sums = 0;          // bias-gradient sums in fp32, when bias_grad is fp16/bf16
  size_t vector_block = 0;  // one k block's matrix-vector product, fp32 (add_vector_shaped_block)

  size_t regions() const { return acc_panel + a_block + b_block + bias + sums + vector_block; }
  size_t vector_block_offset() const { return acc_panel + a_block + b_block + bias + sums; }
  // The caller's pointer may be unaligned: one alignment's worth of slack.
  size_t total() const { return regions() == 0 ? 0 : regions() + kAlignment; }
};

WorkspacePlan plan_workspace(const GemmCall& call, const CpuBackendOptions& options) {
  WorkspacePlan plan;
  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  const bool all_fp32 = call.a.dtype == EPIGEMM_DTYPE_F32 && call.d.dtype == EPIGEMM_DTYPE_F32;
  const int64_t wanted = options.panel_columns > 0 ? options.panel_columns
                         : all_fp32               ? n
                                                  : kWidenedPanelColumns;
  plan.panel_columns = std::max<int64_t>(1, std::min(n, wanted));
  plan.k_block = std::max<int64_t>(1, std::min(k, options.conversion_k_block));
  const bool has_product = m > 0 && n > 0;
  if (has_product && call.d.dtype != EPIGEMM_DTYPE_F32) {
    plan.acc_panel = round_up(size_t(m * plan.panel_columns) * sizeof(float));
  }
  if (has_product && k > 0 && call.a.dtype != EPIGEMM_DTYPE_F32) {
    plan.a_block = round_up(size_t(m * plan.k_block) * sizeof(float));
    plan.b_block = round_up(size_t(plan.k_block * plan.panel_columns) * sizeof(float));
    // A panel of one row or one column (the last one of one column when n % panel = 1), summed
    // over more than one k block: room for one block's product of the longest such vector.
    const bool vector_panel = m == 1 || n == 1 || (n > plan.panel_columns && n % plan.panel_columns == 1);
    if (vector_panel && k > plan.k_block) {
      plan.vector_block = round_up(size_t(m == 1 ? plan.panel_columns : m) * sizeof(float));
    }
  }
  const EpilogueParts parts = call.parts();
  if (has_product && parts.reads_bias() && call.bias.dtype != EPIGEMM_DTYPE_F32) {
    plan.bias = round_up(size_t(m) * sizeof(float));
  }
  if (parts.writes_bias_grad() && call.bias_grad.dtype != EPIGEMM_DTYPE_F32) {
    plan.sums = round_up(size_t(call.bias_grad_length()) * sizeof(float));
  }
  return plan;
}

// Sets the OpenMP thread count of the calling thread for the duration of a call (the GEMM engine
// and the epilogue loops both follow it), and puts the caller's back afterwards.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads) : saved_(omp_get_max_threads()), set_(threads > 0) {
    if (set_) omp_set_num_threads(threads);
  }
  ~OmpThreadsScope() {
    if (set_) omp_set_num_threads(saved_);
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
  bool set_;
};

}  // namespace

int cpu_call_threads(const GemmCall& call, int requested) {
  if (requested > 0) return requested;
  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  // Each product is formed only when both factors are below kParallelElements (no overflow).
  auto below = [](int64_t a, int64_t b) {
    return a == 0 || b == 0 || (a < kParallelElements && b < kParallelElements && a * b < kParallelElements);
  };
  const bool small = below(m, n) && below(n, k) && below(m, k) && m * n * k <= kOneThreadMultiplyAdds;
  return small ? 1 : 0;
}

namespace {

// Why the call's storage is not element-aligned ("" when it is): the first operand whose data
// pointer is not a multiple of its element size. Any alignment is correct by the contract
// (docs/conventions.md, "What a call guarantees"), and the reference backend, which reads and
// writes every element through memcpy, runs such calls; this backend declines them. It hands fp32
// operands to the BLAS engines as float*, whose kernels may assume at least element alignment (it
// is not documented either way), and its own kernels walk fp32/fp16/bf16 elements through typed
// pointers. Storage off its element size comes from no framework allocator, only from byte
// offsets into a buffer, so the slower path costs nothing in practice.
std::string misaligned_operand(const GemmCall& call) {
  const std::string off = operand_off_its_element_size(call);
  return off.empty() ? off : off + "; the cpu backend needs element-aligned storage";
}

// The requested build of the kernels, or the widest below it that this CPU runs.
const EpilogueKernels& kernels_for(CpuKernelBuild build) {
  if (build == CpuKernelBuild::widest) return select_epilogue_kernels();
  if (build == CpuKernelBuild::avx2 && avx2_epilogue_kernels() != nullptr) {
    return *avx2_epilogue_kernels();
  }
  return scalar_epilogue_kernels();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : options_(options),
        kernels_(kernels_for(options.kernels)) {}

  epigemm_backend_t id() const override { return EPIGEMM_BACKEND_CPU; }
  bool usable() const override { return cpu_gemm_engine_available(options_.engine); }
  Support supports(const GemmCall& call) const override {
    if (call.memory() != EPIGEMM_MEMORY_HOST) {
      return Support::no("the cpu backend runs on host memory only");
    }
    const std::string misaligned = misaligned_operand(call);
    if (!misaligned.empty()) return Support::no(misaligned);
    const int64_t largest = std::max({call.gemm_m, call.gemm_n, call.gemm_k, call.a.ld,
                                      call.b.ld, call.d.ld});
    if (!cpu_gemm_engine_fits(options_.engine, largest)) {
      return Support::no(std::string(cpu_gemm_engine_name(options_.engine)) +
                         " takes 32-bit sizes and leading dimensions");
    }
    return Support::yes();
  }
  size_t workspace_bytes(const GemmCall& call) const override {
    return plan_workspace(call, options_).total();
  }
  // Above the reference backend (0): this is the CPU's fast path.
  int auto_priority(const GemmCall&) const override { return 10; }
  std::string description() const override;
  Status run(const GemmCall& call) override;

 private:
  void sum_lines(const Matrix& x, bool lines_are_columns, int64_t first, int64_t count,
                 int64_t length, float* sums) const;
  Status panel_product(const GemmCall& call, const WorkspacePlan& plan, char* workspace,
                       int64_t j0, int64_t width, float* acc, int64_t ld_acc,
                       const float* gemm_bias, bool* bias_added) const;
  void widen_blocks(const GemmCall& call, int64_t j0, int64_t width, int64_t p0, int64_t depth,
                    float* a_block, float* b_block) const;

  CpuBackendOptions options_;
  const EpilogueKernels& kernels_;
};

// "GEMM engine oneDNN 2.6.3 (OpenMP runtime); epilogue kernels avx512; up to 2 OpenMP threads
// per call (...); OMP_WAIT_POLICY unset".
std::string CpuBackend::description() const {
  std::string text = "GEMM engine " + cpu_gemm_engine_version(options_.engine) +
                     "; epilogue kernels " + kernels_.name;
  if (!usable()) return "not usable here: " + text;
  if (options_.threads > 0) {
    text += "; " + std::to_string(options_.threads) + " OpenMP threads per call";
  } else {
    text += "; up to " + std::to_string(omp_get_max_threads()) +
            " OpenMP threads per call (the caller's omp_get_max_threads; 1 for calls of at most "
            "2^20 multiply-adds)";
  }
  // Whether idle OpenMP threads spin or sleep matters on a busy machine (docs/cpu_backend.md).
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  text += std::string("; OMP_WAIT_POLICY ") + (wait_policy != nullptr ? wait_policy : "unset");
  return text;
}

// The bias gradient of an operand: sums[l] = the sum of line first + l of x over its `length`
// elements, l < count, where a line is a column of x (lines_are_columns: contiguous) or a row
// (strided by ld). BGRADB sums the columns of op(B) (B's columns when transb = N, its rows when
// T), BGRADA the rows of op(A) (A's rows when transa = N, its columns when T). Each sum is taken
// by one thread in a fixed order, so the result does not depend on the thread count.
void CpuBackend::sum_lines(const Matrix& x, bool lines_are_columns, int64_t first, int64_t count,
                           int64_t length, float* sums) const {
  if (length == 0) {  // empty sums; x may have no data at all
    std::fill(sums, sums + count, 0.0f);
    return;
  }
  const size_t size = dtype_size(x.dtype);
  const bool parallel = count * length >= kParallelElements;
  if (lines_are_columns) {
    // Column l is contiguous: tasks of 16 columns.
    constexpr int64_t kColumnsPerTask = 16;
    const int64_t tasks = (count + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t begin = t * kColumnsPerTask;
      const int64_t columns = std::min(kColumnsPerTask, count - begin);
      const char* column = static_cast<const char*>(x.data) + (first + begin) * x.ld * int64_t(size);
      kernels_.sum_columns(column, x.dtype, x.ld, length, columns, sums + begin);
    }
    return;
  }
  // Row l is strided (e.g. the wgrad's dY as out_features x tokens). One task per thread, of a
  // multiple of 64 rows, each reading long contiguous runs of every column (sum_rows); tasks of
  // 16 rows read one cache line per column and ran at a third of the speed.
  const int64_t team = std::max(1, omp_get_max_threads());
  const int64_t per_task = std::max<int64_t>(64, (count + team - 1) / team + 63) / 64 * 64;
  const int64_t tasks = (count + per_task - 1) / per_task;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t begin = t * per_task;
    const int64_t rows = std::min(per_task, count - begin);
    const char* row = static_cast<const char*>(x.data) + (first + begin) * int64_t(size);
    kernels_.sum_rows(row, x.dtype, x.ld, rows, length, sums + begin);
  }
}

// Widens op(A)[:, p0:p0+depth] and op(B)[p0:p0+depth, j0:j0+width] to fp32, each keeping its
// stored orientation:
//   A as stored, transa = N: gemm_m x depth, ld gemm_m;  transa = T: depth x gemm_m, ld depth;
//   B as stored, transb = N: depth x width, ld depth;    transb = T: width x depth, ld width.
void CpuBackend::widen_blocks(const GemmCall& call, int64_t j0, int64_t width, int64_t p0,
                              int64_t depth, float* a_block, float* b_block) const {
  const int64_t m = call.gemm_m;
  const bool a_n = call.transa == EPIGEMM_OP_N, b_n = call.transb == EPIGEMM_OP_N;
  const int64_t a_columns = a_n ? depth : m, a_rows = a_n ? m : depth;
  const int64_t b_columns = b_n ? width : depth, b_rows = b_n ? depth : width;
  const int64_t columns = a_columns + b_columns;
#pragma omp parallel for schedule(static) if ((m + width) * depth >= kParallelElements)
  for (int64_t c = 0; c < columns; ++c) {
    if (c < a_columns) {
      const char* src = a_n ? element(call.a, 0, p0 + c) : element(call.a, p0, c);
      kernels_.to_float(src, call.a.dtype, a_rows, a_block + c * a_rows);
    } else {
      const int64_t cb = c - a_columns;
      const char* src = b_n ? element(call.b, p0, j0 + cb) : element(call.b, j0, p0 + cb);
      kernels_.to_float(src, call.b.dtype, b_rows, b_block + cb * b_rows);
    }
  }
}

// acc (gemm_m x width, ld_acc) = alpha op(A) op(B)[:, j0:j0+width] + beta D_old[:, j0:j0+width].
// When D is fp32, acc is D and holds D_old on entry; otherwise acc is the workspace panel.
// gemm_bias (fp32, gemm_m, or nullptr): a bias the GEMM may add itself; *bias_added says if it did.
Status CpuBackend::panel_product(const GemmCall& call, const WorkspacePlan& plan, char* workspace,
                                 int64_t j0, int64_t width, float* acc, int64_t ld_acc,
                                 const float* gemm_bias, bool* bias_added) const {
  const int64_t m = call.gemm_m, k = call.gemm_k;
  const bool d_is_acc = call.d.dtype == EPIGEMM_DTYPE_F32;
  const bool parallel = m * width >= kParallelElements;
  *bias_added = false;
  if (k == 0 || call.alpha == 0.0f) {
    // acc = beta D_old; beta = 0 never reads D_old (it may hold NaN, as in BLAS). alpha = 0 (with
    // BGRADB or BGRADA, the only such calls the core passes on) leaves the product out here, not
    // in the engine: dnnl_sgemm with alpha = 0 scales C by beta, so a NaN in C, D_old or the
    // previous contents of the workspace panel, stayed NaN with beta = 0.
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < width; ++j) {
      float* column = acc + j * ld_acc;
      if (call.beta == 0.0f) {
        std::memset(column, 0, size_t(m) * sizeof(float));
        continue;
      }
      if (!d_is_acc) kernels_.to_float(element(call.d, 0, j0 + j), call.d.dtype, m, column);
      for (int64_t i = 0; i < m; ++i) column[i] *= call.beta;
    }
    return Status();
  }

  // "overwrite": an alpha = 1, beta = 0 call (every layer call but an accumulating wgrad) that
  // oneDNN's matmul primitive runs (where options and shape pick it; it also adds the bias), or
  // cblas_sgemm. Otherwise the engine computes alpha op(A) op(B) + beta C, and C must hold D_old
  // when beta != 0. With beta = 0 C is not read (BLAS semantics; dnnl_sgemm keeps them: a probe of
  // 3000 random shapes, transposes, leading dimensions, alphas and 1-2 threads on a C full of NaN
  // or Inf never leaked one, docs/dev/cpu_backend.md; and the test matrix poisons D with NaN before
  // every call), so acc needs no zero fill.
  // The shape the rule sees is that of one engine call: with fp16/bf16 operands, a gemm_k block.
  const bool alpha_one_beta_zero = call.alpha == 1.0f && call.beta == 0.0f;
  bool overwrite = alpha_one_beta_zero && options_.engine != CpuGemmEngine::onednn;
  if (alpha_one_beta_zero && options_.engine == CpuGemmEngine::onednn) {
    OnednnOverwrite how = options_.onednn_overwrite;
    if (how == OnednnOverwrite::by_shape) {
      const int64_t depth = call.a.dtype == EPIGEMM_DTYPE_F32 ? k : std::min(k, plan.k_block);
      how = onednn_overwrite_for_shape(call.transa, call.transb, m, width, depth);
    }
    overwrite = how == OnednnOverwrite::matmul_primitive;
  }
  // With beta != 0, acc must hold D_old: widened into the workspace panel when D is 16-bit.
  // A bias the GEMM does not add (dnnl_sgemm, cblas_sgemm) is left to the epilogue's pass, which
  // reads and rewrites the cached acc; filling acc with the bias first and running the GEMM with
  // beta = 1 measured 1-2% slower once the pass kept its vectors on cache-line boundaries
  // (docs/dev/cpu_backend.md, "Where aux goes").
  if (call.beta != 0.0f && !d_is_acc) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < width; ++j) {
      kernels_.to_float(element(call.d, 0, j0 + j), call.d.dtype, m, acc + j * ld_acc);
    }
  }

  const bool vector_shaped = m == 1 || width == 1;
  if (call.a.dtype == EPIGEMM_DTYPE_F32) {
    const float* a = static_cast<const float*>(call.a.data);
    const float* b = reinterpret_cast<const float*>(
        call.transb == EPIGEMM_OP_N ? element(call.b, 0, j0) : element(call.b, j0, 0));
    if (vector_shaped && k > kVectorShapedDepth) {
      for (int64_t p0 = 0; p0 < k; p0 += kVectorShapedDepth) {
        const int64_t depth = std::min(kVectorShapedDepth, k - p0);
        // The terms p0..: columns of op(A), rows of op(B).
        const float* a_block = a + (call.transa == EPIGEMM_OP_N ? p0 * call.a.ld : p0);
        const float* b_block = b + (call.transb == EPIGEMM_OP_N ? p0 : p0 * call.b.ld);
        float slice[kVectorSlice];
        EPIGEMM_RETURN_IF_ERROR(add_vector_shaped_block(options_.engine, call.transa, call.transb, m, width,
                                                        depth, call.alpha, a_block, call.a.ld, b_block,
                                                        call.b.ld, p0 == 0, call.beta, acc, ld_acc, slice,
                                                        kVectorSlice));
      }
      return Status();
    }
    if (overwrite) {
      return cpu_sgemm_overwrite(options_.engine, call.transa, call.transb, m, width, k, a,
                                 call.a.ld, b, call.b.ld, gemm_bias, acc, ld_acc, bias_added);
    }
    return cpu_sgemm(options_.engine, call.transa, call.transb, m, width, k, call.alpha, a,
                     call.a.ld, b, call.b.ld, call.beta, acc, ld_acc);
  }

  float* a_block = reinterpret_cast<float*>(workspace + plan.acc_panel);
  float* b_block = reinterpret_cast<float*>(workspace + plan.acc_panel + plan.a_block);
  for (int64_t p0 = 0; p0 < k; p0 += plan.k_block) {
    const int64_t depth = std::min(plan.k_block, k - p0);
    widen_blocks(call, j0, width, p0, depth, a_block, b_block);
    const int64_t lda = call.transa == EPIGEMM_OP_N ? m : depth;
    const int64_t ldb = call.transb == EPIGEMM_OP_N ? depth : width;
    if (vector_shaped && k > plan.k_block) {
      EPIGEMM_RETURN_IF_ERROR(add_vector_shaped_block(
          options_.engine, call.transa, call.transb, m, width, depth, call.alpha, a_block, lda, b_block, ldb,
          p0 == 0, call.beta, acc, ld_acc, reinterpret_cast<float*>(workspace + plan.vector_block_offset()),
          std::max(m, width)));
    } else if (p0 == 0 && overwrite) {
      bool unused = false;
      EPIGEMM_RETURN_IF_ERROR(cpu_sgemm_overwrite(options_.engine, call.transa, call.transb, m,
                                                  width, depth, a_block, lda, b_block, ldb,
                                                  nullptr, acc, ld_acc, &unused));
    } else {
      EPIGEMM_RETURN_IF_ERROR(cpu_sgemm(options_.engine, call.transa, call.transb, m, width,
                                        depth, call.alpha, a_block, lda, b_block, ldb,
                                        p0 == 0 ? call.beta : 1.0f, acc, ld_acc));
    }
  }
  return Status();
}

Status CpuBackend::run(const GemmCall& call) {
  const OmpThreadsScope threads(cpu_call_threads(call, options_.threads));
  const WorkspacePlan plan = plan_workspace(call, options_);
  char* workspace = nullptr;
  if (plan.total() > 0) {
    const uintptr_t raw = reinterpret_cast<uintptr_t>(call.workspace);
    workspace = reinterpret_cast<char*>((raw + kAlignment - 1) / kAlignment * kAlignment);
  }
  const size_t bias_offset = plan.acc_panel + plan.a_block + plan.b_block;
  const size_t sums_offset = bias_offset + plan.bias;

  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  const EpilogueParts parts = call.parts();
  const bool row_sums_of_g = parts.bias_grad == BiasGradPart::rows_of_gradient;

  // The bias-gradient sums in fp32: bias_grad itself when it is fp32, else the workspace.
  // BGRADB and BGRADA take each sum whole (in double inside the kernel); the rows of g are added
  // panel by panel (all zeros when gemm_n = 0).
  float* sums = nullptr;
  if (parts.writes_bias_grad()) {
    sums = call.bias_grad.dtype == EPIGEMM_DTYPE_F32
               ? static_cast<float*>(call.bias_grad.data)
               : reinterpret_cast<float*>(workspace + sums_offset);
    if (row_sums_of_g) std::fill(sums, sums + m, 0.0f);
  }
  // BGRADA does not depend on the product: the rows of op(A), written even when D is empty.
  if (parts.bias_grad == BiasGradPart::rows_of_a) {
    sum_lines(call.a, call.transa == EPIGEMM_OP_T, 0, m, k, sums);
  }

  const float* bias = nullptr;
  if (parts.reads_bias() && m > 0 && n > 0) {
    if (call.bias.dtype == EPIGEMM_DTYPE_F32) {
      bias = static_cast<const float*>(call.bias.data);
    } else {
      float* widened = reinterpret_cast<float*>(workspace + bias_offset);
      kernels_.to_float(call.bias.data, call.bias.dtype, m, widened);
      bias = widened;
    }
  }

  const int64_t team = std::max(1, omp_get_max_threads());
  // A forward epilogue that writes an fp32 aux, with beta = 0 (ForwardAuxPlan, measured in
  // docs/dev/cpu_backend.md, "Where aux goes"):
  // - streamed_aux: acc in D; the pass reads it, rewrites D in place and streams z = acc (+ bias)
  //   into aux, whose lines are then never read for ownership: with the floor's GEMM writing D,
  //   the epilogue adds a read and a rewrite of cached D and a write of aux to memory.
  // - acc_in_aux: the GEMM writes acc (with the bias where the matmul primitive adds it) into aux,
  //   and the pass reads it once and writes D (and z back into aux where it adds the bias).
  // - cached_aux: acc in D, aux stored through the cache.
  const bool fp32_forward_aux =
      parts.writes_aux() && call.aux.dtype == EPIGEMM_DTYPE_F32 && call.beta == 0.0f;
  const bool acc_in_aux = fp32_forward_aux && options_.forward_aux == ForwardAuxPlan::acc_in_aux;
  const bool stream_aux = fp32_forward_aux && options_.forward_aux == ForwardAuxPlan::streamed_aux;

  // Panels cover what is written column by column: D when it has rows, and for BGRADB the
  // bias gradient (gemm_n entries) even when D is empty. Nothing else: an empty D with a huge
  // gemm_n (tokens = 2^62, in = out = 0) takes no pass at all, not 2^53 empty ones.
  const int64_t panelled_columns = m > 0 || parts.bias_grad == BiasGradPart::columns_of_b ? n : 0;
  for (int64_t j0 = 0; j0 < panelled_columns; j0 += plan.panel_columns) {
    const int64_t width = std::min(plan.panel_columns, n - j0);
    // BGRADB does not depend on gemm_m: written even when D is empty.
    if (parts.bias_grad == BiasGradPart::columns_of_b) {
      sum_lines(call.b, call.transb == EPIGEMM_OP_N, j0, width, k, sums + j0);
    }
    if (m == 0) continue;

    float* acc = reinterpret_cast<float*>(workspace);
    int64_t ld_acc = m;
    if (acc_in_aux) {
      acc = reinterpret_cast<float*>(element(call.aux, 0, j0));
      ld_acc = call.aux.ld;
    } else if (call.d.dtype == EPIGEMM_DTYPE_F32) {
      acc = reinterpret_cast<float*>(element(call.d, 0, j0));
      ld_acc = call.d.ld;
    }
    bool bias_added = false;
    EPIGEMM_RETURN_IF_ERROR(
        panel_product(call, plan, workspace, j0, width, acc, ld_acc, bias, &bias_added));
    // What is left once the GEMM has run: the bias may be in acc already, and D = acc needs no
    // pass of its own when D is fp32.
    EpilogueParts remaining = parts;
    if (bias_added) remaining.bias = BiasPart::none;
    if (call.d.dtype == EPIGEMM_DTYPE_F32 && remaining.d_is_acc()) continue;

    // Tasks: the rows of g split the rows (each row's sum then runs over the panel's columns in
    // order on one thread, whatever the split); the other epilogues split the columns, so that
    // every task streams down whole contiguous columns.
    // The row sums take one task per thread: the longest contiguous run down each column (a
    // thread's rows), where 4 tasks per thread made runs of 96 rows on (1024, 768, 3072).
    const bool split_rows = row_sums_of_g;
    const int64_t extent = split_rows ? m : width;
    const int64_t split = split_rows ? team : team * kTasksPerThread;
    const int64_t per_task = std::max<int64_t>(1, (extent + split - 1) / split);
    const int64_t tasks = (extent + per_task - 1) / per_task;
#pragma omp parallel for schedule(static) if (m * width >= kParallelElements)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t first = t * per_task, count = std::min(per_task, extent - first);
      const int64_t r0 = split_rows ? first : 0, c0 = split_rows ? 0 : first;
      EpilogueBlock block;
      block.rows = split_rows ? count : m;
      block.cols = split_rows ? width : count;
      block.acc = acc + r0 + c0 * ld_acc;
      block.ld_acc = ld_acc;
      block.d = element(call.d, r0, j0 + c0);
      block.d_dtype = call.d.dtype;
      block.ld_d = call.d.ld;
      if (bias != nullptr) block.bias = bias + r0;
      if (call.has_aux && call.aux.data != nullptr) {
        block.aux = element(call.aux, r0, j0 + c0);
        block.aux_dtype = call.aux.dtype;
        block.ld_aux = call.aux.ld;
        block.aux_holds_acc = acc_in_aux;
        block.stream_aux = stream_aux;
      }
      if (row_sums_of_g) block.row_sums = sums + r0;
      kernels_.apply(remaining, block);
    }
  }

  if (sums != nullptr && call.bias_grad.dtype != EPIGEMM_DTYPE_F32) {
    const int64_t length = call.bias_grad_length();
    for (int64_t i = 0; i < length; ++i) {
      store_from_float(call.bias_grad.data, call.bias_grad.dtype, i, sums[i]);
    }
  }
  return Status();
}

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

std::unique_ptr<Backend> create_cpu_backend() { return create_cpu_backend(CpuBackendOptions()); }

}  // namespace epigemm
