// Tests specific to the cpu backend (src/backends/cpu/, docs/cpu_backend.md); the matrix
// in test_backend_matrix.cpp covers it like every backend. Here, through the backend object and
// its options:
//   - the AVX2 and AVX-512 lanes of every activation and its derivative against the scalar
//     functors over a dense sweep of x;
//   - bias gradients (and D) bitwise identical with 1 and 2 threads, over several panels;
//   - the workspace: none for all-fp32 calls, blocks (not full-size copies) for fp16/bf16, and
//     small panels / k blocks giving the same results as the defaults;
//   - odd leading dimensions and misaligned pointers through every kernel build this CPU runs
//     (the matrix reaches only the widest), against the reference;
//   - the other GEMM paths: oneDNN's matmul primitive and the OpenBLAS engine;
//   - which calls run on the calling thread alone.
#include <gtest/gtest.h>

#if defined(EPIGEMM_BUILT_WITH_CPU_BACKEND)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/epilogue_kernels.hpp"
#include "backends/reference/reference_backend.hpp"
#include "core/epilogue_math.hpp"
#include "core/gemm_call.hpp"
#include "core/numeric.hpp"

namespace {

using epigemm::CpuBackendOptions;
using epigemm::GemmCall;

constexpr epigemm_dtype_t F32 = EPIGEMM_DTYPE_F32, F16 = EPIGEMM_DTYPE_F16, BF16 = EPIGEMM_DTYPE_BF16;

// ---- the SIMD lanes against the scalar functors --------------------------------------------

// How much the lanes may differ from the scalar functor at x, relative to the value (forward) or
// to the derivative's terms (backward): both evaluate the same formula, differing only in exp
// (and erfc) by a few ulp, which the formula amplifies by its condition: |2u| for gelu_tanh
// (exp(-2u)), |x| for silu (exp(-x)), x^2 / 2 for gelu_erf (exp(-z^2) inside erfc, plus the fit of
// the lanes' erfc, within 1.2e-7 of the exact value), nothing for relu and the identity (exact).
struct LaneCheck {
  epigemm_activation_t activation;
  double (*condition)(double x);
  double (*derivative_terms)(double x);  // the scale of an evaluation's error of act'(x)
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const LaneCheck kLaneChecks[] = {
    {EPIGEMM_ACTIVATION_IDENTITY, [](double) { return 0.0; }, [](double) { return 1.0; }},
    {EPIGEMM_ACTIVATION_GELU_TANH,
     [](double x) { return std::fabs(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)); },
     [](double x) {
       const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), s = sigmoid(2.0 * u);
       return s + std::fabs(2.0 * x * s * (1.0 - s) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x));
     }},
    {EPIGEMM_ACTIVATION_GELU_ERF, [](double x) { return 2.0 + 0.5 * x * x; },
     [](double x) {
       return 0.5 * std::erfc(-x / std::sqrt(2.0)) +
              std::fabs(x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.141592653589793));
     }},
    {EPIGEMM_ACTIVATION_RELU, [](double) { return 0.0; }, [](double) { return 1.0; }},
    {EPIGEMM_ACTIVATION_SILU, [](double x) { return std::fabs(x); },
     [](double x) { return sigmoid(x) + std::fabs(x * sigmoid(x) * (1.0 - sigmoid(x))); }},
};

class CpuKernelBuilds : public ::testing::TestWithParam<std::string> {};

const epigemm::EpilogueKernels* kernel_build(const std::string& name) {
  return name == "avx512" ? epigemm::avx512_epilogue_kernels() : epigemm::avx2_epilogue_kernels();
}

// Every activation in this build's lanes against the scalar build (the functor on floats) over a
// dense sweep; the scalar functors themselves are checked against long double in
// test_epilogue_math.cpp.
TEST_P(CpuKernelBuilds, ActivationLanesMatchScalarOverDenseSweep) {
  const epigemm::EpilogueKernels* lanes = kernel_build(GetParam());
  if (lanes == nullptr) GTEST_SKIP() << "SKIP: this CPU cannot run the " << GetParam() << " kernels";
  const epigemm::EpilogueKernels& scalar = epigemm::scalar_epilogue_kernels();
  // Every 2^-12 over [-16, 16] (where the functions move), plus far values and specials.
  std::vector<float> x;
  for (int i = -65536; i <= 65536; ++i) x.push_back(float(i) / 4096.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {30.0f, -30.0f, 88.0f, -88.0f, 90.0f, -90.0f, 1e3f, -1e3f, 9999.0f, -9999.0f,
                  1e4f, -1e4f, 1e5f, -1e5f, 3e38f, -3e38f, inf, -inf, 1e-30f, -1e-30f, 1e-40f,
                  -1e-40f, 0.0f, -0.0f}) {
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  const int64_t n = int64_t(x.size());  // not a multiple of 8: the tail goes through the lanes too
  for (const LaneCheck& check : kLaneChecks) {
    SCOPED_TRACE(epigemm_activation_name(check.activation));
    std::vector<float> f_lanes(n), df_lanes(n), f_ref(n), df_ref(n);
    lanes->activation_values(check.activation, x.data(), n, f_lanes.data(), df_lanes.data());
    scalar.activation_values(check.activation, x.data(), n, f_ref.data(), df_ref.data());
    int64_t checked = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(f_lanes[i]) && std::isnan(df_lanes[i]) && std::isnan(f_ref[i]) &&
                    std::isnan(df_ref[i]))
            << "NaN in must give NaN out";
        continue;
      }
      if (std::isinf(x[i])) {  // the exact limits
        EXPECT_EQ(f_lanes[i], f_ref[i]) << "act at x=" << x[i];
        EXPECT_EQ(df_lanes[i], df_ref[i]) << "act' at x=" << x[i];
        continue;
      }
      const double condition = std::fmin(check.condition(double(x[i])), 100.0);
      const float tol = float(1.2e-7 * (8.0 + 4.0 * condition));
      // Values below 1e-30 are far under anything a GEMM epilogue resolves; compare absolutely.
      EXPECT_NEAR(f_lanes[i], f_ref[i], tol * std::fabs(f_ref[i]) + 1e-30f) << "act at x=" << x[i];
      const double terms = check.derivative_terms(double(x[i]));
      EXPECT_NEAR(df_lanes[i], df_ref[i], tol * float(std::isfinite(terms) ? terms : 0.0) + 1e-30f)
          << "act' at x=" << x[i];
      ++checked;
    }
    EXPECT_GT(checked, 131000);
  }
}

