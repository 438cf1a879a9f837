// The cublaslt backend: one cublasLtMatmul per call, the epilogue fused by cuBLASLt.
//
// It runs only the epilogues cuBLASLt computes with our meaning (docs/conventions.md), by their
// parts (core/epilogue_parts.hpp): DEFAULT, BIAS, BGRADB, BGRADA; with gelu_tanh (cuBLASLt's GELU
// is the tanh form) ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS, DACT, DACT_BGRAD; with relu ACT and
// ACT_BIAS (its RELU_AUX writes a bit mask, not the pre-activation). An activation epilogue with
// the identity is the epilogue without it where the parts say so (ACT(identity) is DEFAULT,
// ACT_BIAS(identity) is BIAS); the others with the identity, and every other activation, are
// declined with the reason (cublaslt_epilogue.hpp).
//
// What else it declines (the dispatcher then routes the call to `cuda`), and why:
//   - empty problems (gemm_m, gemm_n or gemm_k = 0): cuBLASLt rejects k = 0 and our degenerate
//     semantics (docs/conventions.md) are simpler to keep in one backend;
//   - pointers not 16-byte aligned, leading dimensions whose rows are not a multiple of 16 bytes,
//     an aux leading dimension not divisible by 8 (cuBLASLt's own rule for GELU aux);
//   - bias, aux or bias_grad in a dtype other than D's: cuBLASLt reads the bias and writes the
//     bias gradient in D's type ("Ctype") for these kernels; a mixed dtype would be misread;
//   - DGELU and DGELU_BGRAD with an f32 D: cuBLASLt's fp32 dGELU is accurate to about 1e-5
//     relative (measured on the H200: ||out - ref|| / ||ref|| ~ 5e-6, elementwise ~1.3e-5),
//     outside the fp32 tolerance of docs/conventions.md; `cuda` computes it to a few ulp;
//   - anything its heuristic finds no algorithm for (answered once per case and cached).
// State: one cuBLASLt handle per context, and per case (shapes, lds, dtypes, transposes,
// cuBLASLt epilogue, TF32) a plan: the matmul and layout descriptors plus the heuristic's first
// algorithm. A call only sets the pointers on its plan and enqueues cublasLtMatmul on the
// caller's stream.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backends/cublaslt/cublaslt_epilogue.hpp"
#include "backends/cublaslt/cublaslt_preference.hpp"
#include "core/backend.hpp"
#include "core/numeric.hpp"

namespace epigemm {
namespace {

// cuBLASLt's recommended workspace on Hopper; reported by workspace_bytes() for every call.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr uintptr_t kAlignment = 16;

cudaDataType_t cuda_type(epigemm_dtype_t t) {
  switch (t) {
    case EPIGEMM_DTYPE_F16: return CUDA_R_16F;
    case EPIGEMM_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }
bool ld_aligned(const Matrix& m) {
  return (m.ld * int64_t(dtype_size(m.dtype))) % int64_t(kAlignment) == 0;
}

// Everything the heuristic's answer depends on. Pointers are all 16-byte aligned (checked in
// supports()), so alignment is not part of the key.
using PlanKey = std::tuple<int64_t, int64_t, int64_t,            // gemm_m, gemm_n, gemm_k
                           int64_t, int64_t, int64_t, int64_t,   // lda, ldb, ldd, ld aux
                           int, int, int, int, int, int,         // dtypes a, d, bias, aux, bias_grad, tf32
                           int, int, int, int>;                  // transa, transb, cuBLASLt epilogue, beta != 0

PlanKey plan_key(const GemmCall& c) {
  const bool tf32 = c.allow_tf32 && c.a.dtype == EPIGEMM_DTYPE_F32;
  return PlanKey(c.gemm_m, c.gemm_n, c.gemm_k, c.a.ld, c.b.ld, c.d.ld, c.has_aux ? c.aux.ld : 0,
                 int(c.a.dtype), int(c.d.dtype), c.has_bias ? int(c.bias.dtype) : -1,
                 c.has_aux ? int(c.aux.dtype) : -1, c.has_bias_grad ? int(c.bias_grad.dtype) : -1,
                 int(tf32), int(c.transa), int(c.transb), int(lt_epilogue(c).value), int(c.beta != 0.0f));
}

// The cuBLASLt objects of one case. Owned by the backend's cache, destroyed with the context.
struct Plan {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;          // the heuristic returned an algorithm
  std::string why_not;         // when not found or not creatable

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (layout_d) cublasLtMatrixLayoutDestroy(layout_d);
    if (layout_b) cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (matmul) cublasLtMatmulDescDestroy(matmul);
  }
};

class CublasLtBackend final : public Backend {
 public:
  CublasLtBackend() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();  // clear the sticky "no device" error for whoever asks next
      return;
    }
    usable_ = cublasLtCreate(&handle_) == CUBLAS_STATUS_SUCCESS;
  }
  ~CublasLtBackend() override {
    plans_.clear();
    if (handle_) cublasLtDestroy(handle_);
  }

