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
// Alignment and leading dimensions: any. The heuristic is asked with each operand's actual
// alignment (cublaslt_alignment.hpp: the largest power of two <= 16 dividing its address and its
// leading dimension in bytes), and that alignment is part of the plan's key, so an algorithm
// chosen for aligned operands never runs on less aligned ones. Where cuBLASLt has no algorithm
// for a case the heuristic says so, and the backend declines it (the last rule below).
//
// What it declines (the dispatcher then routes the call to `cuda`), and why:
//   - empty problems (gemm_m, gemm_n or gemm_k = 0): cuBLASLt rejects k = 0 and our degenerate
//     semantics (docs/conventions.md) are simpler to keep in one backend;
//   - an operand whose address is not a multiple of its element size: not documented by cuBLASLt
//     either way, and its kernels read and write whole elements; a misaligned element access is a
//     device fault that ends the context rather than a wrong value, so this is not left to chance.
//     Storage like that comes only from byte offsets into a buffer (the cpu backend declines it
//     for the same reason);
//   - an aux leading dimension not divisible by 8: cuBLASLt's rule for the GELU aux
//     (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: "Must be divisible by 8");
//   - bias, aux or bias_grad in a dtype other than D's: cuBLASLt writes the bias gradient in
//     D's type ("Ctype", cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER) and reads the bias and
//     aux in it for these kernels; a mixed dtype would be misread;
//   - GELU (gelu_tanh) with an f32 D, forward and backward: cuBLASLt's fp32 dGELU is accurate to
//     about 1e-5 relative (measured on the H200: ||out - ref|| / ||ref|| ~ 5e-6, elementwise
//     ~1.3e-5), and its fp32 GELU gave -0.000165934 for -0.000165823 (3.5e-5 relative, a 1 x 1
//     case of the test matrix on the H200, 2026-12-01), both outside the fp32 tolerance of
//     docs/conventions.md; `cuda` and `cutlass` compute them to a few ulp;
//   - anything its heuristic finds no algorithm for (answered once per case and cached).
// State: one cuBLASLt handle per context, and per case (shapes, lds, dtypes, transposes,
// epilogue, TF32, the operands' alignments) a plan: the matmul and layout descriptors plus the
// heuristic's first algorithm. A call only sets the pointers on its plan and enqueues
// cublasLtMatmul on the caller's stream.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backends/cublaslt/cublaslt_alignment.hpp"
#include "backends/cublaslt/cublaslt_epilogue.hpp"
#include "backends/cublaslt/cublaslt_preference.hpp"
#include "core/backend.hpp"
#include "core/cuda_device.hpp"
#include "core/names.hpp"
#include "core/cuda_dtype.hpp"
#include "core/numeric.hpp"
#include "core/validate.hpp"

