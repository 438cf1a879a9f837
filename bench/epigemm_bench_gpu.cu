// epigemm_bench_gpu: the cuda backend against its floors and against cuBLASLt's fused epilogues,
// bf16, on the five public benchmark shapes (docs/dev/cuda_backend.md explains every column).
//
// For each shape (tokens, in, out) and pass (fprop / dgrad / wgrad, GEMM coordinates from the
// table in docs/conventions.md), in one run:
//   floor        plain cublasGemmEx, bf16 in, bf16 D, fp32 compute (the math floor)
//   floor_f32out the same GEMM writing fp32 (what the fp32-intermediate path runs)
//   cuda         the `cuda` backend end to end through the public C API
//   cuda_inplace the backend with the GEMM writing bf16 D and the epilogue in place (not the
//                contract's numerics; measured to price the fp32 intermediate)
//   cuda_serial  BGRADB with its sums on the caller's stream before the GEMM (the default runs them
//                on a second stream, concurrently)
//   lt_fused     cuBLASLt with the fused epilogue (bias / aux dtypes set explicitly to bf16)
//   kernel       the epilogue kernel alone reading the fp32 intermediate; its bandwidth over the
//                measured device-to-device copy bandwidth
//   kernel_bf16acc  the same kernel reading bf16 acc (the in-place variant's kernel)
// Inputs are random (never zeros), rotated among sets totalling >= 512 MB so that the 60 MB L2
// holds no set; outputs of cuda and lt_fused are compared before anything is timed; every time is
// the median of --reps single-call times (CUDA events) after --warmup calls.
// Writes bench_gpu.csv and bench_gpu.md into --out (default "."), prints a short table last.
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

#include "backends/cuda/cuda_backend.hpp"
#include "core/layer_mapping.hpp"
#include "backends/cuda/epilogue_kernels.hpp"
#include "core/gemm_call.hpp"
#include "core/validate.hpp"
#include "epigemm/epigemm.h"