// A pointer into `storage` (resized to hold count floats) at `offset` floats past a 64-byte
// boundary, every float NaN.
float* floats_off_a_line(std::vector<float>& storage, size_t count, size_t offset) {
  storage.assign(count + 16 + offset, std::nanf(""));
  float* base = storage.data();
  const size_t to_line = (16 - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % 16) % 16;
  return base + to_line + offset;
}

// The forward pass with aux streamed (non-temporal stores where a vector is aligned to its size)
// writes bitwise the same D and aux as with aux stored through the cache: on blocks whose columns
// start on a cache line, 4 floats past one (the first rows go as a short vector, the rest
// aligned, as in buffers from a plain malloc) or at varying offsets (a leading dimension of 103:
// streamed and plain stores mixed), tails included.
TEST_P(CpuKernelBuilds, StreamedAuxMatchesCachedAux) {
  const epigemm::EpilogueKernels* lanes = kernel_build(GetParam());
  if (lanes == nullptr) GTEST_SKIP() << "SKIP: this CPU cannot run the " << GetParam() << " kernels";
  constexpr int64_t kRows = 100, kCols = 9;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  struct Layout {
    int64_t ld;
    size_t offset;
  };
  for (const Layout layout : {Layout{112, 0}, Layout{112, 4}, Layout{103, 3}}) {
    const int64_t ld = layout.ld;
    const size_t count = size_t(ld * kCols);
    std::vector<float> acc_storage, aux_storage[2], d_storage[2];
    float* acc = floats_off_a_line(acc_storage, count, layout.offset);
    for (size_t e = 0; e < count; ++e) acc[e] = dist(rng);
    std::vector<float> bias(kRows);
    for (float& v : bias) v = dist(rng);
    float* aux[2];
    float* d[2];
    for (int plan = 0; plan < 2; ++plan) {
      aux[plan] = floats_off_a_line(aux_storage[plan], count, layout.offset);
      d[plan] = floats_off_a_line(d_storage[plan], count, layout.offset);
    }
    for (epigemm_activation_t act : {EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_RELU}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE("ld " + std::to_string(ld) + " offset " + std::to_string(layout.offset) + " " +
                     epigemm_activation_name(act) + (with_bias ? " with bias" : ""));
        const epigemm::EpilogueParts parts = epigemm::epilogue_parts(
            with_bias ? EPIGEMM_EPILOGUE_GELU_AUX_BIAS : EPIGEMM_EPILOGUE_GELU_AUX, act);
        for (int plan = 0; plan < 2; ++plan) {
          epigemm::EpilogueBlock block;
          block.rows = kRows;
          block.cols = kCols;
          block.acc = acc;
          block.ld_acc = ld;
          block.d = d[plan];
          block.ld_d = ld;
          if (with_bias) block.bias = bias.data();
          block.aux = aux[plan];
          block.ld_aux = ld;
          block.stream_aux = plan == 0;
          lanes->apply(parts, block);
        }
        for (int64_t j = 0; j < kCols; ++j) {
          for (int64_t i = 0; i < kRows; ++i) {
            const int64_t at = i + j * ld;
            ASSERT_EQ(std::memcmp(&aux[0][at], &aux[1][at], sizeof(float)), 0) << "aux(" << i << ", " << j << ")";
            ASSERT_EQ(std::memcmp(&d[0][at], &d[1][at], sizeof(float)), 0) << "D(" << i << ", " << j << ")";
            ASSERT_FALSE(std::isnan(aux[0][at])) << "aux(" << i << ", " << j << ") not written";
            ASSERT_FALSE(std::isnan(d[0][at])) << "D(" << i << ", " << j << ") not written";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SimdBuilds, CpuKernelBuilds, ::testing::Values("avx2", "avx512"));

// ---- calls built directly on the backend object ---------------------------------------------

// A column-major matrix or vector with its own storage, an optional offset of one element (a
// misaligned data pointer) and a leading dimension that may exceed rows.
struct Buffer {
  epigemm_dtype_t dtype = F32;
  int64_t rows = 0, cols = 0, ld = 1;
  int64_t offset = 0;
  std::vector<unsigned char> bytes;

  Buffer() = default;
  Buffer(epigemm_dtype_t t, int64_t r, int64_t c, int64_t pad, bool misaligned)
      : dtype(t), rows(r), cols(c), ld(std::max<int64_t>(1, r) + pad), offset(misaligned ? 1 : 0) {
    bytes.assign(size_t((ld * std::max<int64_t>(c, 1) + offset + 8) * int64_t(epigemm::dtype_size(t))), 0xff);
  }
  void* data() { return bytes.data() + offset * int64_t(epigemm::dtype_size(dtype)); }
  float get(int64_t r, int64_t c) { return epigemm::load_as_float(data(), dtype, r + c * ld); }
  void set(int64_t r, int64_t c, float v) { epigemm::store_from_float(data(), dtype, r + c * ld, v); }
  epigemm::Matrix matrix() {
    return epigemm::Matrix{data(), dtype, rows, cols, ld, EPIGEMM_MEMORY_HOST};
  }
  epigemm::Vector vector() { return epigemm::Vector{data(), dtype, rows, EPIGEMM_MEMORY_HOST}; }
};

struct Case {
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  epigemm_op_t transa = EPIGEMM_OP_N, transb = EPIGEMM_OP_N;
  int64_t m = 1, n = 1, k = 1;
  epigemm_dtype_t ab = F32, d = F32, side = F32;  // side: bias, aux and bias_grad
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;
  bool misaligned = false;
  bool integer_inputs = false;  // small integers in A and B: the GEMM is exact in any order
  uint32_t seed = 1;
};

struct Operands {
  Buffer a, b, d, bias, aux, bias_grad;
};

epigemm::EpilogueParts parts_of(const Case& c) { return epigemm::epilogue_parts(c.epilogue, c.activation); }

Operands make_operands(const Case& c) {
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small_int(-3, 3);
  auto input = [&]() { return c.integer_inputs ? float(small_int(rng)) : uniform(rng); };
  Operands o;
  const bool an = c.transa == EPIGEMM_OP_N, bn = c.transb == EPIGEMM_OP_N;
  o.a = Buffer(c.ab, an ? c.m : c.k, an ? c.k : c.m, c.pad, c.misaligned);
  o.b = Buffer(c.ab, bn ? c.k : c.n, bn ? c.n : c.k, c.pad + 1, c.misaligned);
  o.d = Buffer(c.d, c.m, c.n, c.pad + 2, c.misaligned);
  for (int64_t j = 0; j < o.a.cols; ++j)
    for (int64_t i = 0; i < o.a.rows; ++i) o.a.set(i, j, input());
  for (int64_t j = 0; j < o.b.cols; ++j)
    for (int64_t i = 0; i < o.b.rows; ++i) o.b.set(i, j, input());
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t i = 0; i < c.m; ++i) o.d.set(i, j, c.beta != 0.0f ? uniform(rng) : NAN);
  const epigemm::EpilogueParts parts = parts_of(c);
  if (parts.reads_bias()) {
    o.bias = Buffer(c.side, c.m, 1, 0, c.misaligned);
    for (int64_t i = 0; i < c.m; ++i) o.bias.set(i, 0, uniform(rng));
  }
  if (parts.uses_aux()) {
    o.aux = Buffer(c.side, c.m, c.n, c.pad + 3, c.misaligned);
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) o.aux.set(i, j, parts.reads_aux() ? 3.0f * uniform(rng) : NAN);
  }
  if (parts.writes_bias_grad()) {
    const int64_t length = parts.bias_grad_length(c.m, c.n);
    o.bias_grad = Buffer(c.side, length, 1, 0, c.misaligned);
    for (int64_t i = 0; i < length; ++i) o.bias_grad.set(i, 0, NAN);
  }
  return o;
}

GemmCall make_call(const Case& c, Operands& o) {
  GemmCall call;
  call.transa = c.transa;
  call.transb = c.transb;
  call.gemm_m = c.m;
  call.gemm_n = c.n;
  call.gemm_k = c.k;
  call.a = o.a.matrix();
  call.b = o.b.matrix();
  call.d = o.d.matrix();
  call.alpha = c.alpha;
  call.beta = c.beta;
  call.epilogue = c.epilogue;
  call.activation = c.activation;
  const epigemm::EpilogueParts parts = parts_of(c);
  call.has_bias = parts.reads_bias();
  if (call.has_bias) call.bias = o.bias.vector();
  call.has_aux = parts.uses_aux();
  if (call.has_aux) call.aux = o.aux.matrix();
  call.has_bias_grad = parts.writes_bias_grad();
  if (call.has_bias_grad) call.bias_grad = o.bias_grad.vector();
  call.backend = EPIGEMM_BACKEND_CPU;
  return call;
}

// Runs the case on a backend with a workspace of exactly the size it asks for.
Operands run(epigemm::Backend& backend, const Case& c, size_t* workspace_bytes = nullptr) {
  Operands o = make_operands(c);
  GemmCall call = make_call(c, o);
  EXPECT_TRUE(backend.supports(call).supported);
  const size_t bytes = backend.workspace_bytes(call);
  if (workspace_bytes != nullptr) *workspace_bytes = bytes;
  std::vector<unsigned char> workspace(bytes + 1);
  call.workspace = bytes > 0 ? workspace.data() + 1 : nullptr;  // misaligned on purpose
  call.workspace_bytes = bytes;
  const epigemm::Status status = backend.run(call);
  EXPECT_TRUE(status.ok()) << status.message();
  return o;
}

bool bitwise_equal(const Buffer& x, const Buffer& y) { return x.bytes == y.bytes; }

// |out - ref| <= tolerance (|ref| + 1) on every element of the rows x cols matrix.
void expect_close(const char* name, Buffer& out, Buffer& ref, float tolerance) {
  ASSERT_EQ(out.rows, ref.rows);
  for (int64_t j = 0; j < out.cols; ++j) {
    for (int64_t i = 0; i < out.rows; ++i) {
      const float o = out.get(i, j), r = ref.get(i, j);
      ASSERT_FALSE(std::isnan(o)) << name << "(" << i << ", " << j << ") is NaN (unwritten?)";
      ASSERT_NEAR(o, r, tolerance * (std::fabs(r) + 1.0f)) << name << "(" << i << ", " << j << ")";
    }
  }
}

void expect_matches_reference(const Case& c, const CpuBackendOptions& options) {
  auto cpu = epigemm::create_cpu_backend(options);
  auto reference = epigemm::create_reference_backend();
  Operands out = run(*cpu, c);
  Operands ref = run(*reference, c);
  const float tolerance = c.ab == F32 && c.d == F32 && c.side == F32 ? 2e-5f : 1.6e-2f;
  expect_close("D", out.d, ref.d, tolerance);
  const epigemm::EpilogueParts parts = parts_of(c);
  if (parts.writes_aux()) expect_close("aux", out.aux, ref.aux, tolerance);
  if (parts.writes_bias_grad()) {
    // A sum of up to k (BGRADB, BGRADA) or n terms: scale the tolerance by their count's root.
    const int64_t terms = parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient ? c.n : c.k;
    expect_close("bias_grad", out.bias_grad, ref.bias_grad,
                 tolerance * float(std::sqrt(double(std::max<int64_t>(terms, 1)))));
  }
}

const epigemm_epilogue_t kEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT,     EPIGEMM_EPILOGUE_BIAS,         EPIGEMM_EPILOGUE_ACT,
    EPIGEMM_EPILOGUE_ACT_BIAS,    EPIGEMM_EPILOGUE_GELU_AUX,     EPIGEMM_EPILOGUE_GELU_AUX_BIAS,
    EPIGEMM_EPILOGUE_DGELU,       EPIGEMM_EPILOGUE_DGELU_BGRAD,  EPIGEMM_EPILOGUE_BGRADB,
    EPIGEMM_EPILOGUE_BGRADA};

// ---- bias gradients: the same bits with 1 and 2 threads ------------------------------------

TEST(CpuBackend, BiasGradientsBitwiseIdenticalWithOneAndTwoThreads) {
  for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DGELU_BGRAD, EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_EPILOGUE_BGRADA}) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.epilogue = e;
      c.transa = t / 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
      c.transb = t % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
      // Row tasks that differ with the thread count and several panels (48 columns) with tails; the
      // GEMM is exact (small integers), so only the order of the bias-gradient sums could
      // differ between thread counts.
      c.m = 700;
      c.n = 301;
      c.k = 97;
      c.pad = 3;
      c.integer_inputs = true;
      c.seed = 100 + uint32_t(t);
      CpuBackendOptions options;
      options.panel_columns = 48;
      options.threads = 1;
      auto one = epigemm::create_cpu_backend(options);
      options.threads = 2;
      auto two = epigemm::create_cpu_backend(options);
      const Operands r1 = run(*one, c), r2 = run(*two, c);
      SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " transa/transb case " + std::to_string(t));
      EXPECT_TRUE(bitwise_equal(r1.bias_grad, r2.bias_grad));
      EXPECT_TRUE(bitwise_equal(r1.d, r2.d));
      // The sums are not trivially zero.
      Buffer bg = r1.bias_grad;
      int nonzero = 0;
      for (int64_t i = 0; i < bg.rows; ++i) nonzero += bg.get(i, 0) != 0.0f;
      EXPECT_GT(nonzero, bg.rows / 2);
    }
  }
}

