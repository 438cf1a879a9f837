// The cpu backend (docs/dev/cpu_backend.md): for each panel of D's columns, a plain fp32 BLAS GEMM
// (gemm_engine.hpp) and right after it the epilogue kernels (epilogue_kernels.hpp) while the panel
// is still in cache. Host memory only; every epilogue, dtype, transpose, alpha/beta and leading
// dimension of docs/conventions.md. TF32 does not exist on the CPU: allow_tf32 is ignored and
// fp32 inputs always run in full fp32.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/gemm_engine.hpp"
#include "core/backend.hpp"

namespace epigemm {

enum class CpuKernelBuild { widest, avx2, scalar };

// Panel width when fp16/bf16 operands or D are widened to fp32 in the workspace.
constexpr int64_t kWidenedPanelColumns = 512;

// Where a forward epilogue that writes an fp32 aux keeps its accumulator, and how aux is stored.
enum class ForwardAuxPlan {
  // acc in D (or in the workspace when D is 16-bit); the pass rewrites D in place and stores aux
  // with non-temporal stores: aux is read only by the backward pass, long after this call, so
  // it is written without the read for ownership of its cache lines and without pushing D, which
  // the next layer reads, out of the cache. A vector of aux is streamed where its address is a
  // multiple of the vector's size: the pass aligns its vectors to D's column 0, so aux streams
  // where its columns sit as far from a cache line as D's (buffers from one allocator, leading
  // dimensions that are multiples of a vector); elsewhere aux is stored through the cache.
  streamed_aux,
  // The GEMM writes acc into aux; the pass reads it once and writes D (and z = acc + bias back
  // into aux, where the pass adds the bias).
  acc_in_aux,
  // acc in D (or the workspace); the pass stores aux through the cache.
  cached_aux,
};

struct CpuBackendOptions {
  // Columns of D (gemm_n) per panel; 0 picks: all of gemm_n when A, B and D are fp32 (measured
  // fastest on the benchmark machine, docs/dev/cpu_backend.md), kWidenedPanelColumns when fp16/bf16
  // storage is widened through the workspace (which bounds the workspace). Fixed per call shape
  // and backend instance, so it fixes the order of the DGELU_BGRAD partial sums too.
  int64_t panel_columns = 0;
  // gemm_k per block when fp16/bf16 operands are widened to fp32 in the workspace.
  int64_t conversion_k_block = 256;
  // OpenMP threads a call uses; 0 = omp_get_max_threads() of the calling thread, except that a
  // call of at most 2^20 multiply-adds on small operands runs on the calling thread alone.
  int threads = 0;
  CpuGemmEngine engine = default_cpu_gemm_engine();
  // oneDNN only: how alpha = 1, beta = 0 GEMMs run, dnnl_sgemm with beta = 0 or the matmul
  // primitive (adds the bias; neither reads D). by_shape: onednn_overwrite_for_shape of the GEMM
  // call (gemm_engine.hpp, measured in docs/dev/cpu_backend.md); the other two force one call (tests,
  // benchmark variants).
  OnednnOverwrite onednn_overwrite = OnednnOverwrite::by_shape;
  // Which build of the epilogue kernels runs: the widest this CPU allows, or a narrower one
  // (tests run every build the CPU has; the benchmark compares them).
  CpuKernelBuild kernels = CpuKernelBuild::widest;
  // Forward epilogues that write an fp32 aux (ACT_AUX, ACT_AUX_BIAS) with beta = 0: where the
  // GEMM's accumulator goes and how the pass stores aux (docs/dev/cpu_backend.md, "Where aux goes").
  ForwardAuxPlan forward_aux = ForwardAuxPlan::streamed_aux;
};

// The OpenMP threads a call runs on: `requested` when it is > 0 (CpuBackendOptions::threads);
// else 1 for a call of at most 2^20 multiply-adds whose operands each hold fewer than 32768
// elements (one thread is as fast there, and never waits for a descheduled second one), and 0
// (the calling thread's omp_get_max_threads()) otherwise. A pure function of the shape, so the
// same call always runs the same way.
int cpu_call_threads(const GemmCall& call, int requested);

std::unique_ptr<Backend> create_cpu_backend();
std::unique_ptr<Backend> create_cpu_backend(const CpuBackendOptions& options);

}  // namespace epigemm
