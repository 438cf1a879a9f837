// epigemm_bench_gpu: the cuda backend against its floors and against cuBLASLt's fused epilogues,
// bf16, on the public shapes of docs/dev/cuda_backend.md, for every epilogue of each pass with each activation
// (docs/dev/cuda_backend.md explains every column).
//
// Cases: fprop DEFAULT, BIAS, and ACT, ACT_BIAS, ACT_AUX, ACT_AUX_BIAS per activation; dgrad
// DEFAULT, and DACT, DACT_BGRAD per activation; wgrad DEFAULT, BGRADB, BGRADA (GEMM coordinates
// from the table in docs/conventions.md). ACT and ACT_BIAS with the identity are DEFAULT and BIAS
// and are not repeated. For each case, in one run:
//   floor        plain cublasGemmEx, bf16 in, bf16 D, fp32 compute (the math floor), timed
//                interleaved with every variant of the case (case_floor rows)
//   floor_f32out the same GEMM writing fp32 (what the fp32-intermediate path runs), per pass
//   cuda         the `cuda` backend end to end through the public C API
//   cublaslt     the `cublaslt` backend (where it supports the case; else its reason)
//   cutlass      the `cutlass` backend (where it is built and supports the case; else its reason),
//                its outputs checked against the naive computation like cuda's
//   auto         the dispatcher
//   lt_fused     cuBLASLt with the fused epilogue called directly, where cuBLASLt has the epilogue
//                (cublaslt_epilogue.hpp: gelu_tanh, relu without aux, BIAS, BGRADB, BGRADA)
//   cuda_inplace the backend with the GEMM writing bf16 D and the epilogue in place (not the
//                contract's numerics; priced for BIAS and the gelu_tanh epilogues)
//   cuda_bias_kernel  BIAS through the fp32 intermediate and the tile kernel
//   cuda_serial  BGRADB / BGRADA with the operand's sums on the caller's stream (the default runs
//                them on a second stream, concurrently)
//   kernel       the epilogue kernel alone reading the fp32 intermediate, as the library launches
//                it; its bandwidth over the measured device-to-device copy bandwidth (and
//                kernel_cleanl2: each call after a kernel that leaves L2 clean)
//   kernel_bf16acc, kernel_broadcast  the in-place variant's kernel (BIAS and gelu_tanh) and the
//                bias broadcast of BIAS through the GEMM's beta
// Launch configurations and their variants are measured by the kernel lab,
// dev/cuda/epilogue_kernels_lab.cu, not here.
// Inputs are random (never zeros), rotated among sets totalling >= 512 MB so that the 60 MB L2
// holds no set. Before anything is timed, each case's cuda outputs are checked against a naive
// device computation of the epilogue on the same fp32 GEMM result, and against cuBLASLt's where it
// has the epilogue. Every time is the median of --reps single-call times (CUDA events) after
// --warmup calls. Writes bench_gpu.csv, bench_gpu.md and bench_dispatch.md into --out (default
// ".", made before the run), prints the kernels' activation table and the dispatch summary last.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cublaslt/cublaslt_epilogue.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/epilogue_kernels.hpp"
#include "core/epilogue_math.hpp"
#include "core/epilogue_parts.hpp"
#include "core/gemm_call.hpp"
#include "core/layer_mapping.hpp"
#include "core/names.hpp"
#include "core/validate.hpp"
#include "epigemm/epigemm.h"
#include "harness/bench_harness.hpp"
#include "harness/cuda_timing.cuh"
#include "harness/dispatch_summary.hpp"
#include "harness/layer_shapes.hpp"

namespace {

using epigemm::BiasGradPart;
using epigemm::EpilogueParts;

// The bench stops at the first failure it cannot report in its table (harness/cuda_timing.cuh).
using epigemm_bench::DeviceBuffer;
using epigemm_bench::die;
using epigemm_bench::interleaved_median_ms;
using epigemm_bench::Timing;
#define CUDA_OK(expr) EPIGEMM_BENCH_CUDA_OK(expr)
#define CUBLAS_OK(expr)                                                                      \
  do {                                                                                       \
    const cublasStatus_t st_ = (expr);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) die(std::string(#expr) + ": " + cublasGetStatusString(st_)); \
  } while (0)

// ---- device helpers --------------------------------------------------------------------------

// Counts elements of two bf16 buffers with |x - y| > atol + rtol |y|, or NaN in either.
__global__ void count_mismatches(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t count,
                                 float rtol, float atol, unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = __bfloat162float(x[i]), b = __bfloat162float(y[i]);
    if (!(fabsf(a - b) <= atol + rtol * fabsf(b))) ++local;
  }
  if (local != 0) atomicAdd(mismatches, local);
}

// ---- the naive device computation the cuda backend's outputs are checked against -----------
// One thread per element (or per sum), the activation chosen at run time, the functors of
// core/epilogue_math.hpp: nothing of the tile kernels' structure, batching or vector loads.

__device__ float naive_forward(epigemm_activation_t activation, float x) {
#define EPIGEMM_NAIVE_FORWARD(value, functor, name) \
  case value: return functor::forward(x);
  switch (activation) { EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_NAIVE_FORWARD) }
#undef EPIGEMM_NAIVE_FORWARD
  return x;
}

__device__ float naive_derivative(epigemm_activation_t activation, float x) {
#define EPIGEMM_NAIVE_DERIVATIVE(value, functor, name) \
  case value: return functor::derivative(x);
  switch (activation) { EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_NAIVE_DERIVATIVE) }
#undef EPIGEMM_NAIVE_DERIVATIVE
  return 1.0f;
}

// The parts a naive kernel needs, as plain values.
struct NaiveParts {
  bool bias, writes_aux, backward;
  epigemm_activation_t activation;
};

// acc: m x n fp32 (ld m); bias: m bf16; aux_in: m x n bf16 (ld m, backward); d, aux_out: m x n
// bf16 (ld m).
__global__ void naive_epilogue(NaiveParts parts, int64_t m, int64_t n, const float* acc,
                               const __nv_bfloat16* bias, const __nv_bfloat16* aux_in,
                               __nv_bfloat16* d, __nv_bfloat16* aux_out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m * n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % m;
    float out;
    if (parts.backward) {
      out = acc[e] * naive_derivative(parts.activation, __bfloat162float(aux_in[e]));
    } else {
      const float z = parts.bias ? acc[e] + __bfloat162float(bias[i]) : acc[e];
      if (parts.writes_aux) aux_out[e] = __float2bfloat16_rn(z);
      out = naive_forward(parts.activation, z);
    }
    d[e] = __float2bfloat16_rn(out);
  }
}

// Rows of g: out[i] = sum_j acc[i, j] act'(aux[i, j]), one thread per row.
__global__ void naive_gradient_row_sums(epigemm_activation_t activation, int64_t m, int64_t n,
                                        const float* acc, const __nv_bfloat16* aux, __nv_bfloat16* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m) return;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += acc[i + j * m] * naive_derivative(activation, __bfloat162float(aux[i + j * m]));
  out[i] = __float2bfloat16_rn(sum);
}

// An operand's sums: out[r] = sum_c x[r * row_step + c * column_step], c < terms, one thread per r.
__global__ void naive_operand_sums(const __nv_bfloat16* x, int64_t length, int64_t terms, int64_t row_step,
                                   int64_t column_step, __nv_bfloat16* out) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= length) return;
  float sum = 0.0f;
  for (int64_t c = 0; c < terms; ++c) sum += __bfloat162float(x[r * row_step + c * column_step]);
  out[r] = __float2bfloat16_rn(sum);
}

// Reads `count` 16-byte words and writes nothing (the store is never taken): run before a timed
// kernel, it leaves L2 holding clean lines of this buffer only, so that the timed kernel does not
// also pay the write-back of the previous kernel's dirty lines (tens of MB on the H200's 60 MB L2:
// 15-35 us, a quarter of a 32M-element epilogue kernel). Both figures are reported.
__global__ void read_to_clean_l2(const uint4* words, int64_t count, int* never_written) {
  uint32_t x = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 w = words[i];
    x ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (x == 0x9e3779b9u && count < 0) *never_written = int(x);
}

void fill(void* p, int64_t count, uint64_t seed, float scale) {
  epigemm_bench::fill_uniform(p, false, count, seed, scale);
}

unsigned long long mismatches(const void* x, const void* y, int64_t count, float rtol, float atol) {
  static unsigned long long* counter = nullptr;
  if (!counter) CUDA_OK(cudaMalloc(&counter, sizeof *counter));
  CUDA_OK(cudaMemset(counter, 0, sizeof *counter));
  count_mismatches<<<2048, 256>>>(static_cast<const __nv_bfloat16*>(x),
                                  static_cast<const __nv_bfloat16*>(y), count, rtol, atol, counter);
  CUDA_OK(cudaGetLastError());
  unsigned long long host = 0;
  CUDA_OK(cudaMemcpy(&host, counter, sizeof host, cudaMemcpyDeviceToHost));
  return host;
}

// ---- the cases -------------------------------------------------------------------------------

using epigemm_bench::Shape;
using epigemm_bench::kPublicShapes;
using epigemm_bench::kDeriveShapes;
using epigemm_bench::kHeldOutShapes;
using epigemm_bench::same_shape;