// DACT_BGRAD on one thread with more rows than a row-sum chunk (1024) and D's column 0 off a
// vector boundary (the data pointer one element past malloc's 16-byte alignment): the pass's
// first chunk is extended by the lead (the short first vector), and the chunks after it start
// aligned. Each kernel build this CPU runs, against the reference, bias_grad included.
TEST(CpuBackend, RowSumsOverSeveralChunksAfterAShortFirstVector) {
  for (const char* build : {"avx512", "avx2", "scalar"}) {
    const std::string name = build;
    if (name != "scalar" && kernel_build(name) == nullptr) continue;
    CpuBackendOptions options;
    options.threads = 1;
    options.kernels = name == "avx512" ? epigemm::CpuKernelBuild::widest
                      : name == "avx2" ? epigemm::CpuKernelBuild::avx2
                                       : epigemm::CpuKernelBuild::scalar;
    for (epigemm_activation_t act : {EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_RELU}) {
      for (bool misaligned : {true, false}) {
        Case c;
        c.epilogue = EPIGEMM_EPILOGUE_DACT_BGRAD;
        c.activation = act;
        c.m = 2100;  // chunks of 1024 (+ the lead), 1024 and the rest
        c.n = 23;
        c.k = 17;
        c.pad = 5;
        c.misaligned = misaligned;
        c.seed = 61;
        SCOPED_TRACE(name + " " + epigemm_activation_name(act) + (misaligned ? " misaligned" : " aligned"));
        expect_matches_reference(c, options);
      }
    }
  }
}

