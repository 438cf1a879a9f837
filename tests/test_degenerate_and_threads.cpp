// Degenerate sizes, 64-bit sizes and threads, through the public C API (epigemm.h only).
//   docs/conventions.md §4 "Degenerate sizes": gemm_m = 0 or gemm_n = 0 writes nothing into empty
//     outputs; DGELU_BGRAD with gemm_n = 0 writes bias_grad = 0; BGRADB with gemm_m = 0 still
//     writes bias_grad = sum over gemm_k of op(B); gemm_k = 0 gives acc = beta * D_old and the
//     epilogue as usual; beta = 0 never reads D.
//   §4 "64-bit sizes": a tensor of more than 2^31 elements works.
//   §7 "Threads": a context per thread; one description read by several threads at once.
// Every usable backend is checked (host backends on host memory, GPU backends on device memory
// when the tests are built with CUDA and a GPU is present).
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "epigemm/epigemm.h"
#include "harness/harness.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

constexpr epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
const epigemm_epilogue_t kAllEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS,        EPIGEMM_EPILOGUE_GELU_AUX,
    EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD,
    EPIGEMM_EPILOGUE_BGRADB};

bool reads_bias(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_BIAS || e == EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
}
bool writes_aux(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_GELU_AUX || e == EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
}
bool reads_aux(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_DGELU || e == EPIGEMM_EPILOGUE_DGELU_BGRAD;
}
bool writes_bias_grad(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_DGELU_BGRAD || e == EPIGEMM_EPILOGUE_BGRADB;
}

// gelu_tanh and its derivative straight from docs/conventions.md, in double.
double gelu(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
double gelu_grad(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// ---- where a backend runs, and f32 buffers there ---------------------------------------------

struct Target {
  epigemm_backend_t backend;
  epigemm_memory_t memory;
};

std::vector<Target> usable_targets(epigemm_context_t ctx) {
  std::vector<Target> targets;
  for (epigemm_backend_t b : {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU}) {
    if (epigemm_backend_usable(ctx, b)) targets.push_back({b, EPIGEMM_MEMORY_HOST});
  }
#ifdef EPIGEMM_TESTS_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    for (epigemm_backend_t b : {EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT}) {
      if (epigemm_backend_usable(ctx, b)) targets.push_back({b, EPIGEMM_MEMORY_DEVICE});
    }
  }
#endif
  return targets;
}

const float kSentinel = -12345.5f;  // what "untouched" looks like

// f32 values on the host, mirrored on the device for device targets. At least one element is
// allocated so that an empty operand still has a distinct, non-NULL address.
class Buffer {
 public:
  Buffer(epigemm_memory_t memory, size_t count, float fill = kSentinel)
      : memory_(memory), host_(count == 0 ? 1 : count, fill) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (memory_ == EPIGEMM_MEMORY_DEVICE) {
      EXPECT_EQ(cudaMalloc(&device_, host_.size() * sizeof(float)), cudaSuccess);
      upload();
    }
#endif
  }
  ~Buffer() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_) cudaFree(device_);
#endif
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  float& operator[](size_t i) { return host_[i]; }
  void* data() { return memory_ == EPIGEMM_MEMORY_DEVICE ? device_ : host_.data(); }
  void upload() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_) {
      EXPECT_TRUE(epigemm_test::copy_to_device_and_wait(device_, host_.data(), host_.size() * sizeof(float)));
    }
#endif
  }
  // The values as they are now (after the call).
  const std::vector<float>& read() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(host_.data(), device_, host_.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    }
#endif
    return host_;
  }
  size_t size() const { return host_.size(); }

 private:
  epigemm_memory_t memory_;
  std::vector<float> host_;
  void* device_ = nullptr;
};

epigemm_matrix_t matrix(Buffer& b, int64_t rows, int64_t cols, epigemm_memory_t memory) {
  return epigemm_matrix_t{b.data(), EPIGEMM_DTYPE_F32, rows, cols, rows < 1 ? 1 : rows, memory};
}
epigemm_vector_t vector(Buffer& b, int64_t length, epigemm_memory_t memory) {
  return epigemm_vector_t{b.data(), EPIGEMM_DTYPE_F32, length, memory};
}

std::string target_name(const Target& t) { return epigemm_backend_name(t.backend); }

bool near(double got, double expected) {
  return std::fabs(got - expected) <= 1e-6 + 1e-5 * std::fabs(expected);
}

// One GEMM-level call of the given sizes on a target; buffers are exposed for checking.
struct DegenerateCall {
  Target target;
  int64_t m, n, k;
  epigemm_op_t transa, transb;
  epigemm_epilogue_t epilogue;
  float beta;
  float alpha = 1.0f;
  Buffer a, b, d, aux, bias, bias_grad;

  DegenerateCall(Target t, int64_t m_, int64_t n_, int64_t k_, epigemm_op_t ta, epigemm_op_t tb,
                 epigemm_epilogue_t e, float beta_)
      : target(t), m(m_), n(n_), k(k_), transa(ta), transb(tb), epilogue(e), beta(beta_),
        a(t.memory, size_t(m_ * k_)), b(t.memory, size_t(k_ * n_)), d(t.memory, size_t(m_ * n_)),
        aux(t.memory, size_t(m_ * n_)), bias(t.memory, size_t(m_)),
        bias_grad(t.memory, size_t(e == EPIGEMM_EPILOGUE_BGRADB ? n_ : m_)) {
    // Small exact values: A[idx] = (idx % 5) - 2, B[idx] = (idx % 3) - 1 (+ 0.5 per column),
    // D_old[idx] = idx % 4 + 1, bias[i] = 0.25 i - 1, aux (in) = 0.1 idx - 0.7.
    for (int64_t i = 0; i < m * k; ++i) a[size_t(i)] = float(i % 5 - 2);
    for (int64_t i = 0; i < k * n; ++i) b[size_t(i)] = float(i % 3 - 1) + 0.5f;
    for (int64_t i = 0; i < m * n; ++i) d[size_t(i)] = float(i % 4 + 1);
    for (int64_t i = 0; i < m; ++i) bias[size_t(i)] = 0.25f * float(i) - 1.0f;
    if (reads_aux(e)) {
      for (int64_t i = 0; i < m * n; ++i) aux[size_t(i)] = 0.1f * float(i) - 0.7f;
    }
    for (Buffer* buf : {&a, &b, &d, &aux, &bias}) buf->upload();
  }

  // op(B)[p, j] as stored (B is k x n for N, n x k for T, ld = its rows).
  double op_b(int64_t p, int64_t j) const {
    Buffer& bb = const_cast<Buffer&>(b);
    return transb == N ? bb[size_t(p + j * k)] : bb[size_t(j + p * n)];
  }