namespace epigemm {
namespace {

// cuBLASLt's recommended workspace on Hopper; reported by workspace_bytes() for every call.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// Everything the heuristic's answer depends on, the operands' alignments included
// (cublaslt_alignment.hpp).
using PlanKey = std::tuple<int64_t, int64_t, int64_t,            // gemm_m, gemm_n, gemm_k
                           int64_t, int64_t, int64_t, int64_t,   // lda, ldb, ldd, ld aux
                           int, int, int, int, int, int,         // dtypes a, d, bias, aux, bias_grad, tf32
                           int, int, int, int,                   // transa, transb, cuBLASLt epilogue, beta != 0
                           std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>>;  // alignments

PlanKey plan_key(const GemmCall& c) {
  const bool tf32 = c.allow_tf32 && c.a.dtype == EPIGEMM_DTYPE_F32;
  return PlanKey(c.gemm_m, c.gemm_n, c.gemm_k, c.a.ld, c.b.ld, c.d.ld, c.has_aux ? c.aux.ld : 0,
                 int(c.a.dtype), int(c.d.dtype), c.has_bias ? int(c.bias.dtype) : -1,
                 c.has_aux ? int(c.aux.dtype) : -1, c.has_bias_grad ? int(c.bias_grad.dtype) : -1,
                 int(tf32), int(c.transa), int(c.transb), int(lt_epilogue(c).value), int(c.beta != 0.0f),
                 lt_alignments(c).tie());
}

// Why an operand of the call is not at a multiple of its element size ("" when none is).
std::string misaligned_element(const GemmCall& call) {
  const std::string off = operand_off_its_element_size(call);
  return off.empty() ? off : off + "; cuBLASLt's kernels access whole elements";
}

// The cuBLASLt objects of one case. Owned by the backend's cache, destroyed with the context.
struct Plan {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // the heuristic returned an algorithm
  // Why not found: a BACKEND_ERROR naming the cuBLASLt call (and attribute) that failed, or
  // NOT_SUPPORTED when the heuristic has no algorithm for the case.
  Status why_not;

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

// A failed cuBLASLt call as a Status: "<call>(<attribute>): <cuBLAS status string>".
Status lt_error(const char* call, const char* what, cublasStatus_t status) {
  return EPIGEMM_BACKEND_ERROR(call, "(", what, "): ", cublasLtGetStatusString(status));
}

// One attribute of a matmul descriptor / preference, with the attribute's name in the message.
Status set_matmul_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                            const char* name, const void* value, size_t size) {
  const cublasStatus_t status = cublasLtMatmulDescSetAttribute(desc, attribute, value, size);
  if (status != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmulDescSetAttribute", name, status);
  return Status();
}
Status set_preference_attribute(cublasLtMatmulPreference_t preference,
                                cublasLtMatmulPreferenceAttributes_t attribute, const char* name,
                                const void* value, size_t size) {
  const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, size);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return lt_error("cublasLtMatmulPreferenceSetAttribute", name, status);
  }
  return Status();
}
// The attribute's enumerator is its name in the message.
#define EPIGEMM_LT_SET(desc, attribute, value) \
  set_matmul_attribute(desc, attribute, #attribute, &(value), sizeof(value))
#define EPIGEMM_LT_PREFER(preference, attribute, value) \
  set_preference_attribute(preference, attribute, #attribute, &(value), sizeof(value))

// Destroys the preference of one heuristic query however the query returns.
struct PreferenceGuard {
  cublasLtMatmulPreference_t preference = nullptr;
  ~PreferenceGuard() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
  }
};

// The descriptors of a case: the matmul (transposes, epilogue, bias / aux types, lds, and bias /
// aux pointers of exactly the case's alignments, which is all the heuristic reads of them) and the
// three layouts as stored.
Status create_descriptors(const GemmCall& call, Plan* p) {
  const LtAlignments alignments = lt_alignments(call);
  const bool tf32 = call.allow_tf32 && call.a.dtype == EPIGEMM_DTYPE_F32;
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t ta = call.transa == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = call.transb == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = lt_epilogue(call).value;
  cublasStatus_t status = cublasLtMatmulDescCreate(&p->matmul, compute, CUDA_R_32F);
  if (status != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmulDescCreate", "compute type 32F", status);
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_TRANSA, ta));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_TRANSB, tb));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  // The bias / bias-gradient and aux dtypes are always set explicitly, never left to default.
  if (call.has_bias || call.has_bias_grad) {
    const int32_t bias_type = cuda_data_type(call.has_bias ? call.bias.dtype : call.bias_grad.dtype);
    const void* bias_pointer =
        lt_with_alignment(call.has_bias ? call.bias.data : call.bias_grad.data, alignments.bias);
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type));
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer));
  }
  if (call.has_aux) {
    const int32_t aux_type = cuda_data_type(call.aux.dtype);
    const int64_t aux_ld = call.aux.ld;
    const void* aux_pointer = lt_with_alignment(call.aux.data, alignments.aux);
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type));
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld));
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p->matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux_pointer));
  }
  // Layouts as stored: A is (transa ? k x m : m x k), B is (transb ? n x k : k x n).
  struct Layout {
    cublasLtMatrixLayout_t* layout;
    const Matrix& matrix;
    const char* name;
  };
  for (const Layout& l : {Layout{&p->layout_a, call.a, "A"}, Layout{&p->layout_b, call.b, "B"},
                          Layout{&p->layout_d, call.d, "D"}}) {
    status = cublasLtMatrixLayoutCreate(l.layout, cuda_data_type(l.matrix.dtype), uint64_t(l.matrix.rows),
                                        uint64_t(l.matrix.cols), l.matrix.ld);
    if (status != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatrixLayoutCreate", l.name, status);
  }
  return Status();
}