// BGRADB's sums where the order of the additions shows in the bits (small integers, as in the test
// above, sum exactly in any order, and a double sum of random floats rounds to the same float in
// almost any order): each sum of op(B) over k = 300 is ones, with 2^60 at p = 100 and -2^60 at
// p = 200. In p order (each row of B when op(B) = B^T, the wgrad) that is exactly 99: the 100
// ones before 2^60 and the 99 between are absorbed by it in double (ulp 256), the 99 after
// -2^60 are not; a sum split over p (two halves give 0) or over lanes gives something else. The
// rows are split in one task of 1024 rows with one thread and two of 512 with two (one panel).
// With op(B) = B each column is summed in vector lanes added in a fixed tree (a value that
// depends on the kernel build, the same for any thread count), 16 columns per task. Only
// bias_grad is compared: the GEMM may split differently.
TEST(CpuBackend, BgradbSumsInOperandOrderWithOneAndTwoThreads) {
  for (epigemm_op_t transb : {EPIGEMM_OP_N, EPIGEMM_OP_T}) {
    Case c;
    c.epilogue = EPIGEMM_EPILOGUE_BGRADB;
    c.transb = transb;
    c.m = 3;
    c.n = 1000;
    c.k = 300;
    c.seed = 7;
    auto run_with_threads = [&](int threads) {
      Operands o = make_operands(c);
      for (int64_t j = 0; j < c.n; ++j) {
        for (int64_t p = 0; p < c.k; ++p) {
          const float v = p == 100 ? 0x1p60f : p == 200 ? -0x1p60f : 1.0f;
          if (transb == EPIGEMM_OP_N) o.b.set(p, j, v); else o.b.set(j, p, v);
        }
      }
      CpuBackendOptions options;
      options.threads = threads;
      auto backend = epigemm::create_cpu_backend(options);
      GemmCall call = make_call(c, o);
      const epigemm::Status status = backend->run(call);
      EXPECT_TRUE(status.ok()) << status.message();
      return o;
    };
    const Operands r1 = run_with_threads(1), r2 = run_with_threads(2);
    SCOPED_TRACE(transb == EPIGEMM_OP_T ? "transb T" : "transb N");
    EXPECT_TRUE(bitwise_equal(r1.bias_grad, r2.bias_grad));
    Buffer bg = r1.bias_grad;
    for (int64_t j = 0; j < bg.rows; ++j) {
      ASSERT_TRUE(std::isfinite(bg.get(j, 0))) << "bias_grad[" << j << "]";
      if (transb == EPIGEMM_OP_T) {
        ASSERT_EQ(bg.get(j, 0), 99.0f) << "bias_grad[" << j << "]";
      }
    }
  }
}

// ---- the workspace -----------------------------------------------------------------------------

TEST(CpuBackend, AllFp32CallsNeedNoWorkspace) {
  auto cpu = epigemm::create_cpu_backend();
  for (epigemm_epilogue_t e : kEpilogues) {
    Case c;
    c.epilogue = e;
    c.m = 300;
    c.n = 700;
    c.k = 50;
    size_t bytes = 1;
    run(*cpu, c, &bytes);
    EXPECT_EQ(bytes, 0u) << epigemm_epilogue_name(e);
  }
}

TEST(CpuBackend, SixteenBitOperandsAreWidenedInBlocks) {
  // bf16 A/B/D, gemm_k and gemm_n several blocks long: the workspace holds one panel of acc,
  // one k block of op(A) and of op(B), the widened bias and the fp32 bias-gradient sums, far
  // less than fp32 copies of A, B and D.
  CpuBackendOptions small;
  small.panel_columns = 40;
  small.conversion_k_block = 64;
  auto cpu = epigemm::create_cpu_backend(small);
  for (epigemm_dtype_t t : {BF16, F16}) {
    for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_EPILOGUE_DGELU_BGRAD, EPIGEMM_EPILOGUE_BGRADB}) {
      Case c;
      c.epilogue = e;
      c.transa = EPIGEMM_OP_T;
      c.m = 130;
      c.n = 301;
      c.k = 333;
      c.ab = c.d = c.side = t;
      c.beta = 0.5f;
      c.seed = 7;
      SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " dtype " + std::to_string(int(t)));
      size_t bytes = 0;
      run(*cpu, c, &bytes);
      const size_t full = size_t(c.m * c.k + c.k * c.n + c.m * c.n) * sizeof(float);
      const size_t blocks = size_t(c.m * 40 + c.m * 64 + 64 * 40) * sizeof(float);
      EXPECT_LE(bytes, blocks + size_t(c.m + c.n) * sizeof(float) + 6 * 64);
      EXPECT_LT(bytes * 4, full);
    }
  }
}