  epigemm_status_t run(epigemm_context_t ctx) {
    const epigemm_memory_t mem = target.memory;
    epigemm_matrix_t A = transa == N ? matrix(a, m, k, mem) : matrix(a, k, m, mem);
    epigemm_matrix_t B = transb == N ? matrix(b, k, n, mem) : matrix(b, n, k, mem);
    epigemm_matrix_t D = matrix(d, m, n, mem);
    epigemm_matrix_t AUX = matrix(aux, m, n, mem);
    epigemm_vector_t BIAS = vector(bias, m, mem);
    epigemm_vector_t BGRAD = vector(bias_grad, epilogue == EPIGEMM_EPILOGUE_BGRADB ? n : m, mem);
    epigemm_gemm_desc_t desc = nullptr;
    EXPECT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_transpose(desc, transa, transb);
    epigemm_gemm_desc_set_scalars(desc, alpha, beta);
    epigemm_gemm_desc_set_epilogue(desc, epilogue);
    epigemm_gemm_desc_set_bias(desc, reads_bias(epilogue) ? &BIAS : nullptr);
    epigemm_gemm_desc_set_aux(desc, writes_aux(epilogue) || reads_aux(epilogue) ? &AUX : nullptr);
    epigemm_gemm_desc_set_bias_grad(desc, writes_bias_grad(epilogue) ? &BGRAD : nullptr);
    epigemm_gemm_desc_set_backend(desc, target.backend);
    size_t bytes = 0;
    epigemm_status_t status = epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &bytes);
    if (status == EPIGEMM_STATUS_SUCCESS) {
      // NaN in every word: a call may not depend on what its workspace held before.
      Buffer workspace(target.memory, (bytes + sizeof(float) - 1) / sizeof(float),
                       std::numeric_limits<float>::quiet_NaN());
      status = epigemm_gemm(ctx, desc, &A, &B, &D, bytes ? workspace.data() : nullptr, bytes, nullptr);
#ifdef EPIGEMM_TESTS_WITH_CUDA
      if (target.memory == EPIGEMM_MEMORY_DEVICE) {
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
#endif
    }
    epigemm_gemm_desc_destroy(desc);
    return status;
  }
};

std::string describe(const DegenerateCall& c) {
  return target_name(c.target) + " " + epigemm_epilogue_name(c.epilogue) + " m=" +
         std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " transa=" + (c.transa == T ? "T" : "N") + " transb=" + (c.transb == T ? "T" : "N") +
         " beta=" + std::to_string(c.beta);
}

class Degenerate : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(epigemm_context_create(&ctx_), EPIGEMM_STATUS_SUCCESS); }
  void TearDown() override { epigemm_context_destroy(ctx_); }
  // Runs the call; NOT_SUPPORTED from a backend asked by name is allowed only for non-reference
  // backends (a backend may decline a call; the dispatcher then routes AUTO elsewhere).
  bool run(DegenerateCall& c) {
    const epigemm_status_t status = c.run(ctx_);
    if (status == EPIGEMM_STATUS_NOT_SUPPORTED && c.target.backend != EPIGEMM_BACKEND_REFERENCE) {
      // Printed, so that a backend declining everything does not pass silently.
      std::printf("  %s declined: %s\n", describe(c).c_str(), epigemm_context_last_error(ctx_));
      return false;
    }
    EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS) << describe(c) << ": " << epigemm_context_last_error(ctx_);
    return status == EPIGEMM_STATUS_SUCCESS;
  }
  epigemm_context_t ctx_ = nullptr;
};

// gemm_m = 0 or gemm_n = 0: every empty output stays as it was; the non-empty bias gradients are
// written by their definition.
TEST_F(Degenerate, EmptyProductWritesNothingButNonEmptyBiasGradients) {
  for (const Target& target : usable_targets(ctx_)) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      for (epigemm_op_t transb : {N, T}) {
        for (const bool empty_m : {true, false}) {
          const int64_t m = empty_m ? 0 : 4, n = empty_m ? 5 : 0, k = 3;
          DegenerateCall c(target, m, n, k, T, transb, e, 1.0f);
          SCOPED_TRACE(describe(c));
          if (!run(c)) continue;
          // D and aux have no elements; their (one-element) buffers keep the sentinel.
          EXPECT_EQ(c.d.read()[0], kSentinel);
          if (writes_aux(e)) {
            EXPECT_EQ(c.aux.read()[0], kSentinel);
          }
          if (!writes_bias_grad(e)) continue;
          const std::vector<float>& bg = c.bias_grad.read();
          if (e == EPIGEMM_EPILOGUE_DGELU_BGRAD) {
            // length gemm_m: an empty sum over gemm_n = 0 columns is 0.
            for (int64_t i = 0; i < m; ++i) EXPECT_EQ(bg[size_t(i)], 0.0f) << "bias_grad[" << i << "]";
            if (m == 0) {
              EXPECT_EQ(bg[0], kSentinel);
            }
          } else {
            // BGRADB, length gemm_n: sum over gemm_k of op(B), whatever gemm_m.
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0.0;
              for (int64_t p = 0; p < k; ++p) sum += c.op_b(p, j);
              EXPECT_TRUE(near(bg[size_t(j)], sum)) << "bias_grad[" << j << "] = " << bg[size_t(j)]
                                                   << ", expected " << sum;
            }
            if (n == 0) {
              EXPECT_EQ(bg[0], kSentinel);
            }
          }
        }
      }
    }
  }
}

// gemm_k = 0: acc = beta * D_old, then the epilogue as usual; BGRADB's bias_grad is all zeros.
// After a call without a product (gemm_k = 0, or alpha = 0): D, aux and DGELU_BGRAD's sums are the
// epilogue of acc = beta D_old (d_old and aux_in: the buffers before the call).
void expect_epilogue_of_beta_times_d(DegenerateCall& c, const std::vector<float>& d_old,
                                     const std::vector<float>& aux_in) {
  const epigemm_epilogue_t e = c.epilogue;
  const std::vector<float>& d = c.d.read();
  const std::vector<float>& aux = c.aux.read();
  const std::vector<float>& bias = c.bias.read();
  std::vector<double> row_sums(size_t(c.m), 0.0);
  for (int64_t j = 0; j < c.n; ++j) {
    for (int64_t i = 0; i < c.m; ++i) {
      const size_t at = size_t(i + j * c.m);
      const double acc = double(c.beta) * d_old[at];
      double z = acc, out = acc;
      if (reads_bias(e)) z = acc + bias[size_t(i)];
      if (writes_aux(e)) {
        out = gelu(z);
        EXPECT_TRUE(near(aux[at], z)) << "aux(" << i << "," << j << ") = " << aux[at] << ", expected " << z;
      } else if (reads_aux(e)) {
        out = acc * gelu_grad(aux_in[at]);
      } else {
        out = z;
      }
      row_sums[size_t(i)] += out;
      EXPECT_TRUE(near(d[at], out)) << "D(" << i << "," << j << ") = " << d[at] << ", expected " << out;
    }
  }
  if (e == EPIGEMM_EPILOGUE_DGELU_BGRAD) {
    const std::vector<float>& bg = c.bias_grad.read();
    for (int64_t i = 0; i < c.m; ++i) {
      EXPECT_TRUE(near(bg[size_t(i)], row_sums[size_t(i)])) << "bias_grad[" << i << "]";
    }
  }
}