  epigemm_backend_t id() const override { return EPIGEMM_BACKEND_CUBLASLT; }
  bool usable() const override { return usable_; }
  size_t workspace_bytes(const GemmCall&) const override { return kWorkspaceBytes; }
  int auto_priority(const GemmCall& call) const override {
    return cublaslt_preferred(call) ? 30 : 5;
  }
  Support supports(const GemmCall& call) const override;
  Status run(const GemmCall& call) override;

 private:
  // The cached plan of a case, built (descriptors + heuristic) on first use.
  Plan& plan_for(const GemmCall& call) const;

  bool usable_ = false;
  cublasLtHandle_t handle_ = nullptr;
  // Heuristic answers and descriptors, per case; filled lazily from the const support query.
  mutable std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

Support CublasLtBackend::supports(const GemmCall& call) const {
  if (call.memory() != EPIGEMM_MEMORY_DEVICE) return Support::no("operands are in host memory");
  const LtEpilogue epilogue = lt_epilogue(call);
  if (!epilogue.found) return Support::no(epilogue.why_not);
  if (call.gemm_m == 0 || call.gemm_n == 0 || call.gemm_k == 0) {
    return Support::no("an empty dimension (gemm_m, gemm_n or gemm_k is 0)");
  }
  const Matrix* matrices[] = {&call.a, &call.b, &call.d, call.has_aux ? &call.aux : nullptr};
  for (const Matrix* m : matrices) {
    if (m == nullptr) continue;
    if (!aligned(m->data)) return Support::no("a matrix pointer is not 16-byte aligned");
    if (!ld_aligned(*m)) return Support::no("a leading dimension is not a multiple of 16 bytes");
  }
  if (call.has_aux && call.aux.ld % 8 != 0) return Support::no("the aux leading dimension is not divisible by 8");
  if (call.has_bias && (!aligned(call.bias.data) || call.bias.dtype != call.d.dtype)) {
    return Support::no("the bias is unaligned or its dtype differs from D's");
  }
  if (call.has_bias_grad && (!aligned(call.bias_grad.data) || call.bias_grad.dtype != call.d.dtype)) {
    return Support::no("bias_grad is unaligned or its dtype differs from D's");
  }
  if (call.has_aux && call.aux.dtype != call.d.dtype) return Support::no("the aux dtype differs from D's");
  if (call.parts().reads_aux() && call.d.dtype == EPIGEMM_DTYPE_F32) {
    return Support::no("cuBLASLt's fp32 dGELU is outside the fp32 tolerance (about 1e-5 relative)");
  }
  const Plan& plan = plan_for(call);
  if (!plan.found) return Support::no(plan.why_not);
  return Support::yes();
}

Plan& CublasLtBackend::plan_for(const GemmCall& call) const {
  const PlanKey key = plan_key(call);
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  plans_.emplace(key, std::move(plan));

  const bool tf32 = call.allow_tf32 && call.a.dtype == EPIGEMM_DTYPE_F32;
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t ta = call.transa == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = call.transb == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = lt_epilogue(call).value;
  bool ok = cublasLtMatmulDescCreate(&p.matmul, compute, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) == CUBLAS_STATUS_SUCCESS;
  // The bias / bias-gradient and aux dtypes are always set explicitly, never left to default.
  if (call.has_bias || call.has_bias_grad) {
    const int32_t bias_type = cuda_type(call.has_bias ? call.bias.dtype : call.bias_grad.dtype);
    ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type) == CUBLAS_STATUS_SUCCESS;
    const void* bias_pointer = call.has_bias ? call.bias.data : call.bias_grad.data;
    ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof bias_pointer) == CUBLAS_STATUS_SUCCESS;
  }
  if (call.has_aux) {
    const int32_t aux_type = cuda_type(call.aux.dtype);
    const int64_t aux_ld = call.aux.ld;
    ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof aux_type) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call.aux.data, sizeof call.aux.data) == CUBLAS_STATUS_SUCCESS;
  }
  // Layouts as stored: A is (transa ? k x m : m x k), B is (transb ? n x k : k x n).
  ok = ok && cublasLtMatrixLayoutCreate(&p.layout_a, cuda_type(call.a.dtype), uint64_t(call.a.rows), uint64_t(call.a.cols), call.a.ld) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutCreate(&p.layout_b, cuda_type(call.b.dtype), uint64_t(call.b.rows), uint64_t(call.b.cols), call.b.ld) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutCreate(&p.layout_d, cuda_type(call.d.dtype), uint64_t(call.d.rows), uint64_t(call.d.cols), call.d.ld) == CUBLAS_STATUS_SUCCESS;
  if (!ok) {
    p.why_not = "cuBLASLt refused the descriptors for this case";
    return p;
  }

  cublasLtMatmulPreference_t preference = nullptr;
  if (cublasLtMatmulPreferenceCreate(&preference) != CUBLAS_STATUS_SUCCESS) {
    p.why_not = "cublasLtMatmulPreferenceCreate failed";
    return p;
  }
  const uint64_t workspace = kWorkspaceBytes;
  const uint32_t alignment = uint32_t(kAlignment);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, p.matmul, p.layout_a, p.layout_b, p.layout_d, p.layout_d, preference, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    p.why_not = "cuBLASLt has no algorithm for " + epilogue_label(call.epilogue, call.activation) +
                " with these dtypes and layouts";
    return p;
  }
  p.algo = result.algo;
  p.found = true;
  return p;
}

