// The `cuda` backend: cuBLAS GEMM + epigemm's epilogue kernels (docs/cuda_backend.md).
//
// A call, in GEMM coordinates (docs/conventions.md, "Layout"), with the epilogue's parts
// (core/epilogue_parts.hpp):
//   1. BGRADB / BGRADA: bias_grad = the sums over p of op(B)'s columns / op(A)'s rows,
//      independent of the GEMM; by default on a second stream, concurrent with it, joined back to
//      the caller's stream with an event.
//   2. acc = alpha op(A) op(B) + beta D_old by cublasGemmEx into either D itself or an fp32
//      gemm_m x gemm_n intermediate in the workspace (CudaBackendOptions::fp32_intermediate):
//      the intermediate wherever the epilogue computes on acc or beta D_old is added to a 16-bit
//      D. BIAS with beta = 0 and an fp32 D: D = bias broadcast first, then the GEMM with beta = 1
//      adds acc to it (CudaBackendOptions::bias_through_gemm_beta), and step 3 is not needed.
//   3. One tile kernel for the epilogue's parts and activation, reading acc and writing D (and
//      aux / bias-gradient partials); for D = acc in the intermediate, its conversion into D.
// Everything is ordered on the caller's stream (the second stream only between a fork and a join
// on it): no allocation, no host synchronization, no device-to-host copy, so a call can be
// captured into a CUDA graph.
#include "backends/cuda/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <string>

#include "backends/cuda/epilogue_kernels.hpp"
#include "core/cuda_device.hpp"
#include "core/cuda_dtype.hpp"
#include "core/numeric.hpp"