// gemm_k = 0: acc = beta D_old whatever alpha is (an empty product, not alpha times 0: a NaN or
// infinite alpha reaches nothing either).
TEST_F(Degenerate, EmptyInnerDimensionIsBetaTimesDThenEpilogue) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const Target& target : usable_targets(ctx_)) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      for (const float beta : {0.0f, 0.5f}) {
        for (epigemm_op_t transa : {N, T}) {
          for (const float alpha : {1.0f, std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
            const int64_t n = 5;
            DegenerateCall c(target, 4, n, 0, transa, T, e, beta);
            c.alpha = alpha;
            SCOPED_TRACE(describe(c) + " alpha=" + std::to_string(alpha));
            const std::vector<float> d_old(c.d.read().begin(), c.d.read().end());
            const std::vector<float> aux_in(c.aux.read().begin(), c.aux.read().end());
            if (!run(c)) continue;
            expect_epilogue_of_beta_times_d(c, d_old, aux_in);
            if (e == EPIGEMM_EPILOGUE_BGRADB) {
              const std::vector<float>& bg = c.bias_grad.read();
              for (int64_t j = 0; j < n; ++j) EXPECT_EQ(bg[size_t(j)], 0.0f) << "bias_grad[" << j << "]";
            }
          }
        }
      }
    }
  }
}

// Empty operands may have NULL data (docs/conventions.md §4), on every host backend. gemm_n = 40
// makes the cpu backend's BGRADB sum several groups of columns: with gemm_k = 0 it once formed
// their addresses from B's NULL data (NULL plus an offset, undefined; -fsanitize=pointer-overflow
// in the sanitizer build).
TEST_F(Degenerate, EmptyOperandsMayHaveNullData) {
  constexpr int64_t kColumns = 40;
  for (const Target& target : usable_targets(ctx_)) {
    if (target.memory != EPIGEMM_MEMORY_HOST) continue;  // host arrays here
    for (epigemm_op_t transb : {N, T}) {
      SCOPED_TRACE(target_name(target) + (transb == T ? " transb = T" : " transb = N"));
      std::vector<float> d(2 * kColumns, 7.0f), bg(kColumns, 7.0f);
      const epigemm_matrix_t A{nullptr, EPIGEMM_DTYPE_F32, 2, 0, 2, EPIGEMM_MEMORY_HOST};
      // op(B) is 0 x kColumns: stored 0 x kColumns (N) or kColumns x 0 (T).
      const epigemm_matrix_t B = transb == N
          ? epigemm_matrix_t{nullptr, EPIGEMM_DTYPE_F32, 0, kColumns, 1, EPIGEMM_MEMORY_HOST}
          : epigemm_matrix_t{nullptr, EPIGEMM_DTYPE_F32, kColumns, 0, kColumns, EPIGEMM_MEMORY_HOST};
      const epigemm_matrix_t D{d.data(), EPIGEMM_DTYPE_F32, 2, kColumns, 2, EPIGEMM_MEMORY_HOST};
      const epigemm_vector_t BG{bg.data(), EPIGEMM_DTYPE_F32, kColumns, EPIGEMM_MEMORY_HOST};
      epigemm_gemm_desc_t desc = nullptr;
      ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
      epigemm_gemm_desc_set_transpose(desc, N, transb);
      epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_BGRADB);
      epigemm_gemm_desc_set_bias_grad(desc, &BG);
      epigemm_gemm_desc_set_backend(desc, target.backend);
      EXPECT_EQ(epigemm_gemm(ctx_, desc, &A, &B, &D, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
          << epigemm_context_last_error(ctx_);
      for (float v : d) EXPECT_EQ(v, 0.0f);
      for (float v : bg) EXPECT_EQ(v, 0.0f);
      epigemm_gemm_desc_destroy(desc);
    }
  }
  // gemm_m = 0: D has no elements and may be NULL too.
  float bg[2] = {7, 7};
  const epigemm_vector_t BG{bg, EPIGEMM_DTYPE_F32, 2, EPIGEMM_MEMORY_HOST};
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_BGRADB);
  epigemm_gemm_desc_set_bias_grad(desc, &BG);
  epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_REFERENCE);
  const epigemm_matrix_t A0{nullptr, EPIGEMM_DTYPE_F32, 0, 3, 1, EPIGEMM_MEMORY_HOST};
  float b[3 * 2] = {1, 2, 3, 4, 5, 6};
  const epigemm_matrix_t B3{b, EPIGEMM_DTYPE_F32, 3, 2, 3, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t D0{nullptr, EPIGEMM_DTYPE_F32, 0, 2, 1, EPIGEMM_MEMORY_HOST};
  EXPECT_EQ(epigemm_gemm(ctx_, desc, &A0, &B3, &D0, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  EXPECT_EQ(bg[0], 6.0f);
  EXPECT_EQ(bg[1], 15.0f);
  epigemm_gemm_desc_destroy(desc);
}

// beta = 0 never reads D: a D full of NaN gives finite results, for every epilogue, with alpha = 1
// and with alpha = 0 (BGRADB and BGRADA keep their product for the operand's sums, so a backend's
// GEMM sees alpha = 0 and beta = 0 there; the 1025 x 17 x 5 call, transa = T, is one where
// oneDNN's sgemm scales C by beta instead of zeroing it).
TEST_F(Degenerate, BetaZeroNeverReadsD) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Extents {
    int64_t m, n, k;
  };
  for (const Target& target : usable_targets(ctx_)) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      for (const Extents x : {Extents{4, 5, 0}, Extents{4, 5, 3}, Extents{1025, 17, 5}}) {
        for (const float alpha : {1.0f, 0.0f}) {
          for (epigemm_op_t transa : {N, T}) {
            DegenerateCall c(target, x.m, x.n, x.k, transa, N, e, 0.0f);
            c.alpha = alpha;
            for (size_t i = 0; i < c.d.size(); ++i) c.d[i] = nan;
            c.d.upload();
            SCOPED_TRACE(describe(c) + " alpha=" + std::to_string(alpha));
            if (!run(c)) continue;
            const std::vector<float>& d = c.d.read();
            int64_t not_finite = 0;
            for (const float v : d) not_finite += std::isfinite(v) ? 0 : 1;
            EXPECT_EQ(not_finite, 0) << "of " << d.size() << " elements of D";
            if (writes_bias_grad(e)) {
              const std::vector<float>& bg = c.bias_grad.read();
              for (size_t i = 0; i < bg.size(); ++i) EXPECT_TRUE(std::isfinite(bg[i])) << "bias_grad[" << i << "]";
            }
          }
        }
      }
    }
  }
}

// alpha = 0 leaves the product out, as in BLAS (docs/conventions.md, "alpha = 0"): with NaN in
// every element of A and B, D, aux and DGELU_BGRAD's sums are the epilogue of beta D_old on every
// backend; BGRADB and BGRADA still sum their operand (NaN here).
TEST_F(Degenerate, AlphaZeroLeavesTheProductOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Target& target : usable_targets(ctx_)) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      for (const float beta : {0.0f, 0.5f}) {
        for (epigemm_op_t transa : {N, T}) {
          DegenerateCall c(target, 4, 5, 3, transa, T, e, beta);
          c.alpha = 0.0f;
          for (Buffer* operand : {&c.a, &c.b}) {
            for (size_t i = 0; i < operand->size(); ++i) (*operand)[i] = nan;
            operand->upload();
          }
          SCOPED_TRACE(describe(c) + " alpha=0");
          const std::vector<float> d_old(c.d.read().begin(), c.d.read().end());
          const std::vector<float> aux_in(c.aux.read().begin(), c.aux.read().end());
          if (!run(c)) continue;
          expect_epilogue_of_beta_times_d(c, d_old, aux_in);
          if (e == EPIGEMM_EPILOGUE_BGRADB || e == EPIGEMM_EPILOGUE_BGRADA) {
            const std::vector<float>& bg = c.bias_grad.read();
            for (size_t i = 0; i < bg.size(); ++i) EXPECT_TRUE(std::isnan(bg[i])) << "bias_grad[" << i << "]";
          }
        }
      }
    }
  }
}