Status CublasLtBackend::run(const GemmCall& call) {
  Plan& p = plan_for(call);
  if (!p.found) return error(EPIGEMM_STATUS_NOT_SUPPORTED, "cublaslt: ", p.why_not);
  // The plan is shared by every call of this case: point it at this call's buffers.
  if (call.has_bias || call.has_bias_grad) {
    const void* bias_pointer = call.has_bias ? call.bias.data : call.bias_grad.data;
    cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof bias_pointer);
  }
  if (call.has_aux) {
    cublasLtMatmulDescSetAttribute(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call.aux.data, sizeof call.aux.data);
  }
  const float alpha = call.alpha, beta = call.beta;
  const cublasStatus_t status = cublasLtMatmul(
      handle_, p.matmul, &alpha, call.a.data, p.layout_a, call.b.data, p.layout_b, &beta, call.d.data,
      p.layout_d, call.d.data, p.layout_d, &p.algo, call.workspace, call.workspace_bytes,
      static_cast<cudaStream_t>(call.stream));
  if (status != CUBLAS_STATUS_SUCCESS) {
    return EPIGEMM_BACKEND_ERROR("cublasLtMatmul failed: ", cublasLtGetStatusString(status));
  }
  return Status();
}

}  // namespace

std::unique_ptr<Backend> create_cublaslt_backend() { return std::make_unique<CublasLtBackend>(); }

}  // namespace epigemm