class CublasLtBackend final : public Backend {
 public:
  CublasLtBackend() {
    const CudaDevice device = current_cuda_device();
    if (!device.present) {
      why_not_usable_ = device.why_absent;
      return;
    }
    const cublasStatus_t created = cublasLtCreate(&handle_);
    usable_ = created == CUBLAS_STATUS_SUCCESS;
    if (!usable_) why_not_usable_ = std::string("cublasLtCreate: ") + cublasLtGetStatusString(created);
    device_ = device.text();
    cudaGetLastError();
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
  // "cuBLASLt 13.1.0 fused epilogues on device 0: NVIDIA H200, compute capability 9.0".
  std::string description() const override {
    if (!usable_) return "not usable here: " + why_not_usable_;
    const size_t version = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
    return "cuBLASLt " + std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) +
           "." + std::to_string(version % 100) + " fused epilogues on " + device_;
  }

 private:
  // The cached plan of a case, built (descriptors + heuristic) on first use.
  Plan& plan_for(const GemmCall& call) const;
  // Creates the plan's descriptors and asks the heuristic for its first algorithm.
  Status find_algorithm(const GemmCall& call, Plan* p) const;

  bool usable_ = false;
  std::string why_not_usable_;
  std::string device_;  // "device 0: NVIDIA H200, compute capability 9.0"
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
  if (call.alpha == 0.0f && call.parts().bias_grad == BiasGradPart::columns_of_b) {
    // BGRADB and BGRADA are the only calls that reach a backend with alpha = 0 (the core runs the
    // others as gemm_k = 0). With BGRADB cuBLASLt multiplies its product by alpha, so a NaN or Inf
    // in A or B reaches D, which the contract leaves at beta D_old: on the H100 (2026-12-06,
    // Degenerate.AlphaZeroLeavesTheProductOut, 4 x 5 x 3, NaN operands) D came out NaN for both
    // transposes of A and beta 0 and 0.5. BGRADA kept beta D_old there, and runs here.
    return Support::no("alpha = 0 with BGRADB: cuBLASLt multiplies its product by 0, so NaN or Inf in A or B "
                       "would reach D, where the product is left out");
  }
  if (call.beta != 0.0f && call.d.dtype != EPIGEMM_DTYPE_F32) {
    // With a bf16 or f16 D, cuBLASLt rounds alpha acc to D's dtype before it adds beta D_old, so
    // D is rounded twice where the contract rounds acc + beta D_old once: on the H100 (cuBLASLt
    // 13.1, 2026-12-06, bf16, beta = 1, 48 x 40 x 64) 700 of 2560 elements were not the nearest
    // bf16 of the exact value, up to 21 bf16 ulps of the result where D_old cancels the product
    // (RoundedOnce.SixteenBitDIsTheResultRoundedOnce).
    return Support::no("beta != 0 with a 16-bit D: cuBLASLt rounds the product to D's dtype before it adds "
                       "beta D_old (two roundings where the contract has one)");
  }
  const std::string misaligned = misaligned_element(call);
  if (!misaligned.empty()) return Support::no(misaligned);
  if (call.has_aux && call.aux.ld % 8 != 0) {
    return Support::no("the aux leading dimension " + std::to_string(call.aux.ld) +
                       " is not divisible by 8 (cuBLASLt's rule for the GELU aux)");
  }
  if (call.has_bias && call.bias.dtype != call.d.dtype) return Support::no("the bias dtype differs from D's");
  if (call.has_bias_grad && call.bias_grad.dtype != call.d.dtype) {
    return Support::no("the bias_grad dtype differs from D's");
  }
  if (call.has_aux && call.aux.dtype != call.d.dtype) return Support::no("the aux dtype differs from D's");
  if (call.parts().activation == EPIGEMM_ACTIVATION_GELU_TANH && call.d.dtype == EPIGEMM_DTYPE_F32) {
    return Support::no(call.parts().backward()
                           ? "cuBLASLt's fp32 dGELU is outside the fp32 tolerance (about 1e-5 relative)"
                           : "cuBLASLt's fp32 GELU is outside the fp32 tolerance (3.5e-5 relative measured)");
  }
  const Plan& plan = plan_for(call);
  if (!plan.found) return Support::no(plan.why_not.message());
  return Support::yes();
}