// A product with one row or one column of D is a matrix-vector product for the engine, which adds
// its terms to each element of D in turn: past 2^24 a term of 1 is half an ulp and is lost, so
// 2^24 + 1 + 1 + 1 + 1 came out 2^24. The backend sums such products in blocks of terms and adds
// the blocks' sums (cpu_backend.cpp, kVectorShapedDepth): exactly 2^24 + 4 here. Every transpose,
// fp32 and fp16 operands, beta 0 and 1, vectors longer than the fp32 path's slice of them, and a
// last panel of one column.
TEST(CpuBackend, MatrixVectorProductsSumLongGemmKInBlocks) {
  const int64_t k = 4100;  // term 0: 4096 * 4096 = 2^24; terms 1-4095: 0; terms 4096-4099: 1
  struct Extents {
    int64_t m, n;
  };
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  for (const epigemm_dtype_t t : {F32, F16}) {
    // 3 x 513: fp16 D's panels of 512 columns leave a last one of one column.
    for (const Extents x : {Extents{1, 1}, Extents{1, 3}, Extents{5, 1}, Extents{1, 2049}, Extents{2049, 1},
                            Extents{3, 513}}) {
      for (const epigemm_op_t transa : {EPIGEMM_OP_N, EPIGEMM_OP_T}) {
        for (const epigemm_op_t transb : {EPIGEMM_OP_N, EPIGEMM_OP_T}) {
          for (const float beta : {0.0f, 1.0f}) {
            // op(A)[i, p] and op(B)[p, j] as stored (column-major, ld = rows as stored).
            const size_t size = t == F32 ? 4 : 2;
            std::vector<unsigned char> a(size_t(x.m * k) * size), b(size_t(k * x.n) * size);
            auto term = [&](int64_t p) { return p == 0 ? 4096.0f : p >= 4096 ? 1.0f : 0.0f; };
            auto put = [&](std::vector<unsigned char>& v, int64_t index, float value) {
              if (t == F32) {
                std::memcpy(v.data() + index * 4, &value, 4);
              } else {
                const uint16_t half = value == 4096.0f ? 0x6C00 : value == 1.0f ? 0x3C00 : 0x0000;
                std::memcpy(v.data() + index * 2, &half, 2);
              }
            };
            for (int64_t i = 0; i < x.m; ++i) {
              for (int64_t p = 0; p < k; ++p) put(a, transa == EPIGEMM_OP_N ? i + p * x.m : p + i * k, term(p));
            }
            for (int64_t j = 0; j < x.n; ++j) {
              for (int64_t p = 0; p < k; ++p) put(b, transb == EPIGEMM_OP_N ? p + j * k : j + p * x.n, term(p));
            }
            std::vector<float> d(size_t(x.m * x.n), beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : 2.0f);
            const epigemm_matrix_t A{a.data(), t, transa == EPIGEMM_OP_N ? x.m : k, transa == EPIGEMM_OP_N ? k : x.m,
                                     transa == EPIGEMM_OP_N ? x.m : k, EPIGEMM_MEMORY_HOST};
            const epigemm_matrix_t B{b.data(), t, transb == EPIGEMM_OP_N ? k : x.n, transb == EPIGEMM_OP_N ? x.n : k,
                                     transb == EPIGEMM_OP_N ? k : x.n, EPIGEMM_MEMORY_HOST};
            const epigemm_matrix_t D{d.data(), F32, x.m, x.n, x.m, EPIGEMM_MEMORY_HOST};
            epigemm_gemm_desc_t desc = nullptr;
            ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
            epigemm_gemm_desc_set_transpose(desc, transa, transb);
            epigemm_gemm_desc_set_scalars(desc, 1.0f, beta);
            epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_CPU);
            size_t bytes = 0;
            ASSERT_EQ(epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &bytes), EPIGEMM_STATUS_SUCCESS);
            std::vector<unsigned char> workspace(bytes + 64);
            ASSERT_EQ(epigemm_gemm(ctx, desc, &A, &B, &D, workspace.data(), bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
                << epigemm_context_last_error(ctx);
            epigemm_gemm_desc_destroy(desc);
            const float exact = 16777216.0f + 4.0f + (beta == 0.0f ? 0.0f : 2.0f);
            int64_t wrong = 0;
            for (const float v : d) wrong += v == exact ? 0 : 1;
            EXPECT_EQ(wrong, 0) << (t == F32 ? "f32" : "f16") << " m " << x.m << " n " << x.n << " transa "
                                << int(transa) << " transb " << int(transb) << " beta " << beta << ": D[0] = "
                                << d[0] << ", exactly " << exact;
          }
        }
      }
    }
  }
  epigemm_context_destroy(ctx);
}

TEST(CpuBackend, SmallPanelsAndBlocksMatchTheReference) {
  CpuBackendOptions small;
  small.panel_columns = 16;
  small.conversion_k_block = 24;
  for (epigemm_epilogue_t e : kEpilogues) {
    for (epigemm_dtype_t t : {F32, BF16, F16}) {
      Case c;
      c.epilogue = e;
      c.transa = EPIGEMM_OP_T;
      c.transb = EPIGEMM_OP_T;
      c.m = 71;
      c.n = 83;
      c.k = 101;
      c.ab = c.d = t;
      c.side = t == F32 ? F16 : F32;
      c.alpha = 0.75f;
      c.beta = 0.5f;
      c.seed = 11;
      SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " dtype " + std::to_string(int(t)));
      expect_matches_reference(c, small);
    }
  }
}

// ---- which oneDNN call runs an alpha = 1, beta = 0 GEMM ---------------------------------------