// "public", "derive", "heldout", or "other" for a shape given by --shapes T,I,O outside them.
std::string shape_set(const Shape& s) {
  for (const Shape& p : kPublicShapes) {
    if (same_shape(p, s)) return "public";
  }
  for (const Shape& d : kDeriveShapes) {
    if (same_shape(d, s)) return "derive";
  }
  for (const Shape& h : kHeldOutShapes) {
    if (same_shape(h, s)) return "heldout";
  }
  return "other";
}

// The shapes whose epilogue tensors the kernels' targets are stated on (docs/dev/cuda_backend.md).
bool is_largest_shape(const Shape& s) {
  return (s.tokens == 8192 && s.in == 4096 && s.out == 16384) || (s.tokens == 8192 && s.in == 16384 && s.out == 4096) ||
         (s.tokens == 16384 && s.in == 8192 && s.out == 28672);
}

enum class Pass { fprop, dgrad, wgrad };
const char* pass_name(Pass p) {
  switch (p) {
    case Pass::fprop: return "fprop";
    case Pass::dgrad: return "dgrad";
    case Pass::wgrad: return "wgrad";
  }
  return "?";
}

// One case of a pass: an epilogue with the activation of the description.
struct Case {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
  EpilogueParts parts() const { return epigemm::epilogue_parts(epilogue, activation); }
  std::string label() const { return epigemm::epilogue_label(epilogue, activation); }
};

std::vector<Case> pass_cases(Pass p, const std::vector<epigemm_activation_t>& activations) {
  // The epilogues without an activation carry the default activation, which they do not read.
  const epigemm_activation_t none = EPIGEMM_ACTIVATION_GELU_TANH;
  std::vector<Case> cases;
  switch (p) {
    case Pass::fprop:
      cases = {{EPIGEMM_EPILOGUE_DEFAULT, none}, {EPIGEMM_EPILOGUE_BIAS, none}};
      for (epigemm_activation_t a : activations) {
        for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,
                                     EPIGEMM_EPILOGUE_ACT_AUX_BIAS}) {
          // ACT and ACT_BIAS with the identity are DEFAULT and BIAS, measured above.
          if (a == EPIGEMM_ACTIVATION_IDENTITY && !epigemm::epilogue_parts(e, a).uses_aux()) continue;
          cases.push_back({e, a});
        }
      }
      break;
    case Pass::dgrad:
      cases = {{EPIGEMM_EPILOGUE_DEFAULT, none}};
      for (epigemm_activation_t a : activations) {
        cases.push_back({EPIGEMM_EPILOGUE_DACT, a});
        cases.push_back({EPIGEMM_EPILOGUE_DACT_BGRAD, a});
      }
      break;
    case Pass::wgrad:
      cases = {{EPIGEMM_EPILOGUE_DEFAULT, none}, {EPIGEMM_EPILOGUE_BGRADB, none}, {EPIGEMM_EPILOGUE_BGRADA, none}};
      break;
  }
  return cases;
}

// One rotation set: every tensor of the three passes of a shape, row-major framework tensors
// (docs/conventions.md, "Layout"), bf16.
struct TensorSet {
  std::unique_ptr<DeviceBuffer> x, w, dy, y, pre_act, dx, pre_act_prev, dw, bias, bias_grad_in,
      bias_grad_out, acc_f32;
};

// A pass's GEMM in GEMM coordinates over one set's buffers (docs/conventions.md, "Layout").
struct GemmShape {
  epigemm_op_t transa, transb;
  int64_t m, n, k, lda, ldb, ldd;
  const void *a, *b;
  void* d;
  void* aux;          // pre_act (fprop, written) or pre_act_prev (dgrad, read); ld = m
  void* bias_grad_m;  // length gemm_m: DACT_BGRAD (dgrad), BGRADA (wgrad)
  void* bias_grad_n;  // length gemm_n: BGRADB (wgrad)
};

GemmShape gemm_shape(const Shape& s, Pass p, const TensorSet& t) {
  // The tensors as a framework holds them (row-major, contiguous), put into GEMM coordinates by
  // the library's one mapping (src/core/layer_mapping.cpp).
  auto tensor = [](const void* data, int64_t rows, int64_t cols) {
    return epigemm_tensor_t{const_cast<void*>(data), EPIGEMM_DTYPE_BF16, rows, cols, cols, EPIGEMM_MEMORY_DEVICE};
  };
  const epigemm_tensor_t x = tensor(t.x->ptr, s.tokens, s.in), w = tensor(t.w->ptr, s.out, s.in);
  const epigemm_tensor_t y = tensor(t.y->ptr, s.tokens, s.out), dy = tensor(t.dy->ptr, s.tokens, s.out);
  const epigemm_tensor_t dx = tensor(t.dx->ptr, s.tokens, s.in), dw = tensor(t.dw->ptr, s.out, s.in);
  epigemm::LayerTensors layer;
  epigemm::LayerPass layer_pass = epigemm::LayerPass::fprop;
  void* aux = nullptr;
  void* bias_grad_m = nullptr;
  void* bias_grad_n = nullptr;
  switch (p) {
    case Pass::fprop:
      layer.x = &x, layer.w = &w, layer.y = &y;
      aux = t.pre_act->ptr;
      break;
    case Pass::dgrad:
      layer.dy = &dy, layer.w = &w, layer.dx = &dx;
      layer_pass = epigemm::LayerPass::dgrad;
      aux = t.pre_act_prev->ptr;
      bias_grad_m = t.bias_grad_in->ptr;  // gemm_m = in_features
      break;
    case Pass::wgrad:
      layer.x = &x, layer.dy = &dy, layer.dw = &dw;
      layer_pass = epigemm::LayerPass::wgrad;
      bias_grad_m = t.bias_grad_in->ptr;   // gemm_m = in_features: BGRADA, the sum of X over tokens
      bias_grad_n = t.bias_grad_out->ptr;  // gemm_n = out_features: BGRADB, the sum of dY over tokens
      break;
  }
  epigemm::GemmCall call;
  if (!epigemm::map_layer_to_gemm(layer_pass, layer, &call).ok()) die("map_layer_to_gemm refused a public shape");
  return GemmShape{call.transa, call.transb, call.gemm_m, call.gemm_n, call.gemm_k, call.a.ld, call.b.ld,
                   call.d.ld, call.a.data, call.b.data, call.d.data, aux, bias_grad_m, bias_grad_n};
}

// The internal call (GEMM coordinates) for the variants run on a backend object directly.
epigemm::GemmCall internal_call(const GemmShape& g, const Case& cs, const TensorSet& t, void* ws,
                                size_t ws_bytes, cudaStream_t stream) {
  using epigemm::Matrix;
  epigemm::GemmCall c;
  c.transa = g.transa;
  c.transb = g.transb;
  const auto bf16 = EPIGEMM_DTYPE_BF16;
  const auto dev = EPIGEMM_MEMORY_DEVICE;
  const bool ta = g.transa == EPIGEMM_OP_T, tb = g.transb == EPIGEMM_OP_T;
  c.a = Matrix{const_cast<void*>(g.a), bf16, ta ? g.k : g.m, ta ? g.m : g.k, g.lda, dev};
  c.b = Matrix{const_cast<void*>(g.b), bf16, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb, dev};
  c.d = Matrix{g.d, bf16, g.m, g.n, g.ldd, dev};
  epigemm::gemm_dims_from_operands(&c);
  c.epilogue = cs.epilogue;
  c.activation = cs.activation;
  const EpilogueParts parts = cs.parts();
  if (parts.reads_bias()) {
    c.has_bias = true;
    c.bias = epigemm::Vector{t.bias->ptr, bf16, g.m, dev};
  }
  if (parts.uses_aux()) {
    c.has_aux = true;
    c.aux = Matrix{g.aux, bf16, g.m, g.n, g.m, dev};
  }
  if (parts.writes_bias_grad()) {
    c.has_bias_grad = true;
    void* data = parts.bias_grad == BiasGradPart::columns_of_b ? g.bias_grad_n : g.bias_grad_m;
    if (data == nullptr) die("no bias-gradient buffer for " + cs.label() + " in this pass");
    c.bias_grad = epigemm::Vector{data, bf16, c.bias_grad_length(), dev};
  }
  c.backend = EPIGEMM_BACKEND_CUDA;
  c.workspace = ws;
  c.workspace_bytes = ws_bytes;
  c.stream = stream;
  return c;
}