namespace {

// ---- errors: the bench stops at the first failure it cannot report in its table -------------

void die(const std::string& message) {
  std::fprintf(stderr, "epigemm_bench_gpu: %s\n", message.c_str());
  std::exit(1);
}
#define CUDA_OK(expr)                                                                    \
  do {                                                                                   \
    const cudaError_t err_ = (expr);                                                     \
    if (err_ != cudaSuccess) die(std::string(#expr) + ": " + cudaGetErrorString(err_));  \
  } while (0)
#define CUBLAS_OK(expr)                                                                      \
  do {                                                                                       \
    const cublasStatus_t st_ = (expr);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) die(std::string(#expr) + ": " + cublasGetStatusString(st_)); \
  } while (0)

// ---- device helpers --------------------------------------------------------------------------

// Uniform values in [-scale, scale) from a hash of (seed, index): random, reproducible, not zero.
__global__ void fill_uniform_bf16(__nv_bfloat16* x, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t h = seed * 0x9E3779B97F4A7C15ull + uint64_t(i);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    const float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
  }
}

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

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { CUDA_OK(cudaMalloc(&ptr, std::max<size_t>(n, 256))); }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

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
  fill_uniform_bf16<<<4096, 256>>>(static_cast<__nv_bfloat16*>(p), count, seed, scale);
  CUDA_OK(cudaGetLastError());
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

// ---- timing: a CUDA-event timer, median of single-call times --------------------------------

struct Timing {
  int warmup = 5;
  int reps = 25;
};

// Median milliseconds of fn(rep) over t.reps calls on `stream`, each between two events.
double median_ms(const Timing& t, cudaStream_t stream, const std::function<void(int)>& fn) {
  for (int i = 0; i < t.warmup; ++i) fn(i);
  std::vector<cudaEvent_t> events(size_t(2 * t.reps));
  for (auto& e : events) CUDA_OK(cudaEventCreate(&e));
  for (int i = 0; i < t.reps; ++i) {
    CUDA_OK(cudaEventRecord(events[size_t(2 * i)], stream));
    fn(t.warmup + i);
    CUDA_OK(cudaEventRecord(events[size_t(2 * i + 1)], stream));
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<double> ms(size_t(t.reps));
  for (int i = 0; i < t.reps; ++i) {
    float v = 0;
    CUDA_OK(cudaEventElapsedTime(&v, events[size_t(2 * i)], events[size_t(2 * i + 1)]));
    ms[size_t(i)] = v;
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of each fn over t.reps rounds; in every round each fn runs once, in turn,
// between its own two events. Interleaving puts every variant under the same clocks and
// temperature, so their ratios do not drift with the card's state during the run.
// before (optional) runs ahead of each timed call, outside its events.
std::vector<double> interleaved_median_ms(const Timing& t, cudaStream_t stream,
                                          const std::vector<std::function<void(int)>>& fns,
                                          const std::function<void()>& before = nullptr) {
  for (int i = 0; i < t.warmup; ++i) {
    for (const auto& fn : fns) fn(i);
  }
  const size_t n = fns.size();
  std::vector<cudaEvent_t> events(2 * n * size_t(t.reps));
  for (auto& e : events) CUDA_OK(cudaEventCreate(&e));
  for (int i = 0; i < t.reps; ++i) {
    for (size_t v = 0; v < n; ++v) {
      if (before) before();
      CUDA_OK(cudaEventRecord(events[2 * (size_t(i) * n + v)], stream));
      fns[v](t.warmup + i);
      CUDA_OK(cudaEventRecord(events[2 * (size_t(i) * n + v) + 1], stream));
    }
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<double> medians(n);
  for (size_t v = 0; v < n; ++v) {
    std::vector<double> ms(size_t(t.reps));
    for (int i = 0; i < t.reps; ++i) {
      float value = 0;
      CUDA_OK(cudaEventElapsedTime(&value, events[2 * (size_t(i) * n + v)], events[2 * (size_t(i) * n + v) + 1]));
      ms[size_t(i)] = value;
    }
    std::sort(ms.begin(), ms.end());
    medians[v] = ms[ms.size() / 2];
  }
  for (auto& e : events) cudaEventDestroy(e);
  return medians;
}

// ---- the cases -------------------------------------------------------------------------------

struct Shape {
  int64_t tokens, in, out;
};
const Shape kPublicShapes[] = {
    {8192, 4096, 16384}, {8192, 16384, 4096}, {4096, 1024, 4096}, {16384, 8192, 28672}, {2048, 768, 3072}};

enum class Pass { fprop, dgrad, wgrad };
const char* pass_name(Pass p) { return p == Pass::fprop ? "fprop" : p == Pass::dgrad ? "dgrad" : "wgrad"; }

std::vector<epigemm_epilogue_t> pass_epilogues(Pass p) {
  switch (p) {
    case Pass::fprop:
      return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS, EPIGEMM_EPILOGUE_GELU_AUX,
              EPIGEMM_EPILOGUE_GELU_AUX_BIAS};
    case Pass::dgrad: return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD};
    default: return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BGRADB};
  }
}

// One rotation set: every tensor of the three passes of a shape, row-major framework tensors
// (docs/conventions.md, "Layout"), bf16.
struct TensorSet {
  std::unique_ptr<DeviceBuffer> x, w, dy, y, pre_gelu, dx, pre_gelu_prev, dw, bias, bias_grad_in,
      bias_grad_out, acc_f32;
};

// A pass's GEMM in GEMM coordinates over one set's buffers (docs/conventions.md, "Layout").
struct GemmShape {
  epigemm_op_t transa, transb;
  int64_t m, n, k, lda, ldb, ldd;
  const void *a, *b;
  void* d;
  void* aux;  // pre_gelu (fprop, written) or pre_gelu_prev (dgrad, read); ld = m
  void* bias_grad;
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
  void* bias_grad = nullptr;
  switch (p) {
    case Pass::fprop:
      layer.x = &x, layer.w = &w, layer.y = &y;
      aux = t.pre_gelu->ptr;
      break;
    case Pass::dgrad:
      layer.dy = &dy, layer.w = &w, layer.dx = &dx;
      layer_pass = epigemm::LayerPass::dgrad;
      aux = t.pre_gelu_prev->ptr;
      bias_grad = t.bias_grad_in->ptr;
      break;
    case Pass::wgrad:
      layer.x = &x, layer.dy = &dy, layer.dw = &dw;
      layer_pass = epigemm::LayerPass::wgrad;
      bias_grad = t.bias_grad_out->ptr;
      break;
  }
  epigemm::GemmCall call;
  if (!epigemm::map_layer_to_gemm(layer_pass, layer, &call).ok()) die("map_layer_to_gemm refused a public shape");
  return GemmShape{call.transa, call.transb, call.gemm_m, call.gemm_n, call.gemm_k, call.a.ld, call.b.ld,
                   call.d.ld, call.a.data, call.b.data, call.d.data, aux, bias_grad};
}

// The internal call (GEMM coordinates) for the variants run on a backend object directly.
epigemm::GemmCall internal_call(const GemmShape& g, epigemm_epilogue_t e, const TensorSet& t,
                                void* ws, size_t ws_bytes, cudaStream_t stream) {
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
  c.epilogue = e;
  if (epigemm::epilogue_reads_bias(e)) {
    c.has_bias = true;
    c.bias = epigemm::Vector{t.bias->ptr, bf16, g.m, dev};
  }
  if (epigemm::epilogue_reads_aux(e) || epigemm::epilogue_writes_aux(e)) {
    c.has_aux = true;
    c.aux = Matrix{g.aux, bf16, g.m, g.n, g.m, dev};
  }
  if (epigemm::epilogue_writes_bias_grad(e)) {
    c.has_bias_grad = true;
    c.bias_grad = epigemm::Vector{g.bias_grad, bf16, epigemm::bias_grad_length(c), dev};
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
  epigemm_gemm_desc_create(&api.desc);
  epigemm_gemm_desc_set_transpose(api.desc, c.transa, c.transb);
  epigemm_gemm_desc_set_epilogue(api.desc, c.epilogue);
  epigemm_gemm_desc_set_backend(api.desc, backend);
  if (c.has_bias) {
    const epigemm_vector_t v{c.bias.data, c.bias.dtype, c.bias.length, c.bias.memory};
    epigemm_gemm_desc_set_bias(api.desc, &v);
  }
  if (c.has_aux) {
    const epigemm_matrix_t m = mat(c.aux);
    epigemm_gemm_desc_set_aux(api.desc, &m);
  }
  if (c.has_bias_grad) {
    const epigemm_vector_t v{c.bias_grad.data, c.bias_grad.dtype, c.bias_grad.length,
                             c.bias_grad.memory};
    epigemm_gemm_desc_set_bias_grad(api.desc, &v);
  }
  return api;
}

// cuBLASLt with the fused epilogue for one call; nullptr algo when the heuristic has none.
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

cublasLtEpilogue_t lt_epilogue(epigemm_epilogue_t e) {
  switch (e) {
    case EPIGEMM_EPILOGUE_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case EPIGEMM_EPILOGUE_GELU_AUX: return CUBLASLT_EPILOGUE_GELU_AUX;
    case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case EPIGEMM_EPILOGUE_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case EPIGEMM_EPILOGUE_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case EPIGEMM_EPILOGUE_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

constexpr size_t kLtWorkspace = size_t(32) << 20;

void lt_setup(cublasLtHandle_t lt, const epigemm::GemmCall& c, LtCall* call) {
  CUBLAS_OK(cublasLtMatmulDescCreate(&call->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = c.transa == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = c.transb == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const cublasLtEpilogue_t epi = lt_epilogue(c.epilogue);
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
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
  std::string shape, pass, epilogue, variant;
  double ms = NAN;
  double ratio_to_floor = NAN;
  double bytes = NAN;      // kernels: bytes moved; e2e: the epilogue's bytes floor
  double bandwidth = NAN;  // TB/s (kernels)
  std::string check;
};

std::string shape_name(const Shape& s) {
  std::ostringstream o;
  o << s.tokens << "," << s.in << "," << s.out;
  return o.str();
}

// The fewest bytes an epilogue must move beside the GEMM (its "bytes floor"): D re-read and
// re-written in its own dtype, aux written or read once, op(B) read once for BGRADB.
double epilogue_floor_bytes(epigemm_epilogue_t e, int64_t m, int64_t n, int64_t k) {
  const double elems = double(m) * double(n);
  switch (e) {
    case EPIGEMM_EPILOGUE_BIAS: return 4.0 * elems;
    case EPIGEMM_EPILOGUE_GELU_AUX:
    case EPIGEMM_EPILOGUE_GELU_AUX_BIAS:
    case EPIGEMM_EPILOGUE_DGELU:
    case EPIGEMM_EPILOGUE_DGELU_BGRAD: return 6.0 * elems;
    case EPIGEMM_EPILOGUE_BGRADB: return 2.0 * double(k) * double(n);
    default: return 0.0;
  }
}

// Bytes the tile kernel moves reading acc of `acc_bytes` per element.
double kernel_bytes(epigemm::cuda::TileOp op, int64_t rows, int64_t cols, double acc_bytes) {
  using epigemm::cuda::TileOp;
  const double elems = double(rows) * double(cols);
  switch (op) {
    case TileOp::bias: return elems * (acc_bytes + 2);
    case TileOp::gelu_aux:
    case TileOp::gelu_aux_bias:
    case TileOp::dgelu:
    case TileOp::dgelu_bgrad: return elems * (acc_bytes + 4);
    case TileOp::row_sums: return elems * 2;
    case TileOp::bias_broadcast: return elems * 2;
  }
  return 0;
}

epigemm::cuda::TileOp tile_op(epigemm_epilogue_t e) {
  using epigemm::cuda::TileOp;
  switch (e) {
    case EPIGEMM_EPILOGUE_BIAS: return TileOp::bias;
    case EPIGEMM_EPILOGUE_GELU_AUX: return TileOp::gelu_aux;
    case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: return TileOp::gelu_aux_bias;
    case EPIGEMM_EPILOGUE_DGELU: return TileOp::dgelu;
    case EPIGEMM_EPILOGUE_DGELU_BGRAD: return TileOp::dgelu_bgrad;
    default: return TileOp::row_sums;
  }
}

std::string fmt(double v, int digits = 3) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

constexpr char kUsage[] =
    "usage: epigemm_bench_gpu [--out DIR] [--reps N] [--warmup N] [--shapes all|small|T,I,O;...]\n"
    "                         [--passes fprop,dgrad,wgrad] [--dtype bf16]";

int main(int argc, char** argv) {
  std::string out_dir = ".";
  Timing timing;
  std::string which = "all";
  std::string passes_arg = "fprop,dgrad,wgrad";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--out") out_dir = value();
    else if (arg == "--reps") timing.reps = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup") timing.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--shapes") which = value();  // all | small | tok,in,out[;tok,in,out...]
    else if (arg == "--passes") passes_arg = value();  // e.g. fprop,wgrad
    else if (arg == "--dtype") {
      // The harness's buffers, fills and cuBLAS types are bf16 throughout; other dtypes are
      // measured by the test matrix for correctness but not benchmarked yet.
      if (value() != "bf16") die("--dtype: only bf16 is benchmarked on the GPU so far");
    } else if (arg == "--help" || arg == "-h") {
      std::printf("%s\n"
                  "Writes bench_gpu.csv and bench_gpu.md into --out (default .); docs/dev/cuda_backend.md\n"
                  "says how to read them.\n", kUsage);
      return 0;
    } else {
      // A usage mistake: one line, exit code 2 (as the epigemm program's).
      std::fprintf(stderr, "epigemm_bench_gpu: unknown option %s (see epigemm_bench_gpu --help)\n", arg.c_str());
      return 2;
    }
  }

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

  double copy_tbps = 0;
  {
    const size_t bytes = size_t(2) << 30;
    DeviceBuffer src(bytes), dst(bytes);
    fill(src.ptr, int64_t(bytes / 2), 1, 1.0f);
    const double ms = median_ms(timing, stream, [&](int) {
      CUDA_OK(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    copy_tbps = 2.0 * double(bytes) / (ms * 1e-3) / 1e12;  // read + write
    std::printf("device-to-device copy: %.3f TB/s (2 GiB, read + write counted)\n", copy_tbps);
  }

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
  epigemm::CudaBackendOptions bias_kernel_options;  // BIAS: fp32 intermediate + the BIAS kernel
  bias_kernel_options.bias_through_gemm_beta = false;
  epigemm::CudaBackendOptions serial_options;
  serial_options.concurrent_bgradb = false;
  auto inplace_backend = epigemm::create_cuda_backend(inplace_options);
  auto serial_backend = epigemm::create_cuda_backend(serial_options);
  auto bias_kernel_backend = epigemm::create_cuda_backend(bias_kernel_options);
  epigemm::cuda::KernelTuning tuning;
  if (!epigemm::cuda::query_kernel_tuning(&tuning).ok()) die("query_kernel_tuning failed");

  std::vector<Row> rows;

  std::map<std::string, std::array<int64_t, 3>> gemm_dims_of;  // shape|pass -> gemm_m, gemm_n, gemm_k
  std::vector<Shape> shapes(std::begin(kPublicShapes), std::end(kPublicShapes));
  if (which == "small") shapes = {kPublicShapes[2], kPublicShapes[4]};
  if (which != "all" && which != "small") {  // explicit "tokens,in,out;tokens,in,out"
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
  for (Pass p : passes) cases_total += int(shapes.size() * pass_epilogues(p).size());

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
      t.pre_gelu = make(size_t(T * O), 2);
      t.dx = make(size_t(T * I), 2);
      t.pre_gelu_prev = make(size_t(T * I), 2);
      t.dw = make(size_t(O * I), 2);
      t.bias = make(size_t(O), 2);
      t.bias_grad_in = make(size_t(I), 2);
      t.bias_grad_out = make(size_t(O), 2);
      t.acc_f32 = make(size_t(std::max({O * T, I * T, O * I})), 4);
      const uint64_t seed = 1000 + uint64_t(r) * 16;
      fill(t.x->ptr, T * I, seed + 1, 1.0f);
      // Scaled so that acc = X W^T has a standard deviation near 1 (GELU's interesting range).
      fill(t.w->ptr, O * I, seed + 2, 3.0f / std::sqrt(float(I)));
      fill(t.dy->ptr, T * O, seed + 3, 1.0f);
      fill(t.pre_gelu_prev->ptr, T * I, seed + 4, 3.0f);
      fill(t.bias->ptr, O, seed + 5, 1.0f);
    }
    DeviceBuffer cublas_ws(kLtWorkspace), lt_ws(kLtWorkspace);
    const std::string sname = shape_name(s);
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
      rows.push_back({sname, pass_name(p), "-", "floor", pass_floor_ms, 1.0, NAN, tflops, ""});
      rows.push_back({sname, pass_name(p), "-", "floor_f32out", floors[1], floors[1] / pass_floor_ms, NAN, NAN, ""});

      for (epigemm_epilogue_t e : pass_epilogues(p)) {
        const char* ename = epigemm_epilogue_name(e);
        // Calls per rotation set: public API, internal variants, cuBLASLt.
        size_t ws_bytes = 0;
        {
          epigemm::GemmCall probe = internal_call(g0, e, tsets[0], nullptr, 0, stream);
          ApiCall api = api_call(probe);
          if (epigemm_gemm_workspace_size(ctx, api.desc, &api.a, &api.b, &api.d, &ws_bytes) != EPIGEMM_STATUS_SUCCESS) {
            die(std::string("workspace size: ") + epigemm_context_last_error(ctx));
          }
          epigemm_gemm_desc_destroy(api.desc);
          for (epigemm_backend_t other : {EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_AUTO}) {
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
        std::vector<ApiCall> apis, apis_cublaslt, apis_auto;
        std::vector<std::unique_ptr<LtCall>> lts;
        for (int r = 0; r < sets; ++r) {
          const GemmShape g = gemm_shape(s, p, tsets[size_t(r)]);
          calls.push_back(internal_call(g, e, tsets[size_t(r)], ws.ptr, ws_bytes, stream));
          if (!epigemm::validate_gemm_call(calls.back()).ok()) die("internal call does not validate");
          apis.push_back(api_call(calls.back()));
          apis_cublaslt.push_back(api_call(calls.back(), EPIGEMM_BACKEND_CUBLASLT));
          apis_auto.push_back(api_call(calls.back(), EPIGEMM_BACKEND_AUTO));
          lts.push_back(std::make_unique<LtCall>());
          lt_setup(lt, calls.back(), lts.back().get());
        }
        auto run_cuda = [&](int rep) {
          const int r = rep % sets;
          const ApiCall& a = apis[size_t(r)];
          if (epigemm_gemm(ctx, a.desc, &a.a, &a.b, &a.d, ws.ptr, ws_bytes, stream) != EPIGEMM_STATUS_SUCCESS) {
            die(std::string("epigemm_gemm: ") + epigemm_context_last_error(ctx));
          }
        };
        const bool lt_ok = lts[0]->found;
        // The library's cublaslt backend and its dispatcher, through the public API. The
        // backend may decline a case (docs/dispatch.md); auto always runs.
        auto run_api = [&](const std::vector<ApiCall>& which, int rep) {
          const ApiCall& a = which[size_t(rep % sets)];
          if (epigemm_gemm(ctx, a.desc, &a.a, &a.b, &a.d, ws.ptr, ws_bytes, stream) != EPIGEMM_STATUS_SUCCESS) {
            die(std::string("epigemm_gemm: ") + epigemm_context_last_error(ctx));
          }
        };
        size_t probe_bytes = 0;
        const bool backend_lt_ok =
            epigemm_gemm_workspace_size(ctx, apis_cublaslt[0].desc, &apis_cublaslt[0].a, &apis_cublaslt[0].b,
                                        &apis_cublaslt[0].d, &probe_bytes) == EPIGEMM_STATUS_SUCCESS;
        const std::string lt_declined = backend_lt_ok ? "" : epigemm_context_last_error(ctx);
        run_api(apis_auto, 0);
        epigemm_backend_t auto_choice = EPIGEMM_BACKEND_AUTO;
        epigemm_context_last_backend(ctx, &auto_choice, nullptr);
        const std::string auto_note = std::string("auto ran ") + epigemm_backend_name(auto_choice);

        // Correctness before timing: the cuda backend against cuBLASLt on set 0 (two independent
        // implementations; the unit tests compare with the reference backend).
        std::string check = "lt n/a";
        if (lt_ok) {
          const epigemm::GemmCall& c = calls[0];
          const int64_t elems = c.gemm_m * c.gemm_n;
          DeviceBuffer d_lt(size_t(elems) * 2), aux_lt(size_t(elems) * 2), bg_lt(size_t(std::max(c.gemm_m, c.gemm_n)) * 2);
          lt_run(lt, c, *lts[0], lt_ws.ptr, stream);
          CUDA_OK(cudaMemcpyAsync(d_lt.ptr, c.d.data, size_t(elems) * 2, cudaMemcpyDeviceToDevice, stream));
          if (c.has_aux && epigemm::epilogue_writes_aux(e)) {
            CUDA_OK(cudaMemcpyAsync(aux_lt.ptr, c.aux.data, size_t(elems) * 2, cudaMemcpyDeviceToDevice, stream));
          }
          const int64_t bg_len = c.has_bias_grad ? c.bias_grad.length : 0;
          if (bg_len) CUDA_OK(cudaMemcpyAsync(bg_lt.ptr, c.bias_grad.data, size_t(bg_len) * 2, cudaMemcpyDeviceToDevice, stream));
          run_cuda(0);
          CUDA_OK(cudaStreamSynchronize(stream));
          // bf16 outputs of two fp32 computations: a few bf16 ulps apart at most.
          unsigned long long bad = mismatches(c.d.data, d_lt.ptr, elems, 1.0f / 32, 1.0f / 64);
          if (c.has_aux && epigemm::epilogue_writes_aux(e)) bad += mismatches(c.aux.data, aux_lt.ptr, elems, 1.0f / 64, 1.0f / 256);
          // Sums of up to 28672 terms of size ~1, rounded to bf16: relative 2^-6 plus a
          // summation-order allowance.
          unsigned long long bad_bg = bg_len ? mismatches(c.bias_grad.data, bg_lt.ptr, bg_len, 1.0f / 64,
                                                          0.02f * std::sqrt(float(e == EPIGEMM_EPILOGUE_BGRADB ? c.gemm_k : c.gemm_n)))
                                             : 0;
          check = (bad == 0 && bad_bg == 0) ? "ok" : "MISMATCH d/aux " + std::to_string(bad) + " bias_grad " + std::to_string(bad_bg);
        } else {
          run_cuda(0);
          CUDA_OK(cudaStreamSynchronize(stream));
        }

        const double fb = epilogue_floor_bytes(e, g0.m, g0.n, g0.k);
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
        fns.push_back([&](int rep) { run_api(apis_auto, rep); });
        names.push_back("auto");
        if (e != EPIGEMM_EPILOGUE_DEFAULT && e != EPIGEMM_EPILOGUE_BGRADB) {
          fns.push_back([&](int rep) {
            if (!inplace_backend->run(calls[size_t(rep % sets)]).ok()) die("cuda_inplace run failed");
          });
          names.push_back("cuda_inplace");
        }
        if (e == EPIGEMM_EPILOGUE_BIAS) {
          fns.push_back([&](int rep) {
            if (!bias_kernel_backend->run(calls[size_t(rep % sets)]).ok()) die("cuda_bias_kernel run failed");
          });
          names.push_back("cuda_bias_kernel");
        }
        if (e == EPIGEMM_EPILOGUE_BGRADB) {
          fns.push_back([&](int rep) {
            if (!serial_backend->run(calls[size_t(rep % sets)]).ok()) die("cuda_serial run failed");
          });
          names.push_back("cuda_serial");
        }
        const std::vector<double> medians = interleaved_median_ms(timing, stream, fns);
        const double floor_ms = medians[0];
        const double cuda_ms = medians[1];
        rows.push_back({sname, pass_name(p), ename, "case_floor", floor_ms, 1.0, NAN, NAN, ""});
        for (size_t v = 1; v < names.size(); ++v) {
          rows.push_back({sname, pass_name(p), ename, names[v], medians[v], medians[v] / floor_ms, fb, NAN,
                          names[v] == "cuda" || names[v] == "lt_fused" ? check
                          : names[v] == "auto"                          ? auto_note
                                                                        : ""});
        }
        if (!backend_lt_ok) {
          rows.push_back({sname, pass_name(p), ename, "cublaslt", NAN, NAN, fb, NAN,
                          "declined: " + lt_declined});
        }
        if (!lt_ok) rows.push_back({sname, pass_name(p), ename, "lt_fused", NAN, NAN, fb, NAN, "no cuBLASLt algorithm"});

        // The epilogue kernel alone, from the fp32 intermediate and from bf16 acc.
        if (e != EPIGEMM_EPILOGUE_DEFAULT) {
          using epigemm::cuda::TileArgs;
          const epigemm::cuda::TileOp epilogue_op = tile_op(e);
          // Partials of a row sum: BGRADB sums B (stored gemm_n x gemm_k) over its columns.
          const bool over_b = epilogue_op == epigemm::cuda::TileOp::row_sums;
          const int64_t partial_count = epigemm::cuda::row_partial_elements(
              tuning, epilogue_op, over_b ? g0.n : g0.m, over_b ? g0.k : g0.n);
          DeviceBuffer partials(size_t(std::max<int64_t>(1, partial_count)) * 4);
          // (acc_f32, op): the kernel from the fp32 intermediate, from bf16 acc (in place), and
          // for BIAS the broadcast of the bias into D that precedes a GEMM with beta = 1.
          std::vector<std::pair<int, epigemm::cuda::TileOp>> jobs = {{1, tile_op(e)}, {0, tile_op(e)}};
          if (e == EPIGEMM_EPILOGUE_BIAS) jobs.push_back({0, epigemm::cuda::TileOp::bias_broadcast});
          for (const auto& job : jobs) {
            const int acc_f32 = job.first;
            const epigemm::cuda::TileOp op = job.second;
            auto args_for = [&](int r) {
              const epigemm::GemmCall& c = calls[size_t(r)];
              TileArgs a;
              if (op == epigemm::cuda::TileOp::row_sums) {  // BGRADB: B = dY stored n x k
                a.rows = c.gemm_n;
                a.cols = c.gemm_k;
                a.acc = c.b.data;
                a.acc_dtype = EPIGEMM_DTYPE_BF16;
                a.ld_acc = c.b.ld;
              } else {
                a.rows = c.gemm_m;
                a.cols = c.gemm_n;
                a.acc = acc_f32 ? tsets[size_t(r)].acc_f32->ptr : c.d.data;
                a.acc_dtype = acc_f32 ? EPIGEMM_DTYPE_F32 : EPIGEMM_DTYPE_BF16;
                a.ld_acc = acc_f32 ? c.gemm_m : c.d.ld;
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
              a.row_partials = static_cast<float*>(partials.ptr);
              return a;
            };
            if (!acc_f32 && op == epigemm::cuda::TileOp::row_sums) continue;
            const epigemm::GemmCall& c0 = calls[0];
            void* sums = c0.has_bias_grad ? c0.bias_grad.data : nullptr;
            const TileArgs a0 = args_for(0);
            const bool vector = epigemm::cuda::tile_vector_path(op, a0);
            // Every vector configuration, then the configuration in use with 2, 4 and 8 waves,
            // interleaved; "kernel" is what the backend uses.
            const int configs = vector ? epigemm::cuda::kTileConfigCount : 1;
            const int used = vector ? tuning.vector_config[int(op)] : 0;
            struct KernelVariant {
              std::string suffix, note;
              epigemm::cuda::KernelTuning tuning;
            };
            std::vector<KernelVariant> kernel_variants;
            for (int config = 0; config < configs; ++config) {
              KernelVariant v{config == used ? "" : "_config" + std::to_string(config),
                              vector ? "vector path, threads_x " + std::to_string(epigemm::cuda::kTileConfigs[config].threads_x) +
                                           ", batch " + std::to_string(epigemm::cuda::kTileConfigs[config].batch) +
                                           ", min blocks " + std::to_string(epigemm::cuda::kTileConfigs[config].min_blocks) +
                                           (epigemm::cuda::kTileConfigs[config].prefetch ? ", prefetch" : "")
                                     : std::string("scalar path"),
                              tuning};
              v.tuning.vector_config[int(op)] = config;
              // The configuration in use runs as the backend runs it (size rules on); the others
              // exactly as named.
              v.tuning.size_rules = config == used;
              kernel_variants.push_back(v);
            }
            const std::string used_note = kernel_variants[size_t(used)].note;
            for (KernelVariant& v : kernel_variants) {
              v.note += ", waves " + std::to_string(tuning.waves[int(op)]);
              if (v.tuning.size_rules) v.note += " (size rules on: 1 wave below 8M elements, 128-thread rows on short tensors)";
            }
            for (int waves : {1, 2, 4, 8}) {
              if (waves == tuning.waves[int(op)]) continue;
              KernelVariant v{"_waves" + std::to_string(waves), used_note + ", waves " + std::to_string(waves), tuning};
              v.tuning.waves[int(op)] = waves;
              v.tuning.size_rules = false;
              kernel_variants.push_back(v);
            }
            if (op == epigemm::cuda::TileOp::dgelu_bgrad || op == epigemm::cuda::TileOp::row_sums) {
              // The finish kernel launched after the tile kernel instead of as its programmatic
              // dependent: what the dependent launch saves.
              KernelVariant v = kernel_variants[size_t(used)];
              v.suffix = "_serialfinish";
              v.note += ", finish kernel launched serially";
              v.tuning.dependent_launch = false;
              kernel_variants.push_back(v);
            }
            std::vector<std::function<void(int)>> kernel_fns;
            for (const KernelVariant& v : kernel_variants) {
              kernel_fns.push_back([&, tuned = v.tuning](int rep) {
                const TileArgs a = args_for(rep % sets);
                if (!epigemm::cuda::launch_tile_kernel(tuned, op, a, sums, EPIGEMM_DTYPE_BF16, stream).ok()) {
                  die("kernel launch failed");
                }
              });
            }
            const std::vector<double> kernel_ms = interleaved_median_ms(timing, stream, kernel_fns);
            const double bytes = kernel_bytes(op, a0.rows, a0.cols, acc_f32 ? 4.0 : 2.0);
            for (size_t kv = 0; kv < kernel_variants.size(); ++kv) {
              const double ms = kernel_ms[kv];
              const double tbps = bytes / (ms * 1e-3) / 1e12;
              std::string variant = op == epigemm::cuda::TileOp::bias_broadcast ? "kernel_broadcast"
                                    : acc_f32                                      ? "kernel"
                                                                                   : "kernel_bf16acc";
              variant += kernel_variants[kv].suffix;
              const std::string& note = kernel_variants[kv].note;
              rows.push_back({sname, pass_name(p), ename, variant, ms, ms / pass_floor_ms, bytes, tbps, note});
            }
            // The kernel in use once more, each call after read_to_clean_l2: the kernel alone,
            // without the write-back of the previous call's dirty L2 lines.
            {
              const size_t in_use = size_t(vector ? used : 0);
              const double ms = interleaved_median_ms(timing, stream, {kernel_fns[in_use]}, clean_l2)[0];
              std::string variant = op == epigemm::cuda::TileOp::bias_broadcast ? "kernel_broadcast"
                                    : acc_f32                                      ? "kernel"
                                                                                   : "kernel_bf16acc";
              rows.push_back({sname, pass_name(p), ename, variant + "_cleanl2", ms, ms / pass_floor_ms, bytes,
                              bytes / (ms * 1e-3) / 1e12, kernel_variants[in_use].note + ", after an L2 clean"});
            }
          }
        }
        for (auto* list : {&apis, &apis_cublaslt, &apis_auto}) {
          for (auto& a : *list) epigemm_gemm_desc_destroy(a.desc);
        }
        std::printf("  [%d/%d] %s %s: cuda %.4f ms (%.3f x floor), %s, %s\n", ++cases_done, cases_total, pass_name(p),
                    ename, cuda_ms, cuda_ms / floor_ms, check.c_str(), auto_note.c_str());
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
  csv << "shape,pass,gemm_m,gemm_n,gemm_k,epilogue,variant,ms,ratio_to_floor,bytes,bandwidth_tbps_or_tflops,fraction_of_copy,note\n";
  for (const Row& r : rows) {
    const bool kernel = r.variant.rfind("kernel", 0) == 0;
    const std::array<int64_t, 3> dims = gemm_dims_of[r.shape + "|" + r.pass];
    csv << '"' << r.shape << "\"," << r.pass << "," << dims[0] << "," << dims[1] << "," << dims[2] << "," << r.epilogue << "," << r.variant << "," << fmt(r.ms, 5) << ","
        << fmt(r.ratio_to_floor, 4) << "," << fmt(r.bytes, 0) << "," << fmt(r.bandwidth, 3) << ","
        << (kernel ? fmt(r.bandwidth / copy_tbps, 3) : std::string("")) << "," << r.check << "\n";
  }

  std::ostringstream md;
  md << "# epigemm cuda backend benchmark (bf16)\n\n" << header.str() << ".\n\n"
     << "Device-to-device copy: " << fmt(copy_tbps) << " TB/s (read + write).\n\n"
     << "## End to end\n\n"
     << "`x floor` = time over the plain cuBLAS GEMM of the same pass in the same run. `limit` = "
        "(floor + epilogue bytes floor / copy bandwidth / 0.85) / floor, the issue's end-to-end target. "
        "`lt/cuda` > 1: the cuda backend is faster than cuBLASLt's fused epilogue.\n\n"
     << "| shape (tok,in,out) | pass | epilogue | floor ms | cuda ms | cuda x floor | limit | within | in-place (serial) x floor | lt fused ms | lt x floor | lt/cuda | check |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  struct Summary {
    std::string shape, pass, epilogue;
    double cuda_x, lt_over_cuda, limit;
  };
  std::vector<Summary> summary;
  for (const Row& r : rows) {
    if (r.variant != "cuda") continue;
    const std::string key = r.shape + "|" + r.pass + "|" + r.epilogue + "|";
    const double floor_ms = by_key.count(key + "case_floor") ? by_key[key + "case_floor"]->ms : floor_of[r.shape + "|" + r.pass];
    const Row* lt_row = by_key.count(key + "lt_fused") ? by_key[key + "lt_fused"] : nullptr;
    const Row* inplace = by_key.count(key + "cuda_inplace") ? by_key[key + "cuda_inplace"] : nullptr;
    const Row* conc = by_key.count(key + "cuda_serial") ? by_key[key + "cuda_serial"] : nullptr;
    const Row* bias_kernel = by_key.count(key + "cuda_bias_kernel") ? by_key[key + "cuda_bias_kernel"] : nullptr;
    const double limit = (floor_ms + r.bytes / (copy_tbps * 1e12) * 1e3 / 0.85) / floor_ms;
    const double lt_ms = lt_row ? lt_row->ms : NAN;
    const double alt = inplace ? inplace->ratio_to_floor : conc ? conc->ratio_to_floor : NAN;
    md << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << fmt(floor_ms, 4) << " | " << fmt(r.ms, 4)
       << " | " << fmt(r.ratio_to_floor) << " | " << fmt(limit) << " | " << (r.ratio_to_floor <= limit ? "yes" : "NO")
       << " | " << fmt(alt) << (conc ? " (serial)" : "")
       << (bias_kernel ? "; fp32 intermediate + kernel " + fmt(bias_kernel->ratio_to_floor) : std::string())
       << " | " << fmt(lt_ms, 4) << " | "
       << fmt(lt_row ? lt_row->ratio_to_floor : NAN) << " | " << fmt(lt_ms / r.ms) << " | " << r.check << " |\n";
    summary.push_back({r.shape, r.pass, r.epilogue, r.ratio_to_floor, lt_ms / r.ms, limit});
  }
  md << "\n## Epilogue kernels alone\n\n"
     << "Bytes actually moved (acc read in fp32 for `kernel`, in bf16 for `kernel_bf16acc`; BGRADB: op(B) read once); "
        "target: element-wise >= 0.85 of copy bandwidth, reductions >= 0.80, on the three largest shapes. "
        "Every call timed right after the previous one, except `*_cleanl2`: the kernel in use, each call after "
        "a kernel that reads 256 MB (L2 then holds no dirty lines of the previous call to write back).\n\n"
     << "| shape (tok,in,out) | pass | epilogue | variant | ms | TB/s | of copy | path |\n|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (r.variant.rfind("kernel", 0) != 0) continue;
    md << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << r.variant << " | " << fmt(r.ms, 4) << " | "
       << fmt(r.bandwidth) << " | " << fmt(r.bandwidth / copy_tbps) << " | " << r.check << " |\n";
  }
  md << "\n## Floors\n\n| shape (tok,in,out) | pass | plain GEMM ms | TFLOP/s | GEMM writing fp32, x floor |\n|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (r.variant != "floor") continue;
    const Row* f32 = by_key[r.shape + "|" + r.pass + "|-|floor_f32out"];
    md << "| " << r.shape << " | " << r.pass << " | " << fmt(r.ms, 4) << " | " << fmt(r.bandwidth, 1) << " | "
       << fmt(f32 ? f32->ratio_to_floor : NAN) << " |\n";
  }
  const std::string md_path = out_dir + "/bench_gpu.md";
  std::ofstream(md_path) << md.str();

  // ---- the short table, last ----
  std::printf("\nwrote %s and %s\n", csv_path.c_str(), md_path.c_str());
  std::printf("copy %.3f TB/s\n", copy_tbps);
  std::printf("%-18s %-6s %-14s %8s %8s %8s\n", "shape", "pass", "epilogue", "cuda/fl", "limit", "lt/cuda");
  for (const Summary& s : summary) {
    std::printf("%-18s %-6s %-14s %8s %8s %8s\n", s.shape.c_str(), s.pass.c_str(), s.epilogue.c_str(),
                fmt(s.cuda_x).c_str(), fmt(s.limit).c_str(), fmt(s.lt_over_cuda).c_str());
  }
  std::printf("%-18s %-6s %-14s %8s %8s %9s %s\n", "shape", "pass", "kernel", "TB/s", "of copy",
              "clean L2", "best configuration (of copy)");
  for (const Row& r : rows) {
    if (r.variant != "kernel") continue;
    const std::string key = r.shape + "|" + r.pass + "|" + r.epilogue + "|kernel_cleanl2";
    const double clean = by_key.count(key) ? by_key[key]->bandwidth / copy_tbps : NAN;
    const Row* best = &r;
    for (const Row& other : rows) {
      if (other.shape == r.shape && other.pass == r.pass && other.epilogue == r.epilogue &&
          (other.variant.rfind("kernel_config", 0) == 0 || other.variant.rfind("kernel_waves", 0) == 0) &&
          other.ms < best->ms) {
        best = &other;
      }
    }
    std::printf("%-18s %-6s %-14s %8s %8s %9s %s (%s)\n", r.shape.c_str(), r.pass.c_str(), r.epilogue.c_str(),
                fmt(r.bandwidth).c_str(), fmt(r.bandwidth / copy_tbps).c_str(), fmt(clean).c_str(),
                best == &r ? "this" : best->variant.c_str(), fmt(best->bandwidth / copy_tbps).c_str());
  }

  // ---- the dispatcher: auto against the better of cuda and cublaslt, and against
  // cuBLASLt's fused epilogue called directly, over every epilogue case but DEFAULT ----
  std::ostringstream dmd;
  dmd << "# epigemm dispatch: auto against cuda, cublaslt and cuBLASLt fused (bf16)\n\n" << header.str() << ".\n\n"
      << "`auto / best` = auto's time over the faster of the cuda and cublaslt backends (target <= 1.03). "
         "`lt / auto` = cuBLASLt's fused epilogue called directly over auto (> 1: auto is faster).\n\n"
      << "| shape (tok,in,out) | pass | epilogue | cuda ms | cublaslt ms | lt fused ms | auto ms | auto ran | auto / best | lt / auto |\n"
      << "|---|---|---|---|---|---|---|---|---|---|\n";
  std::printf("\n%-18s %-6s %-14s %8s %8s %8s %8s %-9s %9s %8s\n", "shape", "pass", "epilogue", "cuda", "cublaslt",
              "lt_fused", "auto", "auto ran", "auto/best", "lt/auto");
  double log_sum = 0.0, worst_auto = 0.0;
  int cases = 0;
  for (const Row& r : rows) {
    if (r.variant != "auto" || r.epilogue == "DEFAULT") continue;
    const std::string key = r.shape + "|" + r.pass + "|" + r.epilogue + "|";
    auto ms_of = [&](const char* variant) { return by_key.count(key + variant) ? by_key[key + variant]->ms : NAN; };
    const double cuda_ms = ms_of("cuda"), backend_lt_ms = ms_of("cublaslt"), lt_ms = ms_of("lt_fused");
    const double best = std::isnan(backend_lt_ms) ? cuda_ms : std::min(cuda_ms, backend_lt_ms);
    const double auto_over_best = r.ms / best, lt_over_auto = lt_ms / r.ms;
    const std::string ran = r.check.size() > 9 ? r.check.substr(9) : r.check;  // "auto ran X"
    if (!std::isnan(lt_over_auto)) {
      log_sum += std::log(lt_over_auto);
      ++cases;
    }
    worst_auto = std::max(worst_auto, auto_over_best);
    dmd << "| " << r.shape << " | " << r.pass << " | " << r.epilogue << " | " << fmt(cuda_ms, 4) << " | "
        << fmt(backend_lt_ms, 4) << " | " << fmt(lt_ms, 4) << " | " << fmt(r.ms, 4) << " | " << ran << " | "
        << fmt(auto_over_best) << " | " << fmt(lt_over_auto) << " |\n";
    std::printf("%-18s %-6s %-14s %8s %8s %8s %8s %-9s %9s %8s\n", r.shape.c_str(), r.pass.c_str(), r.epilogue.c_str(),
                fmt(cuda_ms, 4).c_str(), fmt(backend_lt_ms, 4).c_str(), fmt(lt_ms, 4).c_str(), fmt(r.ms, 4).c_str(),
                ran.c_str(), fmt(auto_over_best).c_str(), fmt(lt_over_auto).c_str());
  }
  const double geomean = cases ? std::exp(log_sum / cases) : NAN;
  dmd << "\nOver " << cases << " epilogue cases: geometric mean of (cuBLASLt fused / auto) = " << fmt(geomean)
      << " (target >= 1.04); worst auto / best = " << fmt(worst_auto) << " (target <= 1.03).\n";
  std::ofstream(out_dir + "/bench_dispatch.md") << dmd.str();
  std::printf("dispatch over %d epilogue cases: geomean lt_fused/auto %s (target >= 1.04), worst auto/best %s (target <= 1.03)\n",
              cases, fmt(geomean).c_str(), fmt(worst_auto).c_str());

  epigemm_context_destroy(ctx);
  cublasLtDestroy(lt);
  cublasDestroy(blas);
  return 0;
}