// onednn_overwrite_for_shape against the measurements it was made from (docs/dev/cpu_backend.md,
// `epigemm_bench_cpu --engines`, cpu[matmul] over cpu[sgemm] in the comments), in GEMM
// coordinates (fprop: T, N, out, tokens, in; dgrad: N, N, in, tokens, out; wgrad: N, T, in, out,
// tokens): the GEMM shapes where one call was faster by more than 5% and the rule follows it.
// Cases within 5% are left out (the rule may pick either there), and so are the 13 clear wins of
// the matmul primitive that the rule does not follow (listed in the doc, with the reason).
TEST(CpuBackend, OnednnOverwriteRuleAgreesWithTheMeasurements) {
  using epigemm::OnednnOverwrite;
  constexpr OnednnOverwrite kMatmul = OnednnOverwrite::matmul_primitive;
  constexpr OnednnOverwrite kSgemm = OnednnOverwrite::sgemm;
  constexpr epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  struct Measured {
    epigemm_op_t transa, transb;
    int64_t m, n, k;
    OnednnOverwrite faster;
  };
  const Measured measured[] = {
      {N, N, 768, 256, 3072, kSgemm},  // dgrad (256,768,3072): 1.14
      {N, T, 768, 3072, 256, kSgemm},  // wgrad (256,768,3072): 1.16
      {N, N, 768, 512, 3072, kSgemm},  // dgrad (512,768,3072): 1.17
      {N, T, 768, 3072, 512, kSgemm},  // wgrad (512,768,3072): 1.20
      {T, N, 3072, 1024, 768, kSgemm},  // fprop (1024,768,3072): 1.05
      {N, N, 768, 1024, 3072, kSgemm},  // dgrad (1024,768,3072): 1.18
      {N, T, 768, 3072, 1024, kSgemm},  // wgrad (1024,768,3072): 1.07
      {T, N, 3072, 2048, 768, kSgemm},  // fprop (2048,768,3072): 1.09
      {N, N, 768, 2048, 3072, kSgemm},  // dgrad (2048,768,3072): 1.37
      {N, T, 768, 3072, 2048, kSgemm},  // wgrad (2048,768,3072): 1.20
      {T, N, 4096, 256, 1024, kMatmul},  // fprop (256,1024,4096): 0.78
      {N, T, 1024, 4096, 256, kSgemm},  // wgrad (256,1024,4096): 1.06
      {T, N, 4096, 512, 1024, kMatmul},  // fprop (512,1024,4096): 0.82
      {N, N, 1024, 512, 4096, kSgemm},  // dgrad (512,1024,4096): 1.05
      {N, N, 1024, 1024, 4096, kSgemm},  // dgrad (1024,1024,4096): 1.06
      {N, T, 1024, 4096, 1024, kSgemm},  // wgrad (1024,1024,4096): 1.16
      {N, N, 1024, 2048, 4096, kSgemm},  // dgrad (2048,1024,4096): 1.09
      {N, T, 1024, 4096, 2048, kSgemm},  // wgrad (2048,1024,4096): 1.07
      {T, N, 4096, 256, 4096, kMatmul},  // fprop (256,4096,4096): 0.82
      {N, T, 4096, 4096, 256, kSgemm},  // wgrad (256,4096,4096): 1.09
      {T, N, 4096, 512, 4096, kMatmul},  // fprop (512,4096,4096): 0.86
      {N, N, 4096, 512, 4096, kSgemm},  // dgrad (512,4096,4096): 1.09
      {N, N, 4096, 1024, 4096, kSgemm},  // dgrad (1024,4096,4096): 1.11
      {N, T, 4096, 4096, 1024, kSgemm},  // wgrad (1024,4096,4096): 1.12
      {T, N, 768, 256, 3072, kMatmul},  // fprop (256,3072,768): 0.82
      {N, N, 3072, 256, 768, kSgemm},  // dgrad (256,3072,768): 1.83
      {N, T, 3072, 768, 256, kSgemm},  // wgrad (256,3072,768): 1.41
      {T, N, 768, 512, 3072, kMatmul},  // fprop (512,3072,768): 0.92
      {N, N, 3072, 512, 768, kSgemm},  // dgrad (512,3072,768): 2.36
      {N, T, 3072, 768, 512, kSgemm},  // wgrad (512,3072,768): 2.64
      {N, N, 3072, 1024, 768, kSgemm},  // dgrad (1024,3072,768): 2.58
      {N, T, 3072, 768, 1024, kSgemm},  // wgrad (1024,3072,768): 2.14
      {T, N, 768, 2048, 3072, kSgemm},  // fprop (2048,3072,768): 1.06
      {N, N, 3072, 2048, 768, kSgemm},  // dgrad (2048,3072,768): 2.25
      {N, T, 3072, 768, 2048, kSgemm},  // wgrad (2048,3072,768): 2.36
      {T, N, 4096, 2048, 4096, kSgemm},  // fprop (2048,4096,4096): 1.11
      {N, N, 4096, 2048, 4096, kSgemm},  // dgrad (2048,4096,4096): 1.11
      {N, T, 4096, 4096, 2048, kSgemm},  // wgrad (2048,4096,4096): 1.06
      {T, N, 1024, 256, 4096, kMatmul},  // fprop (256,4096,1024): 0.79
      {N, T, 4096, 1024, 256, kSgemm},  // wgrad (256,4096,1024): 1.06
      {T, N, 1024, 512, 4096, kMatmul},  // fprop (512,4096,1024): 0.84
      {N, N, 4096, 1024, 1024, kSgemm},  // dgrad (1024,4096,1024): 1.05
      {N, N, 4096, 2048, 1024, kSgemm},  // dgrad (2048,4096,1024): 1.25
      {N, T, 4096, 1024, 2048, kSgemm},  // wgrad (2048,4096,1024): 1.08
      {T, N, 4096, 64, 1024, kMatmul},  // fprop (64,1024,4096): 0.61
      {T, N, 4096, 128, 1024, kMatmul},  // fprop (128,1024,4096): 0.76
      {N, N, 1024, 128, 4096, kSgemm},  // dgrad (128,1024,4096): 1.07
      {N, T, 1024, 4096, 768, kSgemm},  // wgrad (768,1024,4096): 1.06
      {T, N, 4096, 64, 4096, kMatmul},  // fprop (64,4096,4096): 0.62
      {T, N, 4096, 128, 4096, kMatmul},  // fprop (128,4096,4096): 0.73
      {N, T, 4096, 4096, 768, kSgemm},  // wgrad (768,4096,4096): 1.07
      {T, N, 1024, 64, 4096, kMatmul},  // fprop (64,4096,1024): 0.58
      {N, N, 4096, 64, 1024, kSgemm},  // dgrad (64,4096,1024): 1.08
      {T, N, 1024, 128, 4096, kMatmul},  // fprop (128,4096,1024): 0.75
      {N, N, 4096, 128, 1024, kSgemm},  // dgrad (128,4096,1024): 1.06
      {N, T, 4096, 1024, 128, kSgemm},  // wgrad (128,4096,1024): 1.07
      {N, T, 4096, 1024, 768, kSgemm},  // wgrad (768,4096,1024): 1.06
      {T, N, 3072, 256, 768, kMatmul},  // fprop (256,768,3072): 0.94
      {T, N, 3072, 512, 768, kMatmul},  // fprop (512,768,3072): 0.92
  };
  for (const Measured& c : measured) {
    EXPECT_EQ(epigemm::onednn_overwrite_for_shape(c.transa, c.transb, c.m, c.n, c.k), c.faster)
        << "transa " << (c.transa == T ? "T" : "N") << " transb " << (c.transb == T ? "T" : "N")
        << " m " << c.m << " n " << c.n << " k " << c.k;
  }
}