// The layer calls with tokens = 0 (gemm_n = 0 in fprop/dgrad, gemm_k = 0 in wgrad) and
// in_features = 0 (gemm_k = 0 in fprop).
TEST_F(Degenerate, LayerCallsWithNoTokensOrNoInputFeatures) {
  const int64_t in = 3, out = 2;
  std::vector<float> w(out * in, 1.0f), bias = {0.5f, -1.5f}, bias_grad(in, kSentinel);
  float y[1] = {kSentinel}, pre[1] = {kSentinel}, x[1] = {kSentinel}, dy[1] = {kSentinel},
        dx[1] = {kSentinel};
  const epigemm_memory_t H = EPIGEMM_MEMORY_HOST;
  const epigemm_dtype_t F = EPIGEMM_DTYPE_F32;
  // The most any of these layer calls needs (the sizes here are at most tokens = 3).
  size_t ws_bytes = 0;
  ASSERT_EQ(epigemm_linear_workspace_size(ctx_, 3, in, out, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, &ws_bytes),
            EPIGEMM_STATUS_SUCCESS);
  std::vector<unsigned char> workspace(ws_bytes + 1);
  void* ws = workspace.data();
  epigemm_tensor_t X{x, F, 0, in, in, H}, W{w.data(), F, out, in, in, H}, Y{y, F, 0, out, out, H};
  epigemm_tensor_t P{pre, F, 0, out, out, H};
  epigemm_vector_t B{bias.data(), F, out, H};
  ASSERT_EQ(epigemm_linear_fprop(ctx_, &X, &W, &B, &P, &Y, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  EXPECT_EQ(y[0], kSentinel);
  EXPECT_EQ(pre[0], kSentinel);

  // dgrad, tokens = 0: dX is empty, the previous layer's bias gradient (length in) is 0.
  epigemm_tensor_t DY{dy, F, 0, out, out, H}, DX{dx, F, 0, in, in, H}, PIN{pre, F, 0, in, in, H};
  epigemm_vector_t BG{bias_grad.data(), F, in, H};
  ASSERT_EQ(epigemm_linear_dgrad(ctx_, &DY, &W, &PIN, &BG, &DX, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  EXPECT_EQ(dx[0], kSentinel);
  for (float v : bias_grad) EXPECT_EQ(v, 0.0f);

  // wgrad, tokens = 0: dW = 0 (or unchanged when accumulating), bias_grad (length out) = 0.
  std::vector<float> dw(out * in, 9.0f), wbg(out, kSentinel);
  epigemm_tensor_t DW{dw.data(), F, out, in, in, H};
  epigemm_vector_t WBG{wbg.data(), F, out, H};
  ASSERT_EQ(epigemm_linear_wgrad(ctx_, &X, &DY, &DW, 1, &WBG, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  for (float v : dw) EXPECT_EQ(v, 9.0f);
  for (float v : wbg) EXPECT_EQ(v, 0.0f);
  ASSERT_EQ(epigemm_linear_wgrad(ctx_, &X, &DY, &DW, 0, &WBG, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  for (float v : dw) EXPECT_EQ(v, 0.0f);

  // fprop, in_features = 0: Y = gelu(bias), pre_gelu = bias, for every token.
  const int64_t tokens = 3;
  std::vector<float> y3(tokens * out, kSentinel), pre3(tokens * out, kSentinel);
  epigemm_tensor_t X0{nullptr, F, tokens, 0, 1, H}, W0{nullptr, F, out, 0, 1, H};
  epigemm_tensor_t Y3{y3.data(), F, tokens, out, out, H}, P3{pre3.data(), F, tokens, out, out, H};
  ASSERT_EQ(epigemm_linear_fprop(ctx_, &X0, &W0, &B, &P3, &Y3, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx_);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      EXPECT_EQ(pre3[size_t(t * out + o)], bias[size_t(o)]);
      EXPECT_TRUE(near(y3[size_t(t * out + o)], gelu(bias[size_t(o)])));
    }
  }
}

// ---- 64-bit sizes ------------------------------------------------------------------------------

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Anonymous, lazily backed memory: pages never written cost nothing and read as zero.
struct Mapping {
  explicit Mapping(size_t bytes) : size(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = p == MAP_FAILED ? nullptr : p;
  }
  ~Mapping() {
    if (data) munmap(data, size);
  }
  void* data = nullptr;
  size_t size = 0;
};

uint16_t bf16_bits(float f) {  // exact for the small values used here
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t(u >> 16);
}
float bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Element offsets beyond 2^32 with few elements, so it runs in milliseconds: every leading
// dimension is just over 2^31, so (row + col * ld) passes 2^32 for the last columns, and a 32-bit
// index anywhere (validation, dispatch, the backend, the epilogue) would read or write the wrong
// element. Lazily backed mappings: only the touched pages cost memory.
TEST(SixtyFourBit, OffsetsBeyondTwoToTheThirtyTwoElements) {
  const int64_t m = 2, n = 3, k = 1;
  const int64_t ld_a = (int64_t(1) << 31) + 1, ld_b = (int64_t(1) << 31) + 3;
  const int64_t ld_d = (int64_t(1) << 31) + 7, ld_aux = (int64_t(1) << 31) + 11;
  const float a[m] = {1.5f, -0.5f}, b[n] = {1.0f, 2.0f, -3.0f}, bias_values[m] = {0.25f, 0.5f};
  for (epigemm_op_t transa : {N, T}) {
    SCOPED_TRACE(transa == T ? "transa = T" : "transa = N");
    // A: m x k (ld m) for N; k x m with the large ld for T. B: k x n with the large ld.
    const int64_t a_ld = transa == N ? m : ld_a;
    Mapping ma(size_t((m - 1) * a_ld + 1) * 2), mb(size_t((n - 1) * ld_b + k) * 2);
    Mapping md(size_t((n - 1) * ld_d + m) * 2), maux(size_t((n - 1) * ld_aux + m) * 2);
    ASSERT_TRUE(ma.data && mb.data && md.data && maux.data) << "mmap of a few GiB of address space failed";
    uint16_t* pa = static_cast<uint16_t*>(ma.data);
    uint16_t* pb = static_cast<uint16_t*>(mb.data);
    uint16_t* pd = static_cast<uint16_t*>(md.data);
    uint16_t* paux = static_cast<uint16_t*>(maux.data);
    for (int64_t i = 0; i < m; ++i) pa[transa == N ? i : i * a_ld] = bf16_bits(a[i]);
    for (int64_t j = 0; j < n; ++j) pb[j * ld_b] = bf16_bits(b[j]);
    // Sentinels where a wrapped 32-bit offset of D's last column would land.
    const int64_t wrapped = int64_t(uint32_t((n - 1) * ld_d));
    pd[wrapped] = bf16_bits(-7.0f);
    uint16_t bias_bits[m] = {bf16_bits(bias_values[0]), bf16_bits(bias_values[1])};
    const epigemm_matrix_t A{ma.data, EPIGEMM_DTYPE_BF16, transa == N ? m : k, transa == N ? k : m, a_ld, EPIGEMM_MEMORY_HOST};
    const epigemm_matrix_t B{mb.data, EPIGEMM_DTYPE_BF16, k, n, ld_b, EPIGEMM_MEMORY_HOST};
    const epigemm_matrix_t D{md.data, EPIGEMM_DTYPE_BF16, m, n, ld_d, EPIGEMM_MEMORY_HOST};
    const epigemm_matrix_t AUX{maux.data, EPIGEMM_DTYPE_BF16, m, n, ld_aux, EPIGEMM_MEMORY_HOST};
    const epigemm_vector_t BIAS{bias_bits, EPIGEMM_DTYPE_BF16, m, EPIGEMM_MEMORY_HOST};
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_t desc = nullptr;
    ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_transpose(desc, transa, N);
    epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_GELU_AUX_BIAS);
    epigemm_gemm_desc_set_bias(desc, &BIAS);
    epigemm_gemm_desc_set_aux(desc, &AUX);
    for (const Target& target : usable_targets(ctx)) {
      if (target.memory != EPIGEMM_MEMORY_HOST) continue;  // these mappings are host memory
      epigemm_gemm_desc_set_backend(desc, target.backend);
      size_t bytes = 0;
      epigemm_status_t status = epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &bytes);
      if (status == EPIGEMM_STATUS_NOT_SUPPORTED && target.backend != EPIGEMM_BACKEND_REFERENCE) continue;
      ASSERT_EQ(status, EPIGEMM_STATUS_SUCCESS) << target_name(target) << ": " << epigemm_context_last_error(ctx);
      std::vector<unsigned char> workspace(bytes);
      status = epigemm_gemm(ctx, desc, &A, &B, &D, workspace.data(), bytes, nullptr);
      ASSERT_EQ(status, EPIGEMM_STATUS_SUCCESS) << target_name(target) << ": " << epigemm_context_last_error(ctx);
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          const double z = double(a[i]) * b[j] + bias_values[i];  // exact in bf16
          EXPECT_EQ(bf16_value(paux[i + j * ld_aux]), float(z)) << target_name(target) << " aux(" << i << "," << j << ")";
          EXPECT_NEAR(bf16_value(pd[i + j * ld_d]), gelu(z), 1e-2 * std::fabs(gelu(z)) + 1e-3)
              << target_name(target) << " D(" << i << "," << j << ")";
        }
      }
      EXPECT_EQ(bf16_value(pd[wrapped]), -7.0f) << "written at a wrapped 32-bit offset";
    }
    epigemm_gemm_desc_destroy(desc);
    epigemm_context_destroy(ctx);
  }
}

// D = A B with gemm_n = 2^31 + 17: B (1 x gemm_n) and D (1 x gemm_n) have more than 2^31 elements
// each. On the reference backend this takes about 25 s of CPU time (2^31 elements one by one),
// so it runs only with EPIGEMM_TEST_LARGE=1; OffsetsBeyondTwoToTheThirtyTwoElements covers the
// 64-bit index arithmetic in every `make test`. bf16 keeps it at 4 GiB per operand; B is mostly
// never-written (zero) pages, so only D costs memory.
TEST(SixtyFourBit, MoreThanTwoToTheThirtyOneElements) {
  const char* large = std::getenv("EPIGEMM_TEST_LARGE");
  if (large == nullptr || std::string(large) != "1") {
    GTEST_SKIP() << "a 2^31 + 17 element GEMM takes ~25 s of CPU on the reference backend; "
                    "set EPIGEMM_TEST_LARGE=1 to run it";
  }
  const int64_t n = (int64_t(1) << 31) + 17;
  const size_t bytes = size_t(n) * 2;
  if (available_memory() < int64_t(bytes) + (int64_t(2) << 30)) {
    GTEST_SKIP() << "needs about " << (bytes >> 20) + 2048 << " MiB of available memory, have "
                 << (available_memory() >> 20) << " MiB";
  }
  Mapping b(bytes), d(bytes);
  ASSERT_NE(b.data, nullptr);
  ASSERT_NE(d.data, nullptr);
  uint16_t* bb = static_cast<uint16_t*>(b.data);
  uint16_t* dd = static_cast<uint16_t*>(d.data);
  // Marked columns around 2^31, where a 32-bit index would wrap to a negative or small value.
  const int64_t marked[] = {0, 5, (int64_t(1) << 31) - 1, int64_t(1) << 31, (int64_t(1) << 31) + 1, n - 1};
  for (size_t i = 0; i < sizeof(marked) / sizeof(marked[0]); ++i) bb[marked[i]] = bf16_bits(float(i + 1));
  uint16_t a_value = bf16_bits(1.5f);
  const epigemm_matrix_t A{&a_value, EPIGEMM_DTYPE_BF16, 1, 1, 1, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B{b.data, EPIGEMM_DTYPE_BF16, 1, n, 1, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t D{d.data, EPIGEMM_DTYPE_BF16, 1, n, 1, EPIGEMM_MEMORY_HOST};
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_REFERENCE);
  // A sentinel in D past 2^31 shows the element is written, not left as the zero page.
  dd[(int64_t(1) << 31) + 3] = bf16_bits(-7.0f);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(epigemm_gemm(ctx, desc, &A, &B, &D, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gemm_n = %lld (bf16, reference backend): %.1f s\n", static_cast<long long>(n), seconds);
  for (size_t i = 0; i < sizeof(marked) / sizeof(marked[0]); ++i) {
    EXPECT_EQ(bf16_value(dd[marked[i]]), 1.5f * float(i + 1)) << "D[" << marked[i] << "]";
  }
  EXPECT_EQ(bf16_value(dd[(int64_t(1) << 31) + 3]), 0.0f);
  EXPECT_EQ(bf16_value(dd[n - 2]), 0.0f);
  epigemm_gemm_desc_destroy(desc);
  epigemm_context_destroy(ctx);
}

// Validation alone accepts sizes beyond 2^31 (nothing is computed: gemm_m = 0).
TEST(SixtyFourBit, ValidationAcceptsLargeSizesWithEmptyProduct) {
  const int64_t big = (int64_t(1) << 33) + 5;
  float b_dummy = 0.0f;
  const epigemm_matrix_t A{nullptr, EPIGEMM_DTYPE_F32, 0, 1, 1, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B{&b_dummy, EPIGEMM_DTYPE_F32, 1, 1, 1, EPIGEMM_MEMORY_HOST};
  // D is 0 x 1 with an ld far beyond 2^31: valid, nothing to write.
  const epigemm_matrix_t D{nullptr, EPIGEMM_DTYPE_F32, 0, 1, big, EPIGEMM_MEMORY_HOST};
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  size_t bytes = 1;
  EXPECT_EQ(epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &bytes), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  std::vector<unsigned char> workspace(bytes + 1);
  EXPECT_EQ(epigemm_gemm(ctx, desc, &A, &B, &D, workspace.data(), bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  // The linear workspace query takes 64-bit layer sizes too.
  EXPECT_EQ(epigemm_linear_workspace_size(ctx, big, 4096, 4096, EPIGEMM_DTYPE_BF16, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  epigemm_gemm_desc_destroy(desc);
  epigemm_context_destroy(ctx);
}

// ---- huge dimensions beside an empty one --------------------------------------------------------
// A call with nothing to write returns at once, whatever its other dimensions: nothing is
// allocated for them and no loop runs over them. gemm_m = gemm_n = 0 with gemm_k = 2^40 once
// allocated 8 gemm_k bytes on the reference backend (OUT_OF_MEMORY; INTERNAL_ERROR at 2^62), and
// an fprop with tokens = 2^62 and in = out = 0 never returned (reference; cpu with bf16, one
// empty pass per 512 tokens).

constexpr int64_t kHuge = int64_t(1) << 62;

// Runs `calls` on a thread of its own; when they have not returned within `seconds`, prints what
// hung and ends the test binary with a failure (a call that never returns cannot be failed or
// stopped any other way).
void within_seconds(double seconds, const std::string& what, const std::function<void()>& calls) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread worker([&] {
    calls();
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    finished.notify_one();
  });
  std::unique_lock<std::mutex> lock(mutex);
  if (!finished.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; })) {
    std::fprintf(stderr, "FAILED: %s did not return within %.0f s\n", what.c_str(), seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  lock.unlock();
  worker.join();
}

const epigemm_backend_t kHostBackends[] = {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU,
                                           EPIGEMM_BACKEND_AUTO};

// SUCCESS; or NOT_SUPPORTED from the cpu backend asked by name, which may decline sizes its GEMM
// engine cannot take (OpenBLAS takes 32-bit ones): a prompt answer either way.
bool succeeded_or_declined(epigemm_status_t status, epigemm_backend_t backend) {
  return status == EPIGEMM_STATUS_SUCCESS ||
         (status == EPIGEMM_STATUS_NOT_SUPPORTED && backend == EPIGEMM_BACKEND_CPU);
}

TEST(HugeBesideEmpty, GemmCallsWithNothingToWriteReturnAtOnce) {
  struct Sizes {
    int64_t m, n, k;
  };
  const Sizes sizes[] = {{0, 0, kHuge}, {0, kHuge, 0}, {kHuge, 0, 0}};
  within_seconds(120, "a GEMM call with an empty D and a dimension of 2^62", [&] {
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    for (const epigemm_backend_t backend : kHostBackends) {
      if (!epigemm_backend_usable(ctx, backend)) continue;
      for (const Sizes& s : sizes) {
        for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
          for (const epigemm_epilogue_t e : kAllEpilogues) {
            // A bias or bias gradient of 2^62 elements would not be empty: not this test.
            const int64_t bias_grad_length = e == EPIGEMM_EPILOGUE_BGRADB ? s.n : s.m;
            if ((reads_bias(e) && s.m > 0) || (writes_bias_grad(e) && bias_grad_length > 0)) continue;
            for (const epigemm_op_t trans : {N, T}) {
              SCOPED_TRACE(std::string(epigemm_backend_name(backend)) + " " + epigemm_epilogue_name(e) +
                           " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                           " k=" + std::to_string(s.k) + (trans == T ? " TT " : " NN ") +
                           epigemm_dtype_name(dtype));
              auto stored = [&](int64_t rows, int64_t cols) {
                return epigemm_matrix_t{nullptr, dtype, rows, cols, rows < 1 ? 1 : rows, EPIGEMM_MEMORY_HOST};
              };
              const epigemm_matrix_t A = trans == N ? stored(s.m, s.k) : stored(s.k, s.m);
              const epigemm_matrix_t B = trans == N ? stored(s.k, s.n) : stored(s.n, s.k);
              const epigemm_matrix_t D = stored(s.m, s.n), AUX = stored(s.m, s.n);
              const epigemm_vector_t V{nullptr, EPIGEMM_DTYPE_F32, 0, EPIGEMM_MEMORY_HOST};
              epigemm_gemm_desc_t desc = nullptr;
              ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
              epigemm_gemm_desc_set_transpose(desc, trans, trans);
              epigemm_gemm_desc_set_epilogue(desc, e);
              epigemm_gemm_desc_set_bias(desc, reads_bias(e) ? &V : nullptr);
              epigemm_gemm_desc_set_aux(desc, writes_aux(e) || reads_aux(e) ? &AUX : nullptr);
              epigemm_gemm_desc_set_bias_grad(desc, writes_bias_grad(e) ? &V : nullptr);
              epigemm_gemm_desc_set_backend(desc, backend);
              size_t bytes = 0;
              const epigemm_status_t sized = epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &bytes);
              EXPECT_TRUE(succeeded_or_declined(sized, backend)) << epigemm_context_last_error(ctx);
              EXPECT_EQ(bytes, 0u) << "workspace for a call with nothing to compute";
              const epigemm_status_t status = epigemm_gemm(ctx, desc, &A, &B, &D, nullptr, 0, nullptr);
              EXPECT_TRUE(succeeded_or_declined(status, backend)) << epigemm_context_last_error(ctx);
              epigemm_gemm_desc_destroy(desc);
            }
          }
        }
      }
    }
    epigemm_context_destroy(ctx);
  });
}

// The layer calls of the report: tokens = 2^62 with in_features = out_features = 0 (fprop and
// dgrad: gemm_n = 2^62 beside gemm_m = gemm_k = 0; wgrad: gemm_k = 2^62 beside an empty dW).
TEST(HugeBesideEmpty, LayerCallsWithNoFeaturesAndHugeTokensReturnAtOnce) {
  within_seconds(120, "a layer call with tokens = 2^62 and no features", [&] {
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    for (const epigemm_backend_t backend : kHostBackends) {
      if (!epigemm_backend_usable(ctx, backend)) continue;
      ASSERT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
      for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
        for (const bool gelu_and_bias : {false, true}) {
          SCOPED_TRACE(std::string(epigemm_backend_name(backend)) + " " + epigemm_dtype_name(dtype) +
                       (gelu_and_bias ? " with GELU and bias" : ""));
          const epigemm_tensor_t tokens_by_none{nullptr, dtype, kHuge, 0, 1, EPIGEMM_MEMORY_HOST};
          const epigemm_tensor_t none_by_none{nullptr, dtype, 0, 0, 1, EPIGEMM_MEMORY_HOST};
          const epigemm_vector_t none{nullptr, EPIGEMM_DTYPE_F32, 0, EPIGEMM_MEMORY_HOST};
          const epigemm_vector_t* vector = gelu_and_bias ? &none : nullptr;
          const epigemm_tensor_t* pre_gelu = gelu_and_bias ? &tokens_by_none : nullptr;
          size_t bytes = 0;
          EXPECT_TRUE(succeeded_or_declined(
              epigemm_linear_workspace_size(ctx, kHuge, 0, 0, dtype, EPIGEMM_MEMORY_HOST, &bytes), backend))
              << epigemm_context_last_error(ctx);
          EXPECT_EQ(bytes, 0u);
          EXPECT_TRUE(succeeded_or_declined(
              epigemm_linear_fprop(ctx, &tokens_by_none, &none_by_none, vector, pre_gelu,
                                   &tokens_by_none, nullptr, 0, nullptr), backend))
              << "fprop: " << epigemm_context_last_error(ctx);
          EXPECT_TRUE(succeeded_or_declined(
              epigemm_linear_dgrad(ctx, &tokens_by_none, &none_by_none, pre_gelu, vector,
                                   &tokens_by_none, nullptr, 0, nullptr), backend))
              << "dgrad: " << epigemm_context_last_error(ctx);
          EXPECT_TRUE(succeeded_or_declined(
              epigemm_linear_wgrad(ctx, &tokens_by_none, &tokens_by_none, &none_by_none, 0, vector,
                                   nullptr, 0, nullptr), backend))
              << "wgrad: " << epigemm_context_last_error(ctx);
        }
      }
    }
    epigemm_context_destroy(ctx);
  });
}

// ---- a host allocation that fails ---------------------------------------------------------------
// The reference backend widens op(A) into gemm_m x gemm_k doubles of scratch. When the host cannot
// provide them the call fails with OUT_OF_MEMORY and writes nothing: BGRADB once wrote its bias
// gradient first and allocated afterwards. Here the scratch would be 2^26 x 2^21 doubles (1 PiB,
// more than any address space), so the allocation fails everywhere; A and D are addresses that
// are never dereferenced (the call fails before it reads A or writes D), B and the bias gradient
// are real.
TEST(OutOfMemory, ReferenceBackendWritesNothingWhenItsScratchCannotBeAllocated) {
  const int64_t m = int64_t(1) << 26, k = int64_t(1) << 21, n = 1;
  std::vector<float> b(size_t(k), 0.5f);
  float bias_grad[1] = {kSentinel};
  // Far beyond the user address space: disjoint from every real buffer, never dereferenced.
  void* const a_address = reinterpret_cast<void*>(uintptr_t(1) << 52);
  void* const d_address = reinterpret_cast<void*>(uintptr_t(1) << 53);
  const epigemm_matrix_t A{a_address, EPIGEMM_DTYPE_F32, m, k, m, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B{b.data(), EPIGEMM_DTYPE_F32, k, n, k, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t D{d_address, EPIGEMM_DTYPE_F32, m, n, m, EPIGEMM_MEMORY_HOST};
  const epigemm_vector_t BG{bias_grad, EPIGEMM_DTYPE_F32, n, EPIGEMM_MEMORY_HOST};
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  for (const epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_EPILOGUE_DEFAULT}) {
    SCOPED_TRACE(epigemm_epilogue_name(e));
    epigemm_gemm_desc_t desc = nullptr;
    ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_epilogue(desc, e);
    epigemm_gemm_desc_set_bias_grad(desc, e == EPIGEMM_EPILOGUE_BGRADB ? &BG : nullptr);
    epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_REFERENCE);
    EXPECT_EQ(epigemm_gemm(ctx, desc, &A, &B, &D, nullptr, 0, nullptr), EPIGEMM_STATUS_OUT_OF_MEMORY)
        << epigemm_context_last_error(ctx);
    const std::string message = epigemm_context_last_error(ctx);
    EXPECT_NE(message.find("bytes"), std::string::npos) << message;
    EXPECT_EQ(bias_grad[0], kSentinel) << "bias_grad was written by a call that failed";
    epigemm_gemm_desc_destroy(desc);
  }
  epigemm_context_destroy(ctx);
}

// ---- threads -----------------------------------------------------------------------------------
// docs/conventions.md §7: a context per thread; a description may be read by several threads at
// once. Four threads, each with its own context and outputs, share the inputs and two const
// descriptions (whose extra operands, bias and aux, are inputs), interleave description calls,
// classic calls, layer calls and failing calls, and must reproduce the single-threaded results
// bit for bit, each seeing only its own last error.

constexpr int64_t kTm = 37, kTn = 29, kTk = 23;  // GEMM level
constexpr int kThreads = 4, kRounds = 12;

struct SharedInputs {
  std::vector<float> a = std::vector<float>(kTk * kTm);   // A: k x m (transa = T)
  std::vector<float> b = std::vector<float>(kTn * kTk);   // B: n x k (transb = T)
  std::vector<float> bias = std::vector<float>(kTm);
  std::vector<float> aux = std::vector<float>(kTm * kTn);
  epigemm_gemm_desc_t bias_desc = nullptr;   // BIAS, transa = T, transb = T
  epigemm_gemm_desc_t dgelu_desc = nullptr;  // DGELU, transa = T, transb = T, beta = 0.5
  epigemm_matrix_t A{}, B{};

  SharedInputs() {
    uint32_t state = 12345;
    auto next = [&state]() {
      state = state * 1664525u + 1013904223u;
      return float(int32_t(state >> 8) % 2001 - 1000) / 500.0f;
    };
    for (float& v : a) v = next();
    for (float& v : b) v = next();
    for (float& v : bias) v = next();
    for (float& v : aux) v = next();
    A = epigemm_matrix_t{a.data(), EPIGEMM_DTYPE_F32, kTk, kTm, kTk, EPIGEMM_MEMORY_HOST};
    B = epigemm_matrix_t{b.data(), EPIGEMM_DTYPE_F32, kTn, kTk, kTn, EPIGEMM_MEMORY_HOST};
    const epigemm_vector_t BIAS{bias.data(), EPIGEMM_DTYPE_F32, kTm, EPIGEMM_MEMORY_HOST};
    const epigemm_matrix_t AUX{aux.data(), EPIGEMM_DTYPE_F32, kTm, kTn, kTm, EPIGEMM_MEMORY_HOST};
    EXPECT_EQ(epigemm_gemm_desc_create(&bias_desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_transpose(bias_desc, T, T);
    epigemm_gemm_desc_set_epilogue(bias_desc, EPIGEMM_EPILOGUE_BIAS);
    epigemm_gemm_desc_set_bias(bias_desc, &BIAS);
    EXPECT_EQ(epigemm_gemm_desc_create(&dgelu_desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_transpose(dgelu_desc, T, T);
    epigemm_gemm_desc_set_scalars(dgelu_desc, 1.0f, 0.5f);
    epigemm_gemm_desc_set_epilogue(dgelu_desc, EPIGEMM_EPILOGUE_DGELU);
    epigemm_gemm_desc_set_aux(dgelu_desc, &AUX);
  }
  ~SharedInputs() {
    epigemm_gemm_desc_destroy(bias_desc);
    epigemm_gemm_desc_destroy(dgelu_desc);
  }
};

// The outputs of one round of calls.
struct RoundOutputs {
  std::vector<float> d_bias = std::vector<float>(kTm * kTn);
  std::vector<float> d_dgelu = std::vector<float>(kTm * kTn);
  std::vector<float> d_classic = std::vector<float>(kTm * kTn);
  std::vector<float> pre_classic = std::vector<float>(kTm * kTn);
  std::vector<float> y = std::vector<float>(kTn * kTm);     // fprop: Y [tokens = n, out = m]
  std::vector<float> pre = std::vector<float>(kTn * kTm);
  std::vector<float> dw = std::vector<float>(kTm * kTk);    // wgrad: dW [out = m, in = k]
  std::vector<float> dw_bias_grad = std::vector<float>(kTm);
  bool operator==(const RoundOutputs& o) const {
    auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    };
    return same(d_bias, o.d_bias) && same(d_dgelu, o.d_dgelu) && same(d_classic, o.d_classic) &&
           same(pre_classic, o.pre_classic) && same(y, o.y) && same(pre, o.pre) && same(dw, o.dw) &&
           same(dw_bias_grad, o.dw_bias_grad);
  }
};

// One round on one context. Returns "" or what went wrong. `tag` makes this thread's failing
// call carry a number only it uses, so a message read from another thread's context would show.
std::string run_round(epigemm_context_t ctx, const SharedInputs& in, RoundOutputs* out, int tag) {
  const epigemm_memory_t H = EPIGEMM_MEMORY_HOST;
  const epigemm_dtype_t F = EPIGEMM_DTYPE_F32;
  // This thread's workspace: the most any call below needs (the classic call has the shapes of
  // the fprop, which the linear query covers).
  size_t ws_bytes = 0, bytes = 0;
  epigemm_matrix_t D0{out->d_bias.data(), F, kTm, kTn, kTm, H};
  for (epigemm_gemm_desc_t desc : {in.bias_desc, in.dgelu_desc}) {
    if (epigemm_gemm_workspace_size(ctx, desc, &in.A, &in.B, &D0, &bytes) != EPIGEMM_STATUS_SUCCESS) {
      return std::string("workspace query: ") + epigemm_context_last_error(ctx);
    }
    ws_bytes = std::max(ws_bytes, bytes);
  }
  if (epigemm_linear_workspace_size(ctx, kTn, kTk, kTm, F, H, &bytes) != EPIGEMM_STATUS_SUCCESS) {
    return std::string("linear workspace query: ") + epigemm_context_last_error(ctx);
  }
  ws_bytes = std::max(ws_bytes, bytes);
  std::vector<unsigned char> workspace(ws_bytes + 1);
  void* ws = workspace.data();
  auto fail = [&](const char* what) { return std::string(what) + ": " + epigemm_context_last_error(ctx); };
  epigemm_matrix_t D{out->d_bias.data(), F, kTm, kTn, kTm, H};
  if (epigemm_gemm(ctx, in.bias_desc, &in.A, &in.B, &D, ws, ws_bytes, nullptr) != EPIGEMM_STATUS_SUCCESS) {
    return fail("BIAS through the shared description");
  }
  // A failing call with this thread's own number in it.
  const int64_t wrong_rows = 1000 + tag;
  const epigemm_matrix_t bad_d{out->d_dgelu.data(), F, wrong_rows, kTn, wrong_rows, H};
  if (epigemm_gemm(ctx, in.dgelu_desc, &in.A, &in.B, &bad_d, ws, ws_bytes, nullptr) != EPIGEMM_STATUS_INVALID_VALUE) {
    return "a D of " + std::to_string(wrong_rows) + " rows was not refused";
  }
  const std::string message = epigemm_context_last_error(ctx);
  if (message.find(std::to_string(wrong_rows)) == std::string::npos) {
    return "this context's last error is not this thread's: \"" + message + "\"";
  }
  // D_old for beta = 0.5: a fixed pattern, so the result is reproducible.
  for (size_t i = 0; i < out->d_dgelu.size(); ++i) out->d_dgelu[i] = float(i % 7) - 3.0f;
  D.data = out->d_dgelu.data();
  if (epigemm_gemm(ctx, in.dgelu_desc, &in.A, &in.B, &D, ws, ws_bytes, nullptr) != EPIGEMM_STATUS_SUCCESS) {
    return fail("DGELU through the shared description");
  }
  // Classic call, GELU_AUX_BIAS (bias in, pre_gelu_out written).
  const epigemm_vector_t bias{const_cast<float*>(in.bias.data()), F, kTm, H};
  epigemm_matrix_t Dc{out->d_classic.data(), F, kTm, kTn, kTm, H};
  epigemm_matrix_t P{out->pre_classic.data(), F, kTm, kTn, kTm, H};
  if (epigemm_classic_gemm(ctx, &in.A, &in.B, &Dc, &bias, &P, T, T, 0, ws, ws_bytes, 0, nullptr) !=
      EPIGEMM_STATUS_SUCCESS) {
    return fail("classic GELU_AUX_BIAS");
  }
  // Layer calls: X [tokens = n, in = k] is B's storage, W [out = m, in = k] is A's.
  const epigemm_tensor_t X{const_cast<float*>(in.b.data()), F, kTn, kTk, kTk, H};
  const epigemm_tensor_t W{const_cast<float*>(in.a.data()), F, kTm, kTk, kTk, H};
  const epigemm_tensor_t Y{out->y.data(), F, kTn, kTm, kTm, H};
  const epigemm_tensor_t PRE{out->pre.data(), F, kTn, kTm, kTm, H};
  if (epigemm_linear_fprop(ctx, &X, &W, &bias, &PRE, &Y, ws, ws_bytes, nullptr) != EPIGEMM_STATUS_SUCCESS) {
    return fail("fprop");
  }
  const epigemm_tensor_t dY{out->y.data(), F, kTn, kTm, kTm, H};  // the forward output as dY
  const epigemm_tensor_t dW{out->dw.data(), F, kTm, kTk, kTk, H};
  const epigemm_vector_t bg{out->dw_bias_grad.data(), F, kTm, H};
  if (epigemm_linear_wgrad(ctx, &X, &dY, &dW, 0, &bg, ws, ws_bytes, nullptr) != EPIGEMM_STATUS_SUCCESS) {
    return fail("wgrad");
  }
  if (std::string(epigemm_context_last_error(ctx)) != "") return "last error not cleared";
  return "";
}

TEST(Threads, ContextPerThreadSharedDescriptionMatchesSingleThreaded) {
  const SharedInputs inputs;
  RoundOutputs expected;
  {
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    ASSERT_EQ(run_round(ctx, inputs, &expected, 0), "");
    RoundOutputs again;
    ASSERT_EQ(run_round(ctx, inputs, &again, 0), "");
    ASSERT_TRUE(again == expected) << "not deterministic on one thread";
    epigemm_context_destroy(ctx);
  }
  std::vector<std::string> errors(kThreads);
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      epigemm_context_t ctx = nullptr;
      if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) {
        errors[t] = "context creation failed";
        return;
      }
      for (int round = 0; round < kRounds && errors[t].empty(); ++round) {
        RoundOutputs got;
        errors[t] = run_round(ctx, inputs, &got, t + 1);
        if (errors[t].empty() && !(got == expected)) ++mismatches[t];
      }
      epigemm_context_destroy(ctx);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t << ": rounds whose results differ from one thread's";
  }
}

}  // namespace