namespace epigemm {
namespace {

// cuBLAS's recommended workspace on Hopper; given to it explicitly so that it never falls back
// to its own pool (which is allocated on first use of a stream).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
constexpr size_t kWorkspaceAlignment = 256;

size_t round_up(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

cublasOperation_t cublas_op(epigemm_op_t op) { return op == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N; }

// BIAS's parts (also ACT_BIAS with the identity): the only epilogue the GEMM's beta can carry.
bool adds_bias_only(const EpilogueParts& parts) {
  return parts.reads_bias() && parts.activation == EPIGEMM_ACTIVATION_IDENTITY &&
         !parts.uses_aux() && !parts.backward() && !parts.writes_bias_grad();
}

// The sums over p of an operand, op(X) = op(B) for BGRADB (bias_grad[j] = sum_p op(B)[p, j]) or
// op(A) for BGRADA (bias_grad[i] = sum_p op(A)[i, p]), as the stored matrix sees them: either
// along its rows (the tile kernel's row sums, strided) or down its columns (column sums,
// contiguous). `length` sums of `terms` terms each.
struct OperandSums {
  const Matrix* x = nullptr;
  bool along_rows = false;  // X stored length x terms: bias_grad[r] = sum_c X[r, c]
  int64_t length = 0;
  int64_t terms = 0;
};

OperandSums operand_sums(const GemmCall& call) {
  OperandSums sums;
  switch (call.parts().bias_grad) {
    case BiasGradPart::columns_of_b:
      // transb = T: B is stored gemm_n x gemm_k (wgrad: dY as out x tokens), sum each row;
      // transb = N: B is stored gemm_k x gemm_n, sum each column.
      sums.x = &call.b;
      sums.along_rows = call.transb == EPIGEMM_OP_T;
      sums.length = call.gemm_n;
      break;
    case BiasGradPart::rows_of_a:
      // transa = N: A is stored gemm_m x gemm_k, sum each row; transa = T: A is stored
      // gemm_k x gemm_m, sum each column.
      sums.x = &call.a;
      sums.along_rows = call.transa == EPIGEMM_OP_N;
      sums.length = call.gemm_m;
      break;
    case BiasGradPart::none:
    case BiasGradPart::rows_of_gradient: break;
  }
  sums.terms = call.gemm_k;
  return sums;
}

#define EPIGEMM_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudaError_t err_ = (expr);                                                      \
    if (err_ != cudaSuccess) return EPIGEMM_BACKEND_ERROR(#expr, ": ", cudaGetErrorString(err_)); \
  } while (0)

#define EPIGEMM_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                       \
    const cublasStatus_t st_ = (expr);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) return EPIGEMM_BACKEND_ERROR(#expr, ": ", cublasGetStatusString(st_)); \
  } while (0)

// Where each part of a call's workspace lies; sizes from CudaBackend::workspace_bytes.
struct WorkspaceLayout {
  void* cublas = nullptr;
  float* acc = nullptr;       // gemm_m x gemm_n fp32, ld gemm_m (fp32 intermediate)
  float* partials = nullptr;  // bias-gradient partial sums
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {
    const Status initialized = init();
    usable_ = initialized.ok();
    if (!usable_) why_not_usable_ = initialized.message();
    cudaGetLastError();  // a failed probe leaves no error behind for the caller's next CUDA call
  }
  ~CudaBackend() override {
    if (join_event_ != nullptr) cudaEventDestroy(join_event_);
    if (fork_event_ != nullptr) cudaEventDestroy(fork_event_);
    if (side_stream_ != nullptr) cudaStreamDestroy(side_stream_);
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  epigemm_backend_t id() const override { return EPIGEMM_BACKEND_CUDA; }
  bool usable() const override { return usable_; }
  Support supports(const GemmCall& call) const override {
    if (call.memory() != EPIGEMM_MEMORY_DEVICE) {
      return Support::no("cuda: operands are in host memory; the cuda backend needs device memory");
    }
    return Support::yes();
  }
  size_t workspace_bytes(const GemmCall& call) const override;
  Status run(const GemmCall& call) override;
  // Above reference (0) and cpu, which decline device memory anyway.
  int auto_priority(const GemmCall&) const override { return 20; }
  // "cuBLAS 13.1.0 GEMM + epigemm's epilogue kernels (sm_90a) on device 0: NVIDIA H200,
  // compute capability 9.0, 132 SMs".
  std::string description() const override {
    if (!usable_) return "not usable here: " + why_not_usable_;
    return "cuBLAS " + cublas_version_ + " GEMM + epigemm's epilogue kernels (sm_90a) on " + device_;
  }

 private:
  Status init();
  // The bias goes into D before the GEMM, which adds acc with beta = 1. Only where that is the
  // contract's D = acc + bias with one rounding: beta = 0 (D_old is not part of acc), an fp32 D
  // (with a bf16 or f16 D cuBLAS rounds alpha acc to D's dtype before it adds beta C: two
  // roundings, see uses_fp32_intermediate), and a GEMM that runs (k > 0).
  bool bias_through_beta(const GemmCall& call) const {
    return options_.bias_through_gemm_beta && adds_bias_only(call.parts()) && call.beta == 0.0f &&
           call.gemm_k > 0 && call.d.dtype == EPIGEMM_DTYPE_F32;
  }
  // acc goes to an fp32 intermediate, and one kernel rounds the result into a 16-bit D, where an
  // epilogue computes on acc, and where the GEMM adds beta D_old: with a bf16 or f16 C, cuBLAS
  // rounds alpha acc to C's dtype before it adds beta C (on the H100, cuBLAS 13.1, 2026-12-06:
  // 700 of 2560 bf16 elements of a 48 x 40 x 64 accumulate not the nearest of the exact value, up
  // to 21 ulps where D_old cancels the product; RoundedOnce.SixteenBitDIsTheResultRoundedOnce).
  bool uses_fp32_intermediate(const GemmCall& call) const {
    if (!options_.fp32_intermediate || call.d.dtype == EPIGEMM_DTYPE_F32) return false;
    const bool gemm_adds_d_old = call.beta != 0.0f && call.gemm_k > 0 && call.alpha != 0.0f;
    return (call.parts().computes_on_acc() && !bias_through_beta(call)) || gemm_adds_d_old;
  }
  int64_t partial_elements(const GemmCall& call) const;
  WorkspaceLayout layout(const GemmCall& call) const;
  Status sums_of_operand(const GemmCall& call, float* partials, cudaStream_t stream) const;
  Status gemm(const GemmCall& call, float beta, void* out, epigemm_dtype_t out_dtype,
              int64_t ld_out, void* cublas_workspace, cudaStream_t stream);

  CudaBackendOptions options_;
  bool usable_ = false;
  std::string why_not_usable_;  // init()'s message when it failed
  std::string device_;          // "device 0: NVIDIA H200, compute capability 9.0, 132 SMs"
  std::string cublas_version_;  // "13.1.0"
  cuda::KernelTuning tuning_;
  cublasHandle_t handle_ = nullptr;
  // The stream and workspace handle_ was last given (gemm()); nullptr until the first call.
  cudaStream_t handle_stream_ = nullptr;
  void* handle_workspace_ = nullptr;
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t fork_event_ = nullptr;
  cudaEvent_t join_event_ = nullptr;
};

Status CudaBackend::init() {
  const CudaDevice device = current_cuda_device();
  // The usual reason on a machine without a GPU: said plainly, for epigemm_backend_description.
  if (!device.present) return error(EPIGEMM_STATUS_BACKEND_ERROR, device.why_absent);
  // Fails when this build holds no kernel image for the device (it is built for sm_90a).
  EPIGEMM_RETURN_IF_ERROR(cuda::query_kernel_tuning(&tuning_));
  EPIGEMM_CUBLAS_CHECK(cublasCreate(&handle_));
  int cublas_version = 0;
  device_ = device.text() + ", " + std::to_string(device.properties.multiProcessorCount) + " SMs";
  EPIGEMM_CUBLAS_CHECK(cublasGetVersion(handle_, &cublas_version));  // major*10000 + minor*100 + patch
  cublas_version_ = std::to_string(cublas_version / 10000) + "." +
                    std::to_string(cublas_version % 10000 / 100) + "." + std::to_string(cublas_version % 100);
  // Split-K reductions stay in fp32 even when D is bf16/fp16 (acc is fp32 by the contract);
  // TF32 only through the compute type, when the caller opts in.
  EPIGEMM_CUBLAS_CHECK(cublasSetMathMode(
      handle_, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  int least = 0, greatest = 0;
  EPIGEMM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Highest priority, so that the BGRADB sums get multiprocessors as soon as GEMM tiles retire.
  EPIGEMM_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest));
  EPIGEMM_CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
  EPIGEMM_CUDA_CHECK(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
  return Status();
}

int64_t CudaBackend::partial_elements(const GemmCall& call) const {
  const EpilogueParts parts = call.parts();
  if (parts.bias_grad == BiasGradPart::rows_of_gradient) {
    return cuda::row_partial_elements(tuning_, cuda::TileOp::dact_bgrad, parts.activation, call.gemm_m,
                                      call.gemm_n);
  }
  const OperandSums sums = operand_sums(call);
  if (sums.x != nullptr && sums.along_rows) {
    return cuda::row_partial_elements(tuning_, cuda::TileOp::row_sums, EPIGEMM_ACTIVATION_IDENTITY,
                                      sums.length, sums.terms);
  }
  return 0;
}

size_t CudaBackend::workspace_bytes(const GemmCall& call) const {
  size_t bytes = kWorkspaceAlignment + kCublasWorkspaceBytes;  // slack to align the base
  if (uses_fp32_intermediate(call)) {
    bytes += round_up(size_t(call.gemm_m) * size_t(call.gemm_n) * sizeof(float));
  }
  bytes += round_up(size_t(partial_elements(call)) * sizeof(float));
  return bytes;
}

WorkspaceLayout CudaBackend::layout(const GemmCall& call) const {
  const uintptr_t base = (reinterpret_cast<uintptr_t>(call.workspace) + kWorkspaceAlignment - 1) /
                         kWorkspaceAlignment * kWorkspaceAlignment;
  char* next = reinterpret_cast<char*>(base);
  WorkspaceLayout ws;
  ws.cublas = next;
  next += kCublasWorkspaceBytes;
  if (uses_fp32_intermediate(call)) {
    ws.acc = reinterpret_cast<float*>(next);
    next += round_up(size_t(call.gemm_m) * size_t(call.gemm_n) * sizeof(float));
  }
  ws.partials = reinterpret_cast<float*>(next);
  return ws;
}

// BGRADB / BGRADA: bias_grad = the sums over p < gemm_k of op(B)'s columns / op(A)'s rows.
Status CudaBackend::sums_of_operand(const GemmCall& call, float* partials, cudaStream_t stream) const {
  const OperandSums sums = operand_sums(call);
  const Vector& out = call.bias_grad;
  if (sums.length == 0) return Status();
  if (sums.terms == 0) {  // empty sums
    return cuda::launch_scale_copy(nullptr, out.dtype, sums.length, out.data, out.dtype, sums.length,
                                   sums.length, 1, 0.0f, false, stream);
  }
  if (sums.along_rows) {
    cuda::TileArgs args;
    args.rows = sums.length;
    args.cols = sums.terms;
    args.acc = sums.x->data;
    args.acc_dtype = sums.x->dtype;
    args.ld_acc = sums.x->ld;
    args.row_partials = partials;
    return cuda::launch_tile_kernel(tuning_, cuda::TileOp::row_sums, EPIGEMM_ACTIVATION_IDENTITY, args,
                                    out.data, out.dtype, stream);
  }
  return cuda::launch_column_sums(sums.x->data, sums.x->dtype, sums.terms, sums.length, sums.x->ld,
                                  out.data, out.dtype, stream);
}

// out = alpha op(A) op(B) + beta out (beta is the call's, or 1 when D holds the bias already).
Status CudaBackend::gemm(const GemmCall& call, float beta, void* out, epigemm_dtype_t out_dtype,
                         int64_t ld_out, void* cublas_workspace, cudaStream_t stream) {
  // cublasSetStream drops a user workspace, so the workspace is set after it. Both only when they
  // change: the handle is this context's alone, and the two calls are a measurable part of a small
  // call's host time (docs/dev/cutlass_backend.md, "Small calls are host-bound").
  if (stream != handle_stream_ || cublas_workspace != handle_workspace_) {
    handle_stream_ = nullptr;
    handle_workspace_ = nullptr;
    EPIGEMM_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    EPIGEMM_CUBLAS_CHECK(cublasSetWorkspace(handle_, cublas_workspace, kCublasWorkspaceBytes));
    handle_stream_ = stream;
    handle_workspace_ = cublas_workspace;
  }
  const cublasComputeType_t compute = call.a.dtype == EPIGEMM_DTYPE_F32 && call.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const float alpha = call.alpha;
  const int64_t int_max = std::numeric_limits<int>::max();
  if (std::max({call.gemm_m, call.gemm_n, call.gemm_k, call.a.ld, call.b.ld, ld_out}) <= int_max) {
    // The 32-bit entry point whenever it can express the call: it is the one the math floor of
    // the benchmark uses, so both get the same heuristic's choice.
    EPIGEMM_CUBLAS_CHECK(cublasGemmEx(
        handle_, cublas_op(call.transa), cublas_op(call.transb), int(call.gemm_m), int(call.gemm_n),
        int(call.gemm_k), &alpha, call.a.data, cuda_data_type(call.a.dtype), int(call.a.ld), call.b.data,
        cuda_data_type(call.b.dtype), int(call.b.ld), &beta, out, cuda_data_type(out_dtype), int(ld_out),
        compute, CUBLAS_GEMM_DEFAULT));
    return Status();
  }
  EPIGEMM_CUBLAS_CHECK(cublasGemmEx_64(
      handle_, cublas_op(call.transa), cublas_op(call.transb), call.gemm_m, call.gemm_n, call.gemm_k,
      &alpha, call.a.data, cuda_data_type(call.a.dtype), call.a.ld, call.b.data, cuda_data_type(call.b.dtype),
      call.b.ld, &beta, out, cuda_data_type(out_dtype), ld_out, compute, CUBLAS_GEMM_DEFAULT));
  return Status();
}

Status CudaBackend::run(const GemmCall& call) {
  const cudaStream_t stream = static_cast<cudaStream_t>(call.stream);
  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  const EpilogueParts parts = call.parts();
  const WorkspaceLayout ws = layout(call);

  // 1. The sums of an operand do not depend on the GEMM (and are due even when D is empty).
  bool joined = true;
  if (operand_sums(call).x != nullptr) {
    const bool concurrent = options_.concurrent_operand_sums && m > 0 && n > 0 && k > 0;
    cudaStream_t sums_stream = stream;
    if (concurrent) {
      EPIGEMM_CUDA_CHECK(cudaEventRecord(fork_event_, stream));
      EPIGEMM_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_event_, 0));
      sums_stream = side_stream_;
      joined = false;
    }
    EPIGEMM_RETURN_IF_ERROR(sums_of_operand(call, ws.partials, sums_stream));
    if (concurrent) EPIGEMM_CUDA_CHECK(cudaEventRecord(join_event_, side_stream_));
  }