// The shared matrix (test_backend_matrix.cpp) has one shape that the rule sends to the matmul
// primitive, so that the default backend's choice is checked against the reference there too;
// the same sizes in the other layouts, and in fp16/bf16 (whose GEMM calls take gemm_k blocks of
// conversion_k_block = 256), stay on dnnl_sgemm.
TEST(CpuBackend, OnednnOverwriteRuleSendsTheMatrixShapeToTheMatmulPrimitive) {
  using epigemm::OnednnOverwrite;
  EXPECT_EQ(epigemm::onednn_overwrite_for_shape(EPIGEMM_OP_T, EPIGEMM_OP_N, 1024, 24, 1040),
            OnednnOverwrite::matmul_primitive);
  for (const auto& [ta, tb] : {std::pair{EPIGEMM_OP_N, EPIGEMM_OP_N}, std::pair{EPIGEMM_OP_N, EPIGEMM_OP_T},
                               std::pair{EPIGEMM_OP_T, EPIGEMM_OP_T}}) {
    EXPECT_EQ(epigemm::onednn_overwrite_for_shape(ta, tb, 1024, 24, 1040),
              OnednnOverwrite::sgemm);
  }
  EXPECT_EQ(epigemm::onednn_overwrite_for_shape(EPIGEMM_OP_T, EPIGEMM_OP_N, 1024, 24, 256),
            OnednnOverwrite::sgemm);
}

// The other GEMM path for alpha = 1, beta = 0: oneDNN's matmul primitive, which adds the bias
// itself (the default, dnnl_sgemm with beta = 0, is what the other tests run); D starts as NaN
// here (make_operands poisons it when beta = 0), which neither path may read.
TEST(CpuBackend, MatmulPrimitivePathMatchesTheReference) {
  CpuBackendOptions options;
  options.onednn_overwrite = epigemm::OnednnOverwrite::matmul_primitive;
  for (epigemm_epilogue_t e : kEpilogues) {
    for (epigemm_dtype_t t : {F32, BF16}) {
      Case c;
      c.epilogue = e;
      c.transa = EPIGEMM_OP_T;
      c.m = 45;
      c.n = 67;
      c.k = 39;
      c.ab = c.d = c.side = t;
      c.seed = 31;
      SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " dtype " + std::to_string(int(t)));
      expect_matches_reference(c, options);
    }
  }
}

// The forward epilogues that write an fp32 aux with beta = 0, in each ForwardAuxPlan: acc in D
// with aux streamed (the default) or stored through the cache, or acc in aux (the GEMM writes acc,
// and the bias where the matmul primitive adds it, into aux; the pass writes D, and z back into
// aux where it adds the bias). Every plan, both GEMM paths, several panels, alpha != 1, a 16-bit
// D, padded leading dimensions (aux columns off a vector's alignment: partly streamed) and an
// activation of each kind, against the reference.
TEST(CpuBackend, EveryForwardAuxPlanMatchesTheReference) {
  using epigemm::ForwardAuxPlan;
  const epigemm_activation_t kActivations[] = {EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_RELU,
                                               EPIGEMM_ACTIVATION_SILU};
  for (ForwardAuxPlan plan : {ForwardAuxPlan::streamed_aux, ForwardAuxPlan::acc_in_aux, ForwardAuxPlan::cached_aux}) {
    for (auto overwrite : {epigemm::OnednnOverwrite::sgemm, epigemm::OnednnOverwrite::matmul_primitive}) {
      CpuBackendOptions options;
      options.forward_aux = plan;
      options.onednn_overwrite = overwrite;
      options.panel_columns = 24;
      for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_GELU_AUX, EPIGEMM_EPILOGUE_GELU_AUX_BIAS}) {
        for (int t = 0; t < 3; ++t) {
          Case c;
          c.epilogue = e;
          c.transa = EPIGEMM_OP_T;
          c.m = 57;
          c.n = 61;
          c.k = 43;
          c.ab = t == 2 ? BF16 : F32;
          c.d = t == 0 ? F32 : BF16;
          c.side = F32;  // aux fp32: the case the plans apply to
          c.activation = kActivations[size_t(t) % 3];
          c.alpha = t == 1 ? 0.75f : 1.0f;
          c.pad = 2;
          c.seed = 51 + uint32_t(t);
          SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " plan " + std::to_string(int(plan)) +
                       " primitive " + (overwrite == epigemm::OnednnOverwrite::matmul_primitive ? "yes" : "no") +
                       " case " + std::to_string(t));
          expect_matches_reference(c, options);
        }
      }
    }
  }
}

// The OpenBLAS engine (the one a build without oneDNN runs): cblas_sgemm with beta = 0 does not
// read D; everything around the GEMM is the same code.
TEST(CpuBackend, OpenblasEngineMatchesTheReference) {
  if (!epigemm::cpu_gemm_engine_available(epigemm::CpuGemmEngine::openblas)) {
    GTEST_SKIP() << "SKIP: OpenBLAS is not in this build";
  }
  CpuBackendOptions options;
  options.engine = epigemm::CpuGemmEngine::openblas;
  for (epigemm_epilogue_t e : kEpilogues) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.epilogue = e;
      c.transa = t / 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
      c.transb = t % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
      c.m = 53;
      c.n = 41;
      c.k = 29;
      c.ab = c.d = t % 2 ? BF16 : F32;
      c.side = F32;
      c.beta = t == 3 ? 0.5f : 0.0f;
      c.pad = 2;
      c.seed = 41 + uint32_t(t);
      SCOPED_TRACE(std::string(epigemm_epilogue_name(e)) + " case " + std::to_string(t));
      expect_matches_reference(c, options);
    }
  }
}

// ---- odd leading dimensions and misaligned pointers, both kernel builds ----------------------