// The public-API view of the same call.
struct ApiCall {
  epigemm_matrix_t a, b, d;
  epigemm_gemm_desc_t desc = nullptr;
};
ApiCall api_call(const epigemm::GemmCall& c, epigemm_backend_t backend = EPIGEMM_BACKEND_CUDA) {
  ApiCall api;
  auto mat = [](const epigemm::Matrix& m) {
    return epigemm_matrix_t{m.data, m.dtype, m.rows, m.cols, m.ld, m.memory};
  };
  api.a = mat(c.a);
  api.b = mat(c.b);
  api.d = mat(c.d);
  auto ok = [](epigemm_status_t status, const char* what) {
    if (status != EPIGEMM_STATUS_SUCCESS) die(std::string(what) + " failed: " + epigemm_status_name(status));
  };
  ok(epigemm_gemm_desc_create(&api.desc), "epigemm_gemm_desc_create");
  ok(epigemm_gemm_desc_set_transpose(api.desc, c.transa, c.transb), "epigemm_gemm_desc_set_transpose");
  ok(epigemm_gemm_desc_set_epilogue(api.desc, c.epilogue), "epigemm_gemm_desc_set_epilogue");
  ok(epigemm_gemm_desc_set_activation(api.desc, c.activation), "epigemm_gemm_desc_set_activation");
  ok(epigemm_gemm_desc_set_backend(api.desc, backend), "epigemm_gemm_desc_set_backend");
  if (c.has_bias) {
    const epigemm_vector_t v{c.bias.data, c.bias.dtype, c.bias.length, c.bias.memory};
    ok(epigemm_gemm_desc_set_bias(api.desc, &v), "epigemm_gemm_desc_set_bias");
  }
  if (c.has_aux) {
    const epigemm_matrix_t m = mat(c.aux);
    ok(epigemm_gemm_desc_set_aux(api.desc, &m), "epigemm_gemm_desc_set_aux");
  }
  if (c.has_bias_grad) {
    const epigemm_vector_t v{c.bias_grad.data, c.bias_grad.dtype, c.bias_grad.length,
                             c.bias_grad.memory};
    ok(epigemm_gemm_desc_set_bias_grad(api.desc, &v), "epigemm_gemm_desc_set_bias_grad");
  }
  return api;
}

// cuBLASLt with the fused epilogue for one call; found = false when cuBLASLt has no such
// epilogue (cublaslt_epilogue.hpp) or its heuristic no algorithm.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool found = false;
  ~LtCall() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

constexpr size_t kLtWorkspace = size_t(32) << 20;

void lt_setup(cublasLtHandle_t lt, const epigemm::GemmCall& c, LtCall* call) {
  const epigemm::LtEpilogue epilogue = epigemm::lt_epilogue(c);
  if (!epilogue.found) return;
  CUBLAS_OK(cublasLtMatmulDescCreate(&call->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = c.transa == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = c.transb == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue.value,
                                           sizeof epilogue.value));
  const cudaDataType_t bf16 = CUDA_R_16BF;
  if (c.has_bias || c.has_bias_grad) {
    const void* p = c.has_bias ? c.bias.data : c.bias_grad.data;
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf16,
                                             sizeof bf16));
  }
  if (c.has_aux) {
    const void* p = c.aux.data;
    const int64_t ld = c.aux.ld;
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p,
                                             sizeof p));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                             &bf16, sizeof bf16));
  }
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&call->a, CUDA_R_16BF, uint64_t(c.a.rows), uint64_t(c.a.cols), c.a.ld));
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&call->b, CUDA_R_16BF, uint64_t(c.b.rows), uint64_t(c.b.cols), c.b.ld));
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&call->d, CUDA_R_16BF, uint64_t(c.d.rows), uint64_t(c.d.cols), c.d.ld));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &kLtWorkspace, sizeof kLtWorkspace));
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, call->desc, call->a, call->b, call->d,
                                                           call->d, pref, 1, &call->heuristic, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  call->found = st == CUBLAS_STATUS_SUCCESS && returned > 0;
}

void lt_run(cublasLtHandle_t lt, const epigemm::GemmCall& c, const LtCall& call, void* ws,
            cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_OK(cublasLtMatmul(lt, call.desc, &alpha, c.a.data, call.a, c.b.data, call.b, &beta, c.d.data,
                           call.d, c.d.data, call.d, &call.heuristic.algo, ws, kLtWorkspace, stream));
}

// ---- results ---------------------------------------------------------------------------------

struct Row {
  std::string shape, pass, epilogue, activation, variant;
  double ms = NAN;
  double ratio_to_floor = NAN;
  double bytes = NAN;      // kernels: bytes moved; e2e: the epilogue's bytes floor
  double bandwidth = NAN;  // TB/s (kernels)
  std::string check;
  epigemm_epilogue_t epilogue_value = EPIGEMM_EPILOGUE_DEFAULT;  // the case's (kernel rows)
};

std::string shape_name(const Shape& s) {
  std::ostringstream o;
  o << s.tokens << "," << s.in << "," << s.out;
  return o.str();
}

// The fewest bytes an epilogue must move beside the GEMM (its "bytes floor"): D re-read and
// re-written in its own dtype where the epilogue computes on acc, aux written or read once, the
// operand read once for BGRADB / BGRADA (bf16 throughout).
double epilogue_floor_bytes(const EpilogueParts& parts, int64_t m, int64_t n, int64_t k) {
  const double elems = double(m) * double(n);
  switch (parts.bias_grad) {
    case BiasGradPart::columns_of_b: return 2.0 * double(k) * double(n);
    case BiasGradPart::rows_of_a: return 2.0 * double(k) * double(m);
    case BiasGradPart::none:
    case BiasGradPart::rows_of_gradient: break;
  }
  if (!parts.computes_on_acc()) return 0.0;
  return (parts.uses_aux() ? 6.0 : 4.0) * elems;
}

// Bytes the tile kernel moves over rows x cols, reading acc of `acc_bytes` per element (D, aux
// and the operands in bf16).
double kernel_bytes(epigemm::cuda::TileOp op, int64_t rows, int64_t cols, double acc_bytes) {
  const epigemm::cuda::TileOpParts p = epigemm::cuda::tile_op_parts(op);
  const double elems = double(rows) * double(cols);
  double per_element = 0.0;
  if (p.reads_acc) per_element += acc_bytes;
  if (p.reads_aux || p.writes_aux) per_element += 2.0;
  if (p.writes_d) per_element += 2.0;
  return elems * per_element;
}

std::string fmt(double v, int digits = 3) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::vector<epigemm_activation_t> parse_activations(const std::string& list) {
  std::vector<epigemm_activation_t> all;
#define EPIGEMM_BENCH_ACTIVATION(value, functor, name) all.push_back(value);
  EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_BENCH_ACTIVATION)
#undef EPIGEMM_BENCH_ACTIVATION
  if (list == "all") return all;
  std::vector<epigemm_activation_t> chosen;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    bool known = false;
    for (epigemm_activation_t a : all) {
      if (item == epigemm::activation_name(a)) {
        chosen.push_back(a);
        known = true;
      }
    }
    if (!known) die("--activations: '" + item + "' is not one of identity, gelu_tanh, gelu_erf, relu, silu (or all)");
  }
  if (chosen.empty()) die("--activations: expected a comma-separated list of activations, or all");
  return chosen;
}

}  // namespace

// A result row as the dispatch figures read it (harness/dispatch_summary.hpp).
epigemm_bench::CaseRow case_row_of(const Row& r) {
  return epigemm_bench::CaseRow{r.shape, r.pass, r.epilogue, r.activation, r.variant, r.ms, r.ratio_to_floor};
}

constexpr char kUsage[] =
    "usage: epigemm_bench_gpu [--out DIR] [--reps N] [--warmup N]\n"
    "                         [--shapes all|small|derive|heldout|generalization|T,I,O;...]\n"
    "                         [--passes fprop,dgrad,wgrad] [--dtype bf16]\n"
    "                         [--activations all|identity,gelu_tanh,gelu_erf,relu,silu]";