  if (m > 0 && n > 0 && bias_through_beta(call)) {
    // 2'. D = bias[i] in every column, then D = alpha op(A) op(B) + 1 D.
    cuda::TileArgs args;
    args.rows = m;
    args.cols = n;
    args.d = call.d.data;
    args.d_dtype = call.d.dtype;
    args.ld_d = call.d.ld;
    args.bias = call.bias.data;
    args.bias_dtype = call.bias.dtype;
    EPIGEMM_RETURN_IF_ERROR(cuda::launch_tile_kernel(tuning_, cuda::TileOp::bias_broadcast,
                                                     EPIGEMM_ACTIVATION_IDENTITY, args, nullptr,
                                                     EPIGEMM_DTYPE_F32, stream));
    EPIGEMM_RETURN_IF_ERROR(gemm(call, 1.0f, call.d.data, call.d.dtype, call.d.ld, ws.cublas, stream));
  } else if (m > 0 && n > 0) {
    // 2. acc, into D or the fp32 intermediate.
    void* acc = call.d.data;
    epigemm_dtype_t acc_dtype = call.d.dtype;
    int64_t ld_acc = call.d.ld;
    if (ws.acc != nullptr) {
      acc = ws.acc;
      acc_dtype = EPIGEMM_DTYPE_F32;
      ld_acc = m;
    }
    if (k == 0 || call.alpha == 0.0f) {
      // acc = beta D_old; beta = 0 writes zeros without reading D. alpha = 0 arrives here only with
      // an operand's sums (BGRADB, BGRADA: the core runs every other such call as gemm_k = 0),
      // whose product the contract leaves out (NaN or Inf in A or B reach only the sums).
      EPIGEMM_RETURN_IF_ERROR(cuda::launch_scale_copy(call.d.data, call.d.dtype, call.d.ld, acc,
                                                      acc_dtype, ld_acc, m, n, call.beta,
                                                      call.beta != 0.0f, stream));
    } else {
      if (ws.acc != nullptr && call.beta != 0.0f) {
        // cublasGemmEx reads C in its output type: widen D_old into the intermediate first.
        EPIGEMM_RETURN_IF_ERROR(cuda::launch_scale_copy(call.d.data, call.d.dtype, call.d.ld, acc,
                                                        acc_dtype, ld_acc, m, n, 1.0f, true, stream));
      }
      EPIGEMM_RETURN_IF_ERROR(gemm(call, call.beta, acc, acc_dtype, ld_acc, ws.cublas, stream));
    }

    // 3. The epilogue: one tile kernel for its parts and activation; for D = acc in the
    // intermediate (beta != 0 with a 16-bit D), its conversion into D, rounded once.
    if (!parts.computes_on_acc() && ws.acc != nullptr) {
      EPIGEMM_RETURN_IF_ERROR(cuda::launch_scale_copy(ws.acc, EPIGEMM_DTYPE_F32, m, call.d.data, call.d.dtype,
                                                      call.d.ld, m, n, 1.0f, true, stream));
    } else if (parts.computes_on_acc()) {
      cuda::TileArgs args;
      args.rows = m;
      args.cols = n;
      args.acc = acc;
      args.acc_dtype = acc_dtype;
      args.ld_acc = ld_acc;
      args.d = call.d.data;
      args.d_dtype = call.d.dtype;
      args.ld_d = call.d.ld;
      if (call.has_aux) {
        args.aux = call.aux.data;
        args.aux_dtype = call.aux.dtype;
        args.ld_aux = call.aux.ld;
      }
      if (call.has_bias) {
        args.bias = call.bias.data;
        args.bias_dtype = call.bias.dtype;
      }
      args.row_partials = ws.partials;
      void* sums = call.has_bias_grad ? call.bias_grad.data : nullptr;
      const epigemm_dtype_t sums_dtype = call.has_bias_grad ? call.bias_grad.dtype : EPIGEMM_DTYPE_F32;
      EPIGEMM_RETURN_IF_ERROR(cuda::launch_tile_kernel(tuning_, cuda::tile_op_for(parts), parts.activation,
                                                       args, sums, sums_dtype, stream));
    }
  } else if (parts.bias_grad == BiasGradPart::rows_of_gradient && m > 0) {
    // gemm_n = 0: every bias_grad[i] is an empty sum.
    EPIGEMM_RETURN_IF_ERROR(cuda::launch_scale_copy(nullptr, call.bias_grad.dtype, m,
                                                    call.bias_grad.data, call.bias_grad.dtype, m, m,
                                                    1, 0.0f, false, stream));
  }

  if (!joined) EPIGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, join_event_, 0));
  return Status();
}

}  // namespace

std::unique_ptr<Backend> create_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

std::unique_ptr<Backend> create_cuda_backend() { return create_cuda_backend(CudaBackendOptions{}); }

}  // namespace epigemm