Plan& CublasLtBackend::plan_for(const GemmCall& call) const {
  const PlanKey key = plan_key(call);
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  plans_.emplace(key, std::move(plan));
  p.why_not = find_algorithm(call, &p);
  p.found = p.why_not.ok();
  return p;
}

Status CublasLtBackend::find_algorithm(const GemmCall& call, Plan* p) const {
  EPIGEMM_RETURN_IF_ERROR(create_descriptors(call, p));
  PreferenceGuard guard;
  const cublasStatus_t created = cublasLtMatmulPreferenceCreate(&guard.preference);
  if (created != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmulPreferenceCreate", "", created);
  const uint64_t workspace = kWorkspaceBytes;
  // The operands' own alignments (cublaslt_alignment.hpp); C is D.
  const LtAlignments alignments = lt_alignments(call);
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.a));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.b));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.d));
  EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.d));
  // Split-K partial sums reduced in fp32 only (or no split-K): the schemes that reduce in D's type
  // (INPLACE in D itself, OUTPUT_TYPE in the workspace) round each partial sum to bf16/fp16, so
  // an element is rounded more than once (docs/conventions.md, "Data types": accumulation and
  // every reduction in at least fp32).
  // The cuda backend's cuBLAS calls make the same choice (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_
  // REDUCTION).
  const uint32_t reduction_schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  EPIGEMM_RETURN_IF_ERROR(
      EPIGEMM_LT_PREFER(guard.preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction_schemes));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, p->matmul, p->layout_a, p->layout_b, p->layout_d, p->layout_d, guard.preference, 1,
      &result, &returned);
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
    return lt_error("cublasLtMatmulAlgoGetHeuristic", epilogue_label(call.epilogue, call.activation).c_str(), status);
  }
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    return error(EPIGEMM_STATUS_NOT_SUPPORTED, "cuBLASLt has no algorithm for ",
                 epilogue_label(call.epilogue, call.activation),
                 " with these dtypes and layouts (alignments in bytes: A ", alignments.a, ", B ",
                 alignments.b, ", D ", alignments.d, ")");
  }
  p->algo = result.algo;
  return Status();
}

Status CublasLtBackend::run(const GemmCall& call) {
  Plan& p = plan_for(call);
  if (!p.found) return p.why_not;
  // The plan is shared by every call of this case: point it at this call's buffers.
  if (call.has_bias || call.has_bias_grad) {
    const void* bias_pointer = call.has_bias ? call.bias.data : call.bias_grad.data;
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer));
  }
  if (call.has_aux) {
    const void* aux_pointer = call.aux.data;
    EPIGEMM_RETURN_IF_ERROR(EPIGEMM_LT_SET(p.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux_pointer));
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