int main(int argc, char** argv) {
  epigemm_bench::set_program_name("epigemm_bench_gpu");
  std::string out_dir = ".";
  Timing timing;
  std::string which = "all";
  std::string passes_arg = "fprop,dgrad,wgrad";
  std::string activations_arg = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--out") out_dir = value();
    else if (arg == "--reps") timing.reps = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup") timing.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--shapes") which = value();  // all | small | derive | heldout | generalization | T,I,O;...
    else if (arg == "--passes") passes_arg = value();  // e.g. fprop,wgrad
    else if (arg == "--activations") activations_arg = value();  // e.g. gelu_tanh,silu | all
    else if (arg == "--dtype") {
      // The harness's buffers, fills and cuBLAS types are bf16 throughout; other dtypes are
      // measured by the test matrix for correctness but not benchmarked yet.
      if (value() != "bf16") die("--dtype: only bf16 is benchmarked on the GPU so far");
    } else if (arg == "--help" || arg == "-h") {
      std::printf("%s\n"
                  "Writes bench_gpu.csv, bench_gpu.md and bench_dispatch.md into --out (default: the\n"
                  "current directory; created if missing). docs/dispatch.md says how to read them.\n", kUsage);
      return 0;
    } else {
      // A usage mistake: one line, exit code 2 (as the epigemm program's).
      std::fprintf(stderr, "epigemm_bench_gpu: unknown option %s (see epigemm_bench_gpu --help)\n", arg.c_str());
      return 2;
    }
  }
  // Made now, not after the run: a run of minutes must not end unable to write its tables.
  if (const std::string out_error = epigemm_bench::make_output_directory(out_dir); !out_error.empty()) {
    std::fprintf(stderr, "epigemm_bench_gpu: %s\n", out_error.c_str());
    return 2;
  }
  const std::vector<epigemm_activation_t> activations = parse_activations(activations_arg);

  // ---- the device and the copy ceiling ----
  int device = 0;
  CUDA_OK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, cublas_version = 0;
  CUDA_OK(cudaDriverGetVersion(&driver));
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  cublasHandle_t blas = nullptr;
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasGetVersion(blas, &cublas_version));
  CUBLAS_OK(cublasSetMathMode(blas, cublasMath_t(CUBLAS_DEFAULT_MATH |
                                                 CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  cublasLtHandle_t lt = nullptr;
  CUBLAS_OK(cublasLtCreate(&lt));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::ostringstream header;
  header << "device: " << prop.name << " (" << prop.multiProcessorCount << " SMs, L2 "
         << prop.l2CacheSize / (1 << 20) << " MB), driver " << driver / 1000 << "." << (driver % 1000) / 10
         << ", CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", cuBLAS "
         << cublas_version << ", date " << date << ", median of " << timing.reps << " after "
         << timing.warmup << " warm-up calls";
  std::printf("%s\n", header.str().c_str());

  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const double copy_tbps = epigemm_bench::copy_tbps(timing, stream);
  std::printf("device-to-device copy: %.3f TB/s (2 GiB, read + write counted)\n", copy_tbps);

  // Read before each "clean L2" kernel timing: 4x the L2 (60 MB on the H200).
  DeviceBuffer l2_clean_buffer(size_t(256) << 20), l2_clean_sink(sizeof(int));
  CUDA_OK(cudaMemsetAsync(l2_clean_buffer.ptr, 0, size_t(256) << 20, stream));
  auto clean_l2 = [&] {
    read_to_clean_l2<<<1024, 256, 0, stream>>>(static_cast<const uint4*>(l2_clean_buffer.ptr),
                                              int64_t(size_t(256) << 20) / 16,
                                              static_cast<int*>(l2_clean_sink.ptr));
  };

  epigemm_context_t ctx = nullptr;
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) die("epigemm_context_create failed");
  if (!epigemm_backend_usable(ctx, EPIGEMM_BACKEND_CUDA)) die("the cuda backend is not usable here");
  epigemm::CudaBackendOptions inplace_options;
  inplace_options.fp32_intermediate = false;
  inplace_options.bias_through_gemm_beta = false;
  epigemm::CudaBackendOptions bias_kernel_options;  // BIAS: fp32 intermediate + the tile kernel
  bias_kernel_options.bias_through_gemm_beta = false;
  epigemm::CudaBackendOptions serial_options;
  serial_options.concurrent_operand_sums = false;
  auto inplace_backend = epigemm::create_cuda_backend(inplace_options);
  auto serial_backend = epigemm::create_cuda_backend(serial_options);
  auto bias_kernel_backend = epigemm::create_cuda_backend(bias_kernel_options);
  epigemm::cuda::KernelTuning tuning;
  const epigemm::Status tuned = epigemm::cuda::query_kernel_tuning(&tuning);
  if (!tuned.ok()) die("query_kernel_tuning: " + tuned.message());

  std::vector<Row> rows;

  std::map<std::string, std::array<int64_t, 3>> gemm_dims_of;  // shape|pass -> gemm_m, gemm_n, gemm_k
  std::map<std::string, std::string> set_of_shape;               // shape -> shape_set()
  std::vector<Shape> shapes(std::begin(kPublicShapes), std::end(kPublicShapes));
  if (which == "small") shapes = {kPublicShapes[2], kPublicShapes[4]};
  if (which == "derive" || which == "generalization") shapes.assign(std::begin(kDeriveShapes), std::end(kDeriveShapes));
  if (which == "heldout") shapes.clear();
  if (which == "heldout" || which == "generalization") {
    shapes.insert(shapes.end(), std::begin(kHeldOutShapes), std::end(kHeldOutShapes));
  }
  const bool named_set = which == "all" || which == "small" || which == "derive" || which == "heldout" ||
                         which == "generalization";
  if (!named_set) {  // explicit "tokens,in,out;tokens,in,out"
    shapes.clear();
    std::stringstream list(which);
    std::string item;
    while (std::getline(list, item, ';')) {
      long long t = 0, i = 0, o = 0;
      if (std::sscanf(item.c_str(), "%lld,%lld,%lld", &t, &i, &o) != 3 || t <= 0 || i <= 0 || o <= 0) {
        die("--shapes: '" + item + "' is not tokens,in,out with positive sizes");
      }
      shapes.push_back(Shape{t, i, o});
    }
  }
  std::vector<Pass> passes;
  for (Pass p : {Pass::fprop, Pass::dgrad, Pass::wgrad}) {
    if (("," + passes_arg + ",").find("," + std::string(pass_name(p)) + ",") != std::string::npos) passes.push_back(p);
  }
  if (passes.empty()) die("--passes: expected a comma-separated subset of fprop,dgrad,wgrad");
  int cases_total = 0, cases_done = 0;
  for (Pass p : passes) cases_total += int(shapes.size() * pass_cases(p, activations).size());
  std::printf("%d cases (%zu shapes, %zu activations)\n", cases_total, shapes.size(), activations.size());

  for (const Shape& s : shapes) {
    const int64_t T = s.tokens, I = s.in, O = s.out;
    const size_t e2 = 2;
    const size_t set_bytes = e2 * size_t(T * I * 3 + O * I * 2 + T * O * 3) + 4 * size_t(std::max({O * T, I * T, O * I}));
    const int sets = int(std::min<size_t>(8, std::max<size_t>(1, (size_t(512) << 20) / set_bytes + 1)));
    std::vector<TensorSet> tsets(static_cast<size_t>(sets));
    for (int r = 0; r < sets; ++r) {
      TensorSet& t = tsets[size_t(r)];
      auto make = [](size_t elems, size_t bytes_per) { return std::make_unique<DeviceBuffer>(elems * bytes_per); };
      t.x = make(size_t(T * I), 2);
      t.w = make(size_t(O * I), 2);
      t.dy = make(size_t(T * O), 2);
      t.y = make(size_t(T * O), 2);
      t.pre_act = make(size_t(T * O), 2);
      t.dx = make(size_t(T * I), 2);
      t.pre_act_prev = make(size_t(T * I), 2);
      t.dw = make(size_t(O * I), 2);
      t.bias = make(size_t(O), 2);
      t.bias_grad_in = make(size_t(I), 2);
      t.bias_grad_out = make(size_t(O), 2);
      t.acc_f32 = make(size_t(std::max({O * T, I * T, O * I})), 4);
      const uint64_t seed = 1000 + uint64_t(r) * 16;
      fill(t.x->ptr, T * I, seed + 1, 1.0f);
      // Scaled so that acc = X W^T has a standard deviation near 1 (the activations' interesting range).
      fill(t.w->ptr, O * I, seed + 2, 3.0f / std::sqrt(float(I)));
      fill(t.dy->ptr, T * O, seed + 3, 1.0f);
      fill(t.pre_act_prev->ptr, T * I, seed + 4, 3.0f);
      fill(t.bias->ptr, O, seed + 5, 1.0f);
    }
    DeviceBuffer cublas_ws(kLtWorkspace), lt_ws(kLtWorkspace);
    const std::string sname = shape_name(s);
    set_of_shape[sname] = shape_set(s);
    std::printf("shape %s: %d rotation set(s) of %.0f MB\n", sname.c_str(), sets, double(set_bytes) / 1e6);
    std::fflush(stdout);

    for (Pass p : passes) {
      const GemmShape g0 = gemm_shape(s, p, tsets[0]);
      gemm_dims_of[sname + "|" + pass_name(p)] = {g0.m, g0.n, g0.k};
      // The floors: the plain GEMM into bf16 and into fp32.
      auto plain_gemm = [&](const GemmShape& g, void* out, cudaDataType_t out_type, int64_t ldo) {
        const float alpha = 1.0f, beta = 0.0f;
        CUBLAS_OK(cublasSetStream(blas, stream));
        CUBLAS_OK(cublasSetWorkspace(blas, cublas_ws.ptr, kLtWorkspace));
        CUBLAS_OK(cublasGemmEx(blas, g.transa == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N,
                               g.transb == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.m), int(g.n),
                               int(g.k), &alpha, g.a, CUDA_R_16BF, int(g.lda), g.b, CUDA_R_16BF, int(g.ldb),
                               &beta, out, out_type, int(ldo), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      auto run_floor = [&](int rep) {
        const GemmShape g = gemm_shape(s, p, tsets[size_t(rep % sets)]);
        plain_gemm(g, g.d, CUDA_R_16BF, g.ldd);
      };
      const std::vector<double> floors = interleaved_median_ms(
          timing, stream,
          {run_floor, [&](int rep) {
             const TensorSet& t = tsets[size_t(rep % sets)];
             const GemmShape g = gemm_shape(s, p, t);
             plain_gemm(g, t.acc_f32->ptr, CUDA_R_32F, g.m);
           }});
      const double pass_floor_ms = floors[0];
      const double tflops = 2.0 * double(g0.m) * double(g0.n) * double(g0.k) / (pass_floor_ms * 1e-3) / 1e12;
      rows.push_back({sname, pass_name(p), "-", "-", "floor", pass_floor_ms, 1.0, NAN, tflops, ""});
      rows.push_back({sname, pass_name(p), "-", "-", "floor_f32out", floors[1], floors[1] / pass_floor_ms, NAN, NAN, ""});

      for (const Case& cs : pass_cases(p, activations)) {
        const EpilogueParts parts = cs.parts();
        const std::string ename = cs.label();
        const std::string aname = epigemm::activation_name(parts.activation);
        // Calls per rotation set: public API, internal variants, cuBLASLt.
        size_t ws_bytes = 0;
        {
          epigemm::GemmCall probe = internal_call(g0, cs, tsets[0], nullptr, 0, stream);
          ApiCall api = api_call(probe);
          if (epigemm_gemm_workspace_size(ctx, api.desc, &api.a, &api.b, &api.d, &ws_bytes) != EPIGEMM_STATUS_SUCCESS) {
            die(std::string("workspace size: ") + epigemm_context_last_error(ctx));
          }
          epigemm_gemm_desc_destroy(api.desc);
          for (epigemm_backend_t other : {EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS, EPIGEMM_BACKEND_AUTO}) {
            ApiCall api_other = api_call(probe, other);
            size_t other_bytes = 0;
            if (epigemm_gemm_workspace_size(ctx, api_other.desc, &api_other.a, &api_other.b, &api_other.d,
                                            &other_bytes) == EPIGEMM_STATUS_SUCCESS) {
              ws_bytes = std::max(ws_bytes, other_bytes);
            }
            epigemm_gemm_desc_destroy(api_other.desc);
          }
          ws_bytes = std::max({ws_bytes, inplace_backend->workspace_bytes(probe),
                               serial_backend->workspace_bytes(probe),
                               bias_kernel_backend->workspace_bytes(probe)});
        }
        DeviceBuffer ws(ws_bytes);
        std::vector<epigemm::GemmCall> calls;
        std::vector<ApiCall> apis, apis_cublaslt, apis_cutlass, apis_auto;
        std::vector<std::unique_ptr<LtCall>> lts;
        for (int r = 0; r < sets; ++r) {
          const GemmShape g = gemm_shape(s, p, tsets[size_t(r)]);
          calls.push_back(internal_call(g, cs, tsets[size_t(r)], ws.ptr, ws_bytes, stream));
          const epigemm::Status valid = epigemm::validate_gemm_call(calls.back());
          if (!valid.ok()) die("the internal call of " + ename + " does not validate: " + valid.message());
          apis.push_back(api_call(calls.back()));
          apis_cublaslt.push_back(api_call(calls.back(), EPIGEMM_BACKEND_CUBLASLT));
          apis_cutlass.push_back(api_call(calls.back(), EPIGEMM_BACKEND_CUTLASS));
          apis_auto.push_back(api_call(calls.back(), EPIGEMM_BACKEND_AUTO));
          lts.push_back(std::make_unique<LtCall>());
          lt_setup(lt, calls.back(), lts.back().get());
        }
        const epigemm::LtEpilogue lt_epilogue = epigemm::lt_epilogue(calls[0]);
        auto run_api = [&](const std::vector<ApiCall>& list, int rep) {
          const ApiCall& a = list[size_t(rep % sets)];
          if (epigemm_gemm(ctx, a.desc, &a.a, &a.b, &a.d, ws.ptr, ws_bytes, stream) != EPIGEMM_STATUS_SUCCESS) {
            die(std::string("epigemm_gemm: ") + epigemm_context_last_error(ctx));
          }
        };
        auto run_cuda = [&](int rep) { run_api(apis, rep); };
        const bool lt_ok = lts[0]->found;
        // The library's cublaslt backend and its dispatcher, through the public API. The
        // backend may decline a case (docs/dispatch.md); auto always runs.
        size_t probe_bytes = 0;
        const bool backend_lt_ok =
            epigemm_gemm_workspace_size(ctx, apis_cublaslt[0].desc, &apis_cublaslt[0].a, &apis_cublaslt[0].b,
                                        &apis_cublaslt[0].d, &probe_bytes) == EPIGEMM_STATUS_SUCCESS;
        const std::string lt_declined = backend_lt_ok ? "" : epigemm_context_last_error(ctx);
        // The cutlass backend likewise (not compiled in, not usable here, or declined: the reason).
        const bool backend_cutlass_ok =
            epigemm_gemm_workspace_size(ctx, apis_cutlass[0].desc, &apis_cutlass[0].a, &apis_cutlass[0].b,
                                        &apis_cutlass[0].d, &probe_bytes) == EPIGEMM_STATUS_SUCCESS;
        const std::string cutlass_declined = backend_cutlass_ok ? "" : epigemm_context_last_error(ctx);
        run_api(apis_auto, 0);
        epigemm_backend_t auto_choice = EPIGEMM_BACKEND_AUTO;
        if (epigemm_context_last_backend(ctx, &auto_choice, nullptr) != EPIGEMM_STATUS_SUCCESS) {
          die("epigemm_context_last_backend failed");
        }
        const std::string auto_note = std::string("auto ran ") + epigemm_backend_name(auto_choice);

        // Correctness before timing, on set 0: the cuda backend against the naive computation
        // on the plain GEMM's fp32 result, and against cuBLASLt's fused epilogue where it has one.
        std::string check, cutlass_check;
        {
          const epigemm::GemmCall& c = calls[0];
          const int64_t m = c.gemm_m, n = c.gemm_n, elems = m * n;
          const int64_t bg_len = c.has_bias_grad ? c.bias_grad.length : 0;
          DeviceBuffer d_ref(size_t(elems) * 2), aux_ref(size_t(elems) * 2), bg_ref(size_t(std::max<int64_t>(bg_len, 1)) * 2);
          plain_gemm(g0, tsets[0].acc_f32->ptr, CUDA_R_32F, m);
          const float* acc = static_cast<const float*>(tsets[0].acc_f32->ptr);
          const NaiveParts naive{parts.reads_bias(), parts.writes_aux(), parts.backward(), parts.activation};
          naive_epilogue<<<4096, 256, 0, stream>>>(naive, m, n, acc,
                                                  static_cast<const __nv_bfloat16*>(c.has_bias ? c.bias.data : nullptr),
                                                  static_cast<const __nv_bfloat16*>(parts.reads_aux() ? c.aux.data : nullptr),
                                                  static_cast<__nv_bfloat16*>(d_ref.ptr),
                                                  static_cast<__nv_bfloat16*>(aux_ref.ptr));
          CUDA_OK(cudaGetLastError());
          const unsigned blocks = unsigned((std::max<int64_t>(bg_len, 1) + 255) / 256);
          switch (parts.bias_grad) {
            case BiasGradPart::rows_of_gradient:
              naive_gradient_row_sums<<<blocks, 256, 0, stream>>>(parts.activation, m, n, acc,
                                                                  static_cast<const __nv_bfloat16*>(c.aux.data),
                                                                  static_cast<__nv_bfloat16*>(bg_ref.ptr));
              break;
            case BiasGradPart::columns_of_b: {  // op(B)[p, j] = B[p, j] (N) or B[j, p] (T)
              const bool t = c.transb == EPIGEMM_OP_T;
              naive_operand_sums<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(c.b.data), bg_len,
                                                             c.gemm_k, t ? 1 : c.b.ld, t ? c.b.ld : 1,
                                                             static_cast<__nv_bfloat16*>(bg_ref.ptr));
              break;
            }
            case BiasGradPart::rows_of_a: {  // op(A)[i, p] = A[i, p] (N) or A[p, i] (T)
              const bool t = c.transa == EPIGEMM_OP_T;
              naive_operand_sums<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(c.a.data), bg_len,
                                                             c.gemm_k, t ? c.a.ld : 1, t ? 1 : c.a.ld,
                                                             static_cast<__nv_bfloat16*>(bg_ref.ptr));
              break;
            }
            case BiasGradPart::none: break;
          }
          CUDA_OK(cudaGetLastError());
          DeviceBuffer d_lt(size_t(elems) * 2), aux_lt(size_t(elems) * 2), bg_lt(size_t(std::max<int64_t>(bg_len, 1)) * 2);
          if (lt_ok) {
            lt_run(lt, c, *lts[0], lt_ws.ptr, stream);
            CUDA_OK(cudaMemcpyAsync(d_lt.ptr, c.d.data, size_t(elems) * 2, cudaMemcpyDeviceToDevice, stream));
            if (parts.writes_aux()) {
              CUDA_OK(cudaMemcpyAsync(aux_lt.ptr, c.aux.data, size_t(elems) * 2, cudaMemcpyDeviceToDevice, stream));
            }
            if (bg_len) CUDA_OK(cudaMemcpyAsync(bg_lt.ptr, c.bias_grad.data, size_t(bg_len) * 2, cudaMemcpyDeviceToDevice, stream));
          }
          run_cuda(0);
          CUDA_OK(cudaStreamSynchronize(stream));
          // bf16 outputs of two fp32 computations: a few bf16 ulps apart at most. Sums of up to
          // 28672 terms of size ~1, rounded to bf16: relative 2^-6 plus a summation-order
          // allowance.
          const int64_t terms = parts.bias_grad == BiasGradPart::rows_of_gradient ? n : c.gemm_k;
          // Elements of the outputs at d, aux and bias_grad outside the tolerance of the naive ones.
          auto off_naive = [&](const void* d, const void* aux, const void* bias_grad) {
            unsigned long long bad = mismatches(d, d_ref.ptr, elems, 1.0f / 32, 1.0f / 64);
            if (parts.writes_aux()) bad += mismatches(aux, aux_ref.ptr, elems, 1.0f / 64, 1.0f / 256);
            const unsigned long long bad_bg =
                bg_len ? mismatches(bias_grad, bg_ref.ptr, bg_len, 1.0f / 64, 0.02f * std::sqrt(float(terms))) : 0;
            return std::make_pair(bad, bad_bg);
          };
          const auto vs_ref = off_naive(c.d.data, c.aux.data, c.bias_grad.data);
          check = vs_ref.first == 0 && vs_ref.second == 0
                      ? "ok"
                      : "MISMATCH vs naive: d/aux " + std::to_string(vs_ref.first) + ", bias_grad " + std::to_string(vs_ref.second);
          // cuBLASLt called directly, against the same naive result: reported, not a failure of
          // ours. Left free (as here), it adds split-K partial sums in bf16 on skinny long-k
          // GEMMs, which the cublaslt backend does not allow (docs/dispatch.md).
          if (lt_ok) {
            const auto vs_lt = off_naive(d_lt.ptr, aux_lt.ptr, bg_lt.ptr);
            if (vs_lt.first != 0 || vs_lt.second != 0) {
              check += "; cuBLASLt fused off the naive result: d/aux " + std::to_string(vs_lt.first) + ", bias_grad " +
                       std::to_string(vs_lt.second);
            }
          }
          // The cutlass backend's outputs on the same set against the same naive computation.
          if (backend_cutlass_ok) {
            run_api(apis_cutlass, 0);
            CUDA_OK(cudaStreamSynchronize(stream));
            const auto vs_ref_cutlass = off_naive(c.d.data, c.aux.data, c.bias_grad.data);
            cutlass_check = vs_ref_cutlass.first == 0 && vs_ref_cutlass.second == 0
                                ? "ok"
                                : "MISMATCH vs naive: d/aux " + std::to_string(vs_ref_cutlass.first) +
                                      ", bias_grad " + std::to_string(vs_ref_cutlass.second);
          }
        }

        const double fb = epilogue_floor_bytes(parts, g0.m, g0.n, g0.k);
        // floor, cuda, then the others, interleaved; every ratio is to the floor of this loop.
        std::vector<std::function<void(int)>> fns = {run_floor, run_cuda};
        std::vector<std::string> names = {"floor", "cuda"};
        if (lt_ok) {
          fns.push_back([&](int rep) {
            const int r = rep % sets;
            lt_run(lt, calls[size_t(r)], *lts[size_t(r)], lt_ws.ptr, stream);
          });
          names.push_back("lt_fused");
        }
        if (backend_lt_ok) {
          fns.push_back([&](int rep) { run_api(apis_cublaslt, rep); });
          names.push_back("cublaslt");
        }
        if (backend_cutlass_ok) {
          fns.push_back([&](int rep) { run_api(apis_cutlass, rep); });
          names.push_back("cutlass");
        }
        fns.push_back([&](int rep) { run_api(apis_auto, rep); });
        names.push_back("auto");
        const bool bias_only = cs.epilogue == EPIGEMM_EPILOGUE_BIAS;
        if (parts.computes_on_acc() && (bias_only || parts.activation == EPIGEMM_ACTIVATION_GELU_TANH)) {
          fns.push_back([&](int rep) {
            const epigemm::Status ran = inplace_backend->run(calls[size_t(rep % sets)]);
            if (!ran.ok()) die("cuda_inplace: " + ran.message());
          });
          names.push_back("cuda_inplace");
        }
        if (bias_only) {
          fns.push_back([&](int rep) {
            const epigemm::Status ran = bias_kernel_backend->run(calls[size_t(rep % sets)]);
            if (!ran.ok()) die("cuda_bias_kernel: " + ran.message());
          });
          names.push_back("cuda_bias_kernel");
        }
        if (parts.bias_grad == BiasGradPart::columns_of_b || parts.bias_grad == BiasGradPart::rows_of_a) {
          fns.push_back([&](int rep) {
            const epigemm::Status ran = serial_backend->run(calls[size_t(rep % sets)]);
            if (!ran.ok()) die("cuda_serial: " + ran.message());
          });
          names.push_back("cuda_serial");
        }
        const std::vector<double> medians = interleaved_median_ms(timing, stream, fns);
        const double floor_ms = medians[0];
        const double cuda_ms = medians[1];
        rows.push_back({sname, pass_name(p), ename, aname, "case_floor", floor_ms, 1.0, NAN, NAN, ""});
        for (size_t v = 1; v < names.size(); ++v) {
          rows.push_back({sname, pass_name(p), ename, aname, names[v], medians[v], medians[v] / floor_ms, fb, NAN,
                          names[v] == "cuda" || names[v] == "lt_fused" ? check
                          : names[v] == "cutlass"                       ? cutlass_check
                          : names[v] == "auto"                          ? auto_note
                                                                        : ""});
        }
        if (!backend_lt_ok) {
          rows.push_back({sname, pass_name(p), ename, aname, "cublaslt", NAN, NAN, fb, NAN, "declined: " + lt_declined});
        }
        if (!backend_cutlass_ok) {
          rows.push_back({sname, pass_name(p), ename, aname, "cutlass", NAN, NAN, fb, NAN, "declined: " + cutlass_declined});
        }
        if (!lt_ok) {
          rows.push_back({sname, pass_name(p), ename, aname, "lt_fused", NAN, NAN, fb, NAN,
                          lt_epilogue.found ? "no cuBLASLt algorithm" : lt_epilogue.why_not});
        }

        // The epilogue kernel alone, as the library launches it: the tile kernel from the fp32
        // intermediate (and, for BIAS and gelu_tanh, from bf16 acc: the in-place variant's), the
        // bias broadcast for BIAS, the row sums of the operand for BGRADB / BGRADA.
        const bool operand_rows = parts.bias_grad == BiasGradPart::columns_of_b || parts.bias_grad == BiasGradPart::rows_of_a;
        if (parts.computes_on_acc() || operand_rows) {
          using epigemm::cuda::TileArgs;
          using epigemm::cuda::TileOp;
          struct KernelJob {
            TileOp op;
            bool acc_f32;
            std::string variant;
          };
          std::vector<KernelJob> jobs;
          if (operand_rows) {
            // wgrad: op(B) = B^T (transb T) and op(A) = A (transa N): both sums run along the
            // stored operand's rows, the tile kernel's row sums.
            const epigemm::GemmCall& c = calls[0];
            const bool along_rows = parts.bias_grad == BiasGradPart::columns_of_b ? c.transb == EPIGEMM_OP_T
                                                                                    : c.transa == EPIGEMM_OP_N;
            if (along_rows) jobs.push_back({TileOp::row_sums, false, "kernel"});
          } else {
            jobs.push_back({epigemm::cuda::tile_op_for(parts), true, "kernel"});
            if (bias_only || parts.activation == EPIGEMM_ACTIVATION_GELU_TANH) {
              jobs.push_back({epigemm::cuda::tile_op_for(parts), false, "kernel_bf16acc"});
            }
            if (bias_only) jobs.push_back({TileOp::bias_broadcast, false, "kernel_broadcast"});
          }
          for (const KernelJob& job : jobs) {
            auto args_for = [&](int r) {
              const epigemm::GemmCall& c = calls[size_t(r)];
              TileArgs a;
              if (job.op == TileOp::row_sums) {
                const bool of_b = parts.bias_grad == BiasGradPart::columns_of_b;
                const epigemm::Matrix& x = of_b ? c.b : c.a;  // stored length x gemm_k
                a.rows = x.rows;
                a.cols = x.cols;
                a.acc = x.data;
                a.acc_dtype = EPIGEMM_DTYPE_BF16;
                a.ld_acc = x.ld;
              } else {
                a.rows = c.gemm_m;
                a.cols = c.gemm_n;
                a.acc = job.acc_f32 ? tsets[size_t(r)].acc_f32->ptr : c.d.data;
                a.acc_dtype = job.acc_f32 ? EPIGEMM_DTYPE_F32 : EPIGEMM_DTYPE_BF16;
                a.ld_acc = job.acc_f32 ? c.gemm_m : c.d.ld;
                a.d = c.d.data;
                a.d_dtype = EPIGEMM_DTYPE_BF16;
                a.ld_d = c.d.ld;
                if (c.has_aux) {
                  a.aux = c.aux.data;
                  a.aux_dtype = EPIGEMM_DTYPE_BF16;
                  a.ld_aux = c.aux.ld;
                }
                if (c.has_bias) {
                  a.bias = c.bias.data;
                  a.bias_dtype = EPIGEMM_DTYPE_BF16;
                }
              }
              return a;
            };
            const TileArgs a0 = args_for(0);
            const int64_t partial_count =
                epigemm::cuda::row_partial_elements(tuning, job.op, parts.activation, a0.rows, a0.cols);
            DeviceBuffer partials(size_t(std::max<int64_t>(1, partial_count)) * 4);
            void* sums = calls[0].has_bias_grad ? calls[0].bias_grad.data : nullptr;
            const epigemm::cuda::KernelVariant variant = epigemm::cuda::tile_kernel_variant(job.op, a0);
            std::string note = variant.vector ? "vector path" : "scalar path";
            if (variant.narrowed) note += ", narrower configuration";
            auto launch = [&](int rep) {
              TileArgs a = args_for(rep % sets);
              a.row_partials = static_cast<float*>(partials.ptr);
              const epigemm::Status launched =
                  epigemm::cuda::launch_tile_kernel(tuning, job.op, parts.activation, a, sums, EPIGEMM_DTYPE_BF16, stream);
              if (!launched.ok()) die("the " + ename + " kernel: " + launched.message());
            };
            const double bytes = kernel_bytes(job.op, a0.rows, a0.cols, job.acc_f32 ? 4.0 : 2.0);
            const double ms = interleaved_median_ms(timing, stream, {launch})[0];
            rows.push_back({sname, pass_name(p), ename, aname, job.variant, ms, ms / pass_floor_ms, bytes,
                            bytes / (ms * 1e-3) / 1e12, note, cs.epilogue});
            if (job.variant == "kernel") {
              // Each call after read_to_clean_l2: the kernel alone, without the write-back of the
              // previous call's dirty L2 lines.
              const double clean_ms = interleaved_median_ms(timing, stream, {launch}, clean_l2)[0];
              rows.push_back({sname, pass_name(p), ename, aname, "kernel_cleanl2", clean_ms, clean_ms / pass_floor_ms,
                              bytes, bytes / (clean_ms * 1e-3) / 1e12, note + ", after an L2 clean", cs.epilogue});
            }
            if (job.variant == "kernel" && is_largest_shape(s) && parts.activation != EPIGEMM_ACTIVATION_IDENTITY &&
                parts.activation != EPIGEMM_ACTIVATION_GELU_TANH) {
              // The activation's kernel and the same op's gelu_tanh kernel timed in one interleaved
              // loop (the activation comparison's pair): a ratio of two kernels measured minutes
              // apart carries the clock's drift between them. Each call runs after an L2 clean
              // (read_to_clean_l2, outside its events): these shapes have a single tensor set, so
              // without it the second kernel of a round would find in L2 part of what the first
              // had just read (acc is 128 MB on 8192,16384,4096), and alternating sets cannot help.
              const int64_t tanh_partials =
                  epigemm::cuda::row_partial_elements(tuning, job.op, EPIGEMM_ACTIVATION_GELU_TANH, a0.rows, a0.cols);
              DeviceBuffer paired_partials(size_t(std::max<int64_t>({1, partial_count, tanh_partials})) * 4);
              auto launch_with = [&](epigemm_activation_t activation, int rep) {
                TileArgs a = args_for(rep % sets);
                a.row_partials = static_cast<float*>(paired_partials.ptr);
                const epigemm::Status launched =
                    epigemm::cuda::launch_tile_kernel(tuning, job.op, activation, a, sums, EPIGEMM_DTYPE_BF16, stream);
                if (!launched.ok()) die("the " + ename + " kernel (paired): " + launched.message());
              };
              const std::vector<double> pair = interleaved_median_ms(
                  timing, stream,
                  {[&](int rep) { launch_with(parts.activation, rep); },
                   [&](int rep) { launch_with(EPIGEMM_ACTIVATION_GELU_TANH, rep); }},
                  clean_l2);
              rows.push_back({sname, pass_name(p), ename, aname, "kernel_paired", pair[0], pair[0] / pass_floor_ms,
                              bytes, bytes / (pair[0] * 1e-3) / 1e12,
                              note + ", interleaved with gelu_tanh's, after an L2 clean",
                              cs.epilogue});
              rows.push_back({sname, pass_name(p), ename, aname, "kernel_paired_gelu_tanh", pair[1],
                              pair[1] / pass_floor_ms, bytes, bytes / (pair[1] * 1e-3) / 1e12,
                              note + ", gelu_tanh's kernel interleaved with this one, after an L2 clean", cs.epilogue});
            }
          }
        }
        for (auto* list : {&apis, &apis_cublaslt, &apis_cutlass, &apis_auto}) {
          for (auto& a : *list) epigemm_gemm_desc_destroy(a.desc);
        }
        std::printf("  [%d/%d] %s %s: cuda %.4f ms (%.3f x floor), %s, %s\n", ++cases_done, cases_total, pass_name(p),
                    ename.c_str(), cuda_ms, cuda_ms / floor_ms, check.c_str(), auto_note.c_str());
        std::fflush(stdout);
      }
    }
  }

  // ---- report ----
  std::map<std::string, double> floor_of;  // shape|pass -> ms
  std::map<std::string, const Row*> by_key;
  for (const Row& r : rows) {
    if (r.variant == "floor") floor_of[r.shape + "|" + r.pass] = r.ms;
    by_key[r.shape + "|" + r.pass + "|" + r.epilogue + "|" + r.variant] = &r;
  }
  const std::string csv_path = out_dir + "/bench_gpu.csv";
  std::ofstream csv(csv_path);
  csv << "# " << header.str() << "; copy " << fmt(copy_tbps) << " TB/s\n";
  csv << "shape,pass,gemm_m,gemm_n,gemm_k,epilogue,activation,variant,ms,ratio_to_floor,bytes,bandwidth_tbps_or_tflops,"
         "fraction_of_copy,note,shape_set\n";
  for (const Row& r : rows) {
    const bool kernel = r.variant.rfind("kernel", 0) == 0;
    const std::array<int64_t, 3> dims = gemm_dims_of[r.shape + "|" + r.pass];
    std::string note = r.check;
    std::replace(note.begin(), note.end(), ',', ';');
    csv << '"' << r.shape << "\"," << r.pass << "," << dims[0] << "," << dims[1] << "," << dims[2] << "," << r.epilogue
        << "," << r.activation << "," << r.variant << "," << fmt(r.ms, 5) << "," << fmt(r.ratio_to_floor, 4) << ","
        << fmt(r.bytes, 0) << "," << fmt(r.bandwidth, 3) << ","
        << (kernel ? fmt(r.bandwidth / copy_tbps, 3) : std::string("")) << "," << note << ","
        << set_of_shape[r.shape] << "\n";
  }
  csv.close();
  bool tables_written = bool(csv);

  std::ostringstream md;
  md << "# epigemm cuda backend benchmark (bf16)\n\n" << header.str() << ".\n\n"
     << "Device-to-device copy: " << fmt(copy_tbps) << " TB/s (read + write).\n\n"
     << "## End to end\n\n"
     << "`x floor` = time over the plain cuBLAS GEMM of the same pass in the same run. `limit` = "
        "(floor + epilogue bytes floor / copy bandwidth / 0.85) / floor. "
        "`lt/cuda` > 1: the cuda backend is faster than cuBLASLt's fused epilogue (n/a: cuBLASLt has none). "
        "`check`: the cuda backend against a naive computation of the epilogue on the same fp32 GEMM result; "
        "where cuBLASLt's fused call (left free, as a user calling it gets it) is off that result, a note "
        "says by how many elements (it may add split-K partial sums in bf16, which the cublaslt backend "
        "does not allow).\n\n"
     << "| shape (tok,in,out) | pass | epilogue | floor ms | cuda ms | cuda x floor | limit | within | in-place (serial) x floor | lt fused ms | lt x floor | lt/cuda | check |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (r.variant != "cuda") continue;
    const std::string key = r.shape + "|" + r.pass + "|" + r.epilogue + "|";
    const double floor_ms = by_key.count(key + "case_floor") ? by_key[key + "case_floor"]->ms : floor_of[r.shape + "|" + r.pass];
    const Row* lt_row = by_key.count(key + "lt_fused") ? by_key[key + "lt_fused"] : nullptr;
    const Row* inplace = by_key.count(key + "cuda_inplace") ? by_key[key + "cuda_inplace"] : nullptr;
    const Row* serial = by_key.count(key + "cuda_serial") ? by_key[key + "cuda_serial"] : nullptr;
    const Row* bias_kernel = by_key.count(key + "cuda_bias_kernel") ? by_key[key + "cuda_bias_kernel"] : nullptr;
    const double limit = (floor_ms + r.bytes / (copy_tbps * 1e12) * 1e3 / 0.85) / floor_ms;
    const double lt_ms = lt_row ? lt_row->ms : NAN;
    const double alt = inplace ? inplace->ratio_to_floor : serial ? serial->ratio_to_floor : NAN;
    md << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << fmt(floor_ms, 4) << " | " << fmt(r.ms, 4)
       << " | " << fmt(r.ratio_to_floor) << " | " << fmt(limit) << " | " << (r.ratio_to_floor <= limit ? "yes" : "NO")
       << " | " << fmt(alt) << (serial ? " (serial)" : "")
       << (bias_kernel ? "; fp32 intermediate + kernel " + fmt(bias_kernel->ratio_to_floor) : std::string())
       << " | " << fmt(lt_ms, 4) << " | " << fmt(lt_row ? lt_row->ratio_to_floor : NAN) << " | " << fmt(lt_ms / r.ms)
       << " | " << r.check << " |\n";
  }
  md << "\n## Epilogue kernels alone\n\n"
     << "As the library launches them (its configuration per op, the size rules). Bytes actually moved "
        "(acc read in fp32 for `kernel`, in bf16 for `kernel_bf16acc`; BGRADB / BGRADA: the operand read once); "
        "target: element-wise >= 0.85 of copy bandwidth, reductions >= 0.80, on the three largest shapes. "
        "Every call timed right after the previous one, except `kernel_cleanl2`: each call after "
        "a kernel that reads 256 MB (L2 then holds no dirty lines of the previous call to write back).\n\n"
     << "| shape (tok,in,out) | pass | epilogue | variant | ms | TB/s | of copy | path |\n|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (r.variant.rfind("kernel", 0) != 0) continue;
    md << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << r.variant << " | " << fmt(r.ms, 4) << " | "
       << fmt(r.bandwidth) << " | " << fmt(r.bandwidth / copy_tbps) << " | " << r.check << " |\n";
  }

  // Each activation's kernel against gelu_tanh's, same op, same tensor: the fraction of copy
  // bandwidth, and whether it is within 5% of gelu_tanh's (the acceptance for the activations).
  struct ActivationRow {
    std::string shape, pass, op, activation;
    double fraction, tanh_fraction;
  };
  std::vector<ActivationRow> activation_rows;
  // Both kernels of a pair were timed in one interleaved loop ("kernel_paired" and
  // "kernel_paired_gelu_tanh"); the unpaired "kernel" rows of each case stay in the CSV.
  for (const Row& r : rows) {
    if (r.variant != "kernel_paired") continue;
    const std::string op = r.epilogue.substr(0, r.epilogue.find('('));
    const std::string key = r.shape + "|" + r.pass + "|" + r.epilogue + "|kernel_paired_gelu_tanh";
    const double tanh_fraction = by_key.count(key) ? by_key[key]->bandwidth / copy_tbps : NAN;
    activation_rows.push_back({r.shape, r.pass, op, r.activation, r.bandwidth / copy_tbps, tanh_fraction});
  }
  md << "\n## Activations: each kernel against gelu_tanh's (three largest shapes)\n\n"
     << "Fraction of copy bandwidth of the kernel alone; `ratio` = activation / gelu_tanh, same op and "
        "tensors, the two kernels timed in one interleaved loop, each call after an L2 clean (medians); within "
        "5% = ratio >= 0.95.\n\n"
     << "| shape (tok,in,out) | pass | op | activation | of copy | gelu_tanh of copy | ratio | within 5% |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  // "yes" / "no" ("n/a" if a pair's gelu_tanh row were missing).
  auto within_5_percent = [](const ActivationRow& a) -> std::string {
    const double ratio = a.fraction / a.tanh_fraction;
    return std::isnan(ratio) ? "n/a" : ratio >= 0.95 ? "yes" : "no";
  };
  int activation_within = 0, activation_compared = 0;
  for (const ActivationRow& a : activation_rows) {
    const std::string within = within_5_percent(a);
    activation_compared += within == "n/a" ? 0 : 1;
    activation_within += within == "yes" ? 1 : 0;
    md << "| " << a.shape << " | " << a.pass << " | " << a.op << " | " << a.activation << " | " << fmt(a.fraction)
       << " | " << fmt(a.tanh_fraction) << " | " << fmt(a.fraction / a.tanh_fraction) << " | "
       << (within == "no" ? "**no**" : within) << " |\n";
  }
  md << "\n## Floors\n\n| shape (tok,in,out) | pass | plain GEMM ms | TFLOP/s | GEMM writing fp32, x floor |\n|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (r.variant != "floor") continue;
    const Row* f32 = by_key[r.shape + "|" + r.pass + "|-|floor_f32out"];
    md << "| " << r.shape << " | " << r.pass << " | " << fmt(r.ms, 4) << " | " << fmt(r.bandwidth, 1) << " | "
       << fmt(f32 ? f32->ratio_to_floor : NAN) << " |\n";
  }
  const std::string md_path = out_dir + "/bench_gpu.md";
  tables_written = epigemm_bench::write_text_file(md_path, md.str()) && tables_written;

  // ---- the short tables, last ----
  std::printf("\n%s %s and %s\n", tables_written ? "wrote" : "could NOT write", csv_path.c_str(), md_path.c_str());
  std::printf("copy %.3f TB/s\n", copy_tbps);
  int mismatched = 0;
  for (const Row& r : rows) {
    // A declined cutlass case has no time and says so; a cutlass case that ran was checked.
    const bool cutlass_ran = r.variant == "cutlass" && r.check.rfind("declined", 0) != 0;
    // "ok", possibly followed by a note on cuBLASLt's own result, is a pass.
    if ((r.variant == "cuda" || cutlass_ran) && r.check.rfind("ok", 0) != 0) {
      std::printf("CHECK FAILED: %s %s %s %s: %s\n", r.variant.c_str(), r.shape.c_str(), r.pass.c_str(),
                  r.epilogue.c_str(), r.check.c_str());
      ++mismatched;
    }
  }
  std::printf("%-18s %-6s %-14s %-10s %8s %9s %6s %s\n", "shape", "pass", "op", "activation", "of copy", "gelu_tanh",
              "ratio", "within 5%");
  for (const ActivationRow& a : activation_rows) {
    const std::string within = within_5_percent(a);
    std::printf("%-18s %-6s %-14s %-10s %8s %9s %6s %s\n", a.shape.c_str(), a.pass.c_str(), a.op.c_str(),
                a.activation.c_str(), fmt(a.fraction).c_str(), fmt(a.tanh_fraction).c_str(),
                fmt(a.fraction / a.tanh_fraction).c_str(), within == "no" ? "NO" : within.c_str());
  }
  std::printf("activation kernels within 5%% of gelu_tanh's fraction of copy: %d of %d compared\n", activation_within,
              activation_compared);

  // ---- the dispatcher: auto against the best of cuda, cublaslt and cutlass, and against cuBLASLt's
  // fused epilogue called directly, over every epilogue case but DEFAULT ----
  std::ostringstream dmd;
  dmd << "# epigemm dispatch: auto against cuda, cublaslt, cutlass and cuBLASLt fused (bf16)\n\n" << header.str() << ".\n\n"
      << "`auto / best` = auto's time over the fastest of the cuda, cublaslt and cutlass backends that compute the "
         "contract's result (target <= 1.03): on the gelu_tanh epilogues the cublaslt backend runs cuBLASLt's own GELU, "
         "not the contract's, and is not counted there (its time is in the table; the summary also counts it). "
         "`lt / auto` = cuBLASLt's fused epilogue called directly over auto (> 1: auto is faster; n/a where "
         "cuBLASLt has no such epilogue).\n\n"
      << "| shape (tok,in,out) | pass | epilogue | cuda ms | cublaslt ms | cutlass ms | lt fused ms | auto ms | auto ran | auto / best | lt / auto |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  double log_sum = 0.0, worst_auto = 0.0;
  int cases = 0, auto_cases = 0;
  std::vector<epigemm_bench::CaseRow> case_rows;
  case_rows.reserve(rows.size());
  for (const Row& r : rows) case_rows.push_back(case_row_of(r));
  const epigemm_bench::CaseTable case_table(case_rows);
  for (const Row& r : rows) {
    if (r.variant != "auto" || r.epilogue == "DEFAULT") continue;
    const epigemm_bench::CaseTimes times = case_table.times_of(case_row_of(r));
    const double cuda_ms = times.cuda, backend_lt_ms = times.cublaslt, cutlass_ms = times.cutlass,
                 lt_ms = times.lt_fused;
    const double auto_over_best = r.ms / times.best, lt_over_auto = lt_ms / r.ms;
    const std::string ran = r.check.size() > 9 ? r.check.substr(9) : r.check;  // "auto ran X"
    if (!std::isnan(lt_over_auto)) {
      log_sum += std::log(lt_over_auto);
      ++cases;
    }
    ++auto_cases;
    worst_auto = std::max(worst_auto, auto_over_best);
    dmd << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << fmt(cuda_ms, 4) << " | "
        << fmt(backend_lt_ms, 4) << " | " << fmt(cutlass_ms, 4) << " | " << fmt(lt_ms, 4) << " | " << fmt(r.ms, 4)
        << " | " << ran << " | "
        << fmt(auto_over_best) << " | " << fmt(lt_over_auto) << " |\n";
  }
  const double geomean = cases ? std::exp(log_sum / cases) : NAN;
  dmd << "\nOver the " << cases << " epilogue cases cuBLASLt has: geometric mean of (cuBLASLt fused / auto) = "
      << fmt(geomean) << " (target >= 1.06); over all " << auto_cases << ": worst auto / best = " << fmt(worst_auto)
      << " (target <= 1.03).\n";
  const std::string summary = epigemm_bench::dispatch_summary_by_shape_set(case_rows, set_of_shape);
  dmd << "\n" << summary;
  std::printf("%s", summary.c_str());
  const std::string dispatch_path = out_dir + "/bench_dispatch.md";
  if (!epigemm_bench::write_text_file(dispatch_path, dmd.str())) {
    std::printf("could NOT write %s\n", dispatch_path.c_str());
    tables_written = false;
  }
  std::printf("dispatch over %d epilogue cases cuBLASLt has: geomean lt_fused/auto %s (target >= 1.06); over all %d: "
              "worst auto/best %s (target <= 1.03)\n",
              cases, fmt(geomean).c_str(), auto_cases, fmt(worst_auto).c_str());

  epigemm_context_destroy(ctx);
  cublasLtDestroy(lt);
  cublasDestroy(blas);
  if (mismatched > 0) {
    std::fprintf(stderr, "epigemm_bench_gpu: %d case(s) failed the correctness check\n", mismatched);
    return 1;
  }
  return tables_written ? 0 : 1;
}