TEST(CpuBackend, OddLeadingDimensionsAndMisalignedPointersInEveryKernelBuild) {
  for (const char* build : {"avx512", "avx2", "scalar"}) {
    const std::string name = build;
    if (name != "scalar" && kernel_build(name) == nullptr) continue;
    CpuBackendOptions options;
    options.kernels = name == "avx512" ? epigemm::CpuKernelBuild::widest
                      : name == "avx2" ? epigemm::CpuKernelBuild::avx2
                                       : epigemm::CpuKernelBuild::scalar;
    for (epigemm_epilogue_t e : kEpilogues) {
      for (int t = 0; t < 4; ++t) {
        for (epigemm_dtype_t d : {F32, BF16}) {
          Case c;
          c.epilogue = e;
          c.transa = t / 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
          c.transb = t % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
          c.m = 37;  // full vectors and a tail of rows
          c.n = 29;
          c.k = 19;
          c.ab = d;
          c.d = d;
          c.side = d == F32 ? BF16 : F16;
          c.beta = t % 2 ? 1.0f : 0.0f;
          c.pad = 5;
          c.misaligned = true;
          c.seed = 21 + uint32_t(t);
          SCOPED_TRACE(name + " " + epigemm_epilogue_name(e) +
                       " case " + std::to_string(t) + " dtype " + std::to_string(int(d)));
          expect_matches_reference(c, options);
        }
      }
    }
  }
}

// epigemm_linear_workspace_size promises enough for any one linear-layer call of those sizes,
// with the bias and bias gradient in any dtype (they are declared independently of the layer's
// tensors). An fp32 layer needs no workspace on this backend, but a bf16 bias must be widened
// (gemm_m floats) and a bf16 bias gradient summed in fp32 first: the query once assumed the
// vectors had the layer's dtype and answered 0 bytes here. Every call runs with exactly the
// queried bytes, under auto (the host's backend).
TEST(CpuBackend, LinearWorkspaceQueryCoversEveryVectorDtype) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  const int64_t tokens = 96, in = 80, out = 72;
  size_t bytes = 0;
  ASSERT_EQ(epigemm_linear_workspace_size(ctx, tokens, in, out, F32, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_SUCCESS);
  std::vector<std::vector<float>> storage;
  auto tensor = [&](int64_t rows, int64_t cols) {
    storage.emplace_back(size_t(rows * cols), 0.25f);
    return epigemm_tensor_t{storage.back().data(), F32, rows, cols, cols, EPIGEMM_MEMORY_HOST};
  };
  const epigemm_tensor_t x = tensor(tokens, in), w = tensor(out, in), y = tensor(tokens, out);
  const epigemm_tensor_t pre_out = tensor(tokens, out), dy = tensor(tokens, out);
  const epigemm_tensor_t dx = tensor(tokens, in), pre_in = tensor(tokens, in), dw = tensor(out, in);
  std::vector<unsigned char> workspace(bytes + 1);
  for (const epigemm_dtype_t v : {F32, F16, BF16}) {
    SCOPED_TRACE("vector dtype " + std::to_string(int(v)) + ", queried " + std::to_string(bytes) + " bytes");
    // Zeros: 0 in every dtype.
    std::vector<float> b(static_cast<size_t>(out), 0.0f), bg_in(static_cast<size_t>(in), 0.0f),
        bg_out(static_cast<size_t>(out), 0.0f);
    const epigemm_vector_t bias{b.data(), v, out, EPIGEMM_MEMORY_HOST};
    const epigemm_vector_t bias_grad_in{bg_in.data(), v, in, EPIGEMM_MEMORY_HOST};
    const epigemm_vector_t bias_grad_out{bg_out.data(), v, out, EPIGEMM_MEMORY_HOST};
    EXPECT_EQ(epigemm_linear_fprop(ctx, &x, &w, &bias, &pre_out, &y, workspace.data(), bytes, nullptr),
              EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
    EXPECT_EQ(epigemm_linear_fprop(ctx, &x, &w, &bias, nullptr, &y, workspace.data(), bytes, nullptr),
              EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
    EXPECT_EQ(epigemm_linear_dgrad(ctx, &dy, &w, &pre_in, &bias_grad_in, &dx, workspace.data(), bytes, nullptr),
              EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
    EXPECT_EQ(epigemm_linear_wgrad(ctx, &x, &dy, &dw, 0, &bias_grad_out, workspace.data(), bytes, nullptr),
              EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  }
  epigemm_context_destroy(ctx);
}

// Small calls run on the calling thread alone (no OpenMP team to wait for); larger ones, and any
// shape when the options ask for a thread count, follow the options / the caller's OpenMP setting.
TEST(CpuBackend, SmallCallsRunOnTheCallingThreadAlone) {
  auto threads = [](int64_t m, int64_t n, int64_t k, int requested) {
    GemmCall call;
    call.gemm_m = m;
    call.gemm_n = n;
    call.gemm_k = k;
    return epigemm::cpu_call_threads(call, requested);
  };
  EXPECT_EQ(threads(64, 64, 64, 0), 1);
  EXPECT_EQ(threads(101, 101, 101, 0), 1);  // 1030301 <= 2^20 multiply-adds
  EXPECT_EQ(threads(102, 102, 102, 0), 0);  // 1061208 > 2^20
  EXPECT_EQ(threads(0, 0, 0, 0), 1);
  // Few multiply-adds but an operand of 32768 elements or more: its pass is worth two threads.
  EXPECT_EQ(threads(8, 4096, 8, 0), 0);       // D is 32768 elements
  EXPECT_EQ(threads(8, 8, 2048, 0), 1);       // every operand under 32768 elements
  EXPECT_EQ(threads(8, 8, 4096, 0), 0);       // op(A) and op(B) are 32768 elements
  EXPECT_EQ(threads(1, 32768, 1, 0), 0);      // op(B) and D are 32768 elements
  // Sizes whose products overflow int64 are not small, and do not overflow on the way.
  const int64_t huge = int64_t(1) << 40;
  EXPECT_EQ(threads(huge, huge, huge, 0), 0);
  EXPECT_EQ(threads(huge, 0, huge, 0), 0);  // D empty, but op(A) is huge
  EXPECT_EQ(threads(0, 0, huge, 0), 1);     // nothing to multiply or sum
  // An explicit thread count wins whatever the shape.
  EXPECT_EQ(threads(64, 64, 64, 2), 2);
  EXPECT_EQ(threads(4096, 4096, 4096, 1), 1);
}

}  // namespace

#else  // the cpu backend is not in this build

TEST(CpuBackend, NotBuilt) { GTEST_SKIP() << "SKIP: the cpu backend is not built (no OpenBLAS/oneDNN or OpenMP)"; }

#endif
