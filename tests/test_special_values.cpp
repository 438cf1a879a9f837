// NaN and infinities through every activation on every backend (docs/conventions.md,
// "Activations"): NaN in gives NaN out, for act and act'; +-Inf give the limits. Through the
// public C API only, like the matrix; host backends on host memory, GPU backends on device memory
// when the tests are built with CUDA and a GPU is present (SKIP otherwise), auto on both.
//
// The call: D (8 x 8) = act(A B + bias) with A 8 x 16, B 16 x 8 finite but for row 0 of A (NaN:
// acc[0, :] is NaN), and bias[1] = +Inf, bias[2] = -Inf (z = +-Inf in rows 1 and 2); rows 3-7 are
// ordinary rows. Backward: D = acc * act'(aux) with aux[0, :] = NaN, aux[1, :] = +Inf,
// aux[2, :] = -Inf and ordinary values in rows 3-7. (8 rows: an aux leading dimension cuBLASLt
// takes.)
//
// The one documented exception (docs/conventions.md, "Activations"): the cublaslt backend's
// gelu_tanh, cuBLASLt's own fused GELU, gives NaN for z = -Inf instead of the limit -0 (and is not
// the formula for negative pre-activations: GeluTanhOfNegativePreActivationsIsTheFormula).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "epigemm/epigemm.h"
#include "harness/harness.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

constexpr int64_t kM = 8, kN = 8, kK = 16;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A column-major m x n matrix (or vector) of f32 or bf16, on the host and mirrored on the device.
class Operand {
 public:
  Operand(epigemm_dtype_t dtype, epigemm_memory_t memory, int64_t rows, int64_t cols)
      : dtype_(dtype), memory_(memory), rows_(rows), cols_(cols),
        bytes_(size_t(rows * cols) * (dtype == EPIGEMM_DTYPE_F32 ? 4 : 2)), host_(bytes_, 0) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (memory == EPIGEMM_MEMORY_DEVICE) {
      EXPECT_EQ(cudaMalloc(&device_, bytes_), cudaSuccess);
    }
#endif
  }
  ~Operand() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_ != nullptr) cudaFree(device_);
#endif
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  void set(int64_t r, int64_t c, float v) {
    const size_t i = size_t(r + c * rows_);
    if (dtype_ == EPIGEMM_DTYPE_F32) {
      std::memcpy(host_.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = to_bf16(v);
      std::memcpy(host_.data() + 2 * i, &h, 2);
    }
  }
  float get(int64_t r, int64_t c) const {
    const size_t i = size_t(r + c * rows_);
    if (dtype_ == EPIGEMM_DTYPE_F32) {
      float v;
      std::memcpy(&v, host_.data() + 4 * i, 4);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, host_.data() + 2 * i, 2);
    return from_bf16(h);
  }
  void upload() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_ != nullptr) {
      EXPECT_TRUE(epigemm_test::copy_to_device_and_wait(device_, host_.data(), bytes_));
    }
#endif
  }
  void download() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (device_ != nullptr) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(host_.data(), device_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    }
#endif
  }
  void* data() { return device_ != nullptr ? device_ : static_cast<void*>(host_.data()); }
  epigemm_matrix_t matrix() { return {data(), dtype_, rows_, cols_, rows_, memory_}; }
  epigemm_vector_t vector() { return {data(), dtype_, rows_, memory_}; }

 private:
  epigemm_dtype_t dtype_;
  epigemm_memory_t memory_;
  int64_t rows_, cols_;
  size_t bytes_;
  std::vector<unsigned char> host_;
  void* device_ = nullptr;
};

struct Target {
  epigemm_backend_t backend;
  epigemm_memory_t memory;
  std::string name() const {
    return std::string(epigemm_backend_name(backend)) +
           (memory == EPIGEMM_MEMORY_DEVICE ? "_device" : "_host");
  }
};

std::vector<Target> targets() {
  return {{EPIGEMM_BACKEND_REFERENCE, EPIGEMM_MEMORY_HOST}, {EPIGEMM_BACKEND_CPU, EPIGEMM_MEMORY_HOST},
          {EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST},      {EPIGEMM_BACKEND_CUDA, EPIGEMM_MEMORY_DEVICE},
          {EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_MEMORY_DEVICE}, {EPIGEMM_BACKEND_CUTLASS, EPIGEMM_MEMORY_DEVICE},
          {EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_DEVICE}};
}

// "" when the target can run here, else why not.
std::string unusable(epigemm_context_t ctx, const Target& t) {
  if (t.memory == EPIGEMM_MEMORY_DEVICE) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      return "SKIP: no CUDA device on this machine";
    }
#else
    return "SKIP: the tests were built without CUDA";
#endif
  }
  if (t.backend != EPIGEMM_BACKEND_AUTO && !epigemm_backend_usable(ctx, t.backend)) {
    return std::string("SKIP: backend ") + epigemm_backend_name(t.backend) + " is not usable here";
  }
  return "";
}

// The limits of docs/conventions.md: act(+Inf) = +Inf; act(-Inf) = -Inf for the identity, else 0;
// act'(+Inf) = 1; act'(-Inf) = 1 for the identity, else 0.
float act_at_minus_inf(epigemm_activation_t a) { return a == EPIGEMM_ACTIVATION_IDENTITY ? -kInf : 0.0f; }
// What a target computes there: the limit, but NaN for cuBLASLt's GELU (the exception above).
float act_at_minus_inf(epigemm_activation_t a, epigemm_backend_t ran) {
  if (ran == EPIGEMM_BACKEND_CUBLASLT && a == EPIGEMM_ACTIVATION_GELU_TANH) return kNaN;
  return act_at_minus_inf(a);
}
bool same_value(float got, float want) { return std::isnan(want) ? std::isnan(got) : got == want; }
float grad_at_minus_inf(epigemm_activation_t a) { return a == EPIGEMM_ACTIVATION_IDENTITY ? 1.0f : 0.0f; }
// acc * act'(x) for x = +-Inf as a target computes it: the limit, but NaN for cuBLASLt's GELU
// derivative (the exception above).
float dact_at_inf(double acc, epigemm_activation_t a, bool negative, epigemm_backend_t ran) {
  if (ran == EPIGEMM_BACKEND_CUBLASLT && a == EPIGEMM_ACTIVATION_GELU_TANH) return kNaN;
  return float(acc * (negative ? grad_at_minus_inf(a) : 1.0));
}

class SpecialValues : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override { ASSERT_EQ(epigemm_context_create(&ctx_), EPIGEMM_STATUS_SUCCESS); }
  void TearDown() override { epigemm_context_destroy(ctx_); }

  // Runs the description on the target; false (and the reason printed) when a backend asked by
  // name declines it, which the dispatcher then routes elsewhere (checked under auto).
  bool run(epigemm_gemm_desc_t desc, Operand& a, Operand& b, Operand& d) {
    epigemm_matrix_t A = a.matrix(), B = b.matrix(), D = d.matrix();
    size_t bytes = 0;
    epigemm_status_t status = epigemm_gemm_workspace_size(ctx_, desc, &A, &B, &D, &bytes);
    if (status == EPIGEMM_STATUS_SUCCESS) {
      Operand workspace(EPIGEMM_DTYPE_F32, GetParam().memory, int64_t(bytes / 4 + 1), 1);
      status = epigemm_gemm(ctx_, desc, &A, &B, &D, workspace.data(), bytes, nullptr);
#ifdef EPIGEMM_TESTS_WITH_CUDA
      if (GetParam().memory == EPIGEMM_MEMORY_DEVICE) {
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
#endif
    }
    if (status == EPIGEMM_STATUS_NOT_SUPPORTED && GetParam().backend != EPIGEMM_BACKEND_AUTO) {
      std::printf("  %s declined: %s\n", GetParam().name().c_str(), epigemm_context_last_error(ctx_));
      return false;
    }
    EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx_);
    return status == EPIGEMM_STATUS_SUCCESS;
  }

  // The side operands of an epilogue (nullptr: not given).
  struct Sides {
    Operand* bias = nullptr;
    Operand* aux = nullptr;
    Operand* bias_grad = nullptr;
  };

  // Runs epilogue e with activation a and the side operands on the target (as run()).
  bool run_epilogue(epigemm_epilogue_t e, epigemm_activation_t a, const Sides& sides, Operand& A, Operand& B,
                    Operand& D, epigemm_op_t transa = EPIGEMM_OP_N) {
    epigemm_gemm_desc_t desc = nullptr;
    EXPECT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
    if (desc == nullptr) return false;
    epigemm_gemm_desc_set_transpose(desc, transa, EPIGEMM_OP_N);
    epigemm_gemm_desc_set_epilogue(desc, e);
    epigemm_gemm_desc_set_activation(desc, a);
    epigemm_vector_t bias, bias_grad;
    epigemm_matrix_t aux;
    if (sides.bias != nullptr) {
      bias = sides.bias->vector();
      epigemm_gemm_desc_set_bias(desc, &bias);
    }
    if (sides.aux != nullptr) {
      aux = sides.aux->matrix();
      epigemm_gemm_desc_set_aux(desc, &aux);
    }
    if (sides.bias_grad != nullptr) {
      bias_grad = sides.bias_grad->vector();
      epigemm_gemm_desc_set_bias_grad(desc, &bias_grad);
    }
    epigemm_gemm_desc_set_backend(desc, GetParam().backend);
    const bool ok = run(desc, A, B, D);
    epigemm_gemm_desc_destroy(desc);
    return ok;
  }

  epigemm_context_t ctx_ = nullptr;
};

// Forward: ACT_BIAS and ACT_AUX_BIAS with every activation, f32 and bf16.
TEST_P(SpecialValues, ForwardNaNAndInfinitiesGiveNaNAndTheLimits) {
  const Target target = GetParam();
  const std::string why = unusable(ctx_, target);
  if (!why.empty()) GTEST_SKIP() << why;
  int ran = 0;
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
    for (int act = 0; act <= int(EPIGEMM_ACTIVATION_SILU); ++act) {
      for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX_BIAS}) {
        const epigemm_activation_t a = epigemm_activation_t(act);
        SCOPED_TRACE(std::string(epigemm_dtype_name(dtype)) + " " + epigemm_epilogue_name(e) + " " +
                     epigemm_activation_name(a));
        Operand A(dtype, target.memory, kM, kK), B(dtype, target.memory, kK, kN);
        Operand D(dtype, target.memory, kM, kN), aux(dtype, target.memory, kM, kN);
        Operand bias(dtype, target.memory, kM, 1);
        for (int64_t p = 0; p < kK; ++p) {
          for (int64_t i = 0; i < kM; ++i) A.set(i, p, i == 0 ? kNaN : 0.125f * float((i + p) % 5) - 0.25f);
          for (int64_t j = 0; j < kN; ++j) B.set(p, j, 0.25f * float((p * 3 + j) % 7) - 0.75f);
        }
        const float biases[kM] = {0.5f, kInf, -kInf, 0.25f, -0.5f, 1.0f, -1.0f, 0.0f};
        for (int64_t i = 0; i < kM; ++i) bias.set(i, 0, biases[i]);
        for (Operand* o : {&A, &B, &bias}) o->upload();
        Sides sides;
        sides.bias = &bias;
        if (e == EPIGEMM_EPILOGUE_ACT_AUX_BIAS) sides.aux = &aux;
        if (!run_epilogue(e, a, sides, A, B, D)) continue;
        ++ran;
        epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
        epigemm_context_last_backend(ctx_, &backend, nullptr);
        D.download();
        aux.download();
        for (int64_t j = 0; j < kN; ++j) {
          EXPECT_TRUE(std::isnan(D.get(0, j))) << "act(NaN) at (0, " << j << ") = " << D.get(0, j);
          EXPECT_EQ(D.get(1, j), kInf) << "act(+Inf) at (1, " << j << ")";
          EXPECT_TRUE(same_value(D.get(2, j), act_at_minus_inf(a, backend)))
              << "act(-Inf) at (2, " << j << ") = " << D.get(2, j) << " on " << epigemm_backend_name(backend);
          for (int64_t i = 3; i < kM; ++i) {
            EXPECT_TRUE(std::isfinite(D.get(i, j))) << "an ordinary row at (" << i << ", " << j << ")";
          }
          if (e == EPIGEMM_EPILOGUE_ACT_AUX_BIAS) {
            EXPECT_TRUE(std::isnan(aux.get(0, j)));
            EXPECT_EQ(aux.get(1, j), kInf);
            EXPECT_EQ(aux.get(2, j), -kInf);
          }
        }
      }
    }
  }
  std::printf("  %s ran %d of the 20 forward calls itself\n", target.name().c_str(), ran);
  if (target.backend == EPIGEMM_BACKEND_AUTO || target.backend == EPIGEMM_BACKEND_REFERENCE) {
    EXPECT_EQ(ran, 20);
  }
}

// Backward: DACT and DACT_BGRAD with every activation: D = acc * act'(aux).
TEST_P(SpecialValues, BackwardNaNAndInfinitiesGiveNaNAndTheLimits) {
  const Target target = GetParam();
  const std::string why = unusable(ctx_, target);
  if (!why.empty()) GTEST_SKIP() << why;
  int ran = 0;
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
    for (int act = 0; act <= int(EPIGEMM_ACTIVATION_SILU); ++act) {
      for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD}) {
        const epigemm_activation_t a = epigemm_activation_t(act);
        SCOPED_TRACE(std::string(epigemm_dtype_name(dtype)) + " " + epigemm_epilogue_name(e) + " " +
                     epigemm_activation_name(a));
        Operand A(dtype, target.memory, kM, kK), B(dtype, target.memory, kK, kN);
        Operand D(dtype, target.memory, kM, kN), aux(dtype, target.memory, kM, kN);
        Operand bias_grad(EPIGEMM_DTYPE_F32, target.memory, kM, 1);
        // Small integers: acc is exact in every dtype and order.
        for (int64_t p = 0; p < kK; ++p) {
          for (int64_t i = 0; i < kM; ++i) A.set(i, p, float((i + 2 * p) % 3) - 1.0f);
          for (int64_t j = 0; j < kN; ++j) B.set(p, j, float((p + j) % 4) - 1.0f);
        }
        for (int64_t j = 0; j < kN; ++j) {
          aux.set(0, j, kNaN);
          aux.set(1, j, kInf);
          aux.set(2, j, -kInf);
          for (int64_t i = 3; i < kM; ++i) aux.set(i, j, 0.5f * float(i) - 2.0f);
        }
        for (Operand* o : {&A, &B, &aux}) o->upload();
        Sides sides;
        sides.aux = &aux;
        if (e == EPIGEMM_EPILOGUE_DACT_BGRAD) sides.bias_grad = &bias_grad;
        if (!run_epilogue(e, a, sides, A, B, D)) continue;
        ++ran;
        epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
        epigemm_context_last_backend(ctx_, &backend, nullptr);
        SCOPED_TRACE(std::string("ran on ") + epigemm_backend_name(backend));
        D.download();
        bias_grad.download();
        for (int64_t j = 0; j < kN; ++j) {
          double acc1 = 0, acc2 = 0;
          for (int64_t p = 0; p < kK; ++p) {
            acc1 += double(A.get(1, p)) * B.get(p, j);
            acc2 += double(A.get(2, p)) * B.get(p, j);
          }
          EXPECT_TRUE(std::isnan(D.get(0, j))) << "acc * act'(NaN) at (0, " << j << ") = " << D.get(0, j);
          EXPECT_TRUE(same_value(D.get(1, j), dact_at_inf(acc1, a, false, backend)))
              << "acc * act'(+Inf) = acc at (1, " << j << ") = " << D.get(1, j);
          EXPECT_TRUE(same_value(D.get(2, j), dact_at_inf(acc2, a, true, backend)))
              << "acc * act'(-Inf) at (2, " << j << ") = " << D.get(2, j);
        }
        if (e == EPIGEMM_EPILOGUE_DACT_BGRAD) {
          EXPECT_TRUE(std::isnan(bias_grad.get(0, 0))) << "a sum with NaN terms is NaN";
          EXPECT_TRUE(std::isfinite(bias_grad.get(1, 0)));
        }
      }
    }
  }
  std::printf("  %s ran %d of the 20 backward calls itself\n", target.name().c_str(), ran);
  if (target.backend == EPIGEMM_BACKEND_AUTO || target.backend == EPIGEMM_BACKEND_REFERENCE) {
    EXPECT_EQ(ran, 20);
  }
}

// gelu_tanh and its derivative on every bf16 pre-activation of [-8, -2), where the 1 + tanh(u)
// form cancels (docs/conventions.md, "Activations"): each result within one bf16 ulp of the
// formula evaluated in double. D (256 x 8) = act(op(A) B) with op(A)'s column 0 the 256 values and
// B's row 0 ones, the rest 0, so that acc is each value exactly; backward, acc = 1 and aux the
// values. The forward runs with A stored as is (NN) and transposed (TN, the layout of cutlass's
// forward kernels), the backward in NN. The cublaslt backend asked by name is the documented
// exception (its GELU is off by up to 2 ulps in [-4, -2) and 0 below -4): skipped there; auto must
// not run it.
TEST_P(SpecialValues, GeluTanhOfNegativePreActivationsIsTheFormula) {
  const Target target = GetParam();
  const std::string why = unusable(ctx_, target);
  if (!why.empty()) GTEST_SKIP() << why;
  if (target.backend == EPIGEMM_BACKEND_CUBLASLT) {
    GTEST_SKIP() << "SKIP: cuBLASLt's own GELU, the exception of docs/conventions.md, \"Activations\"";
  }
  constexpr int64_t kValues = 256, kCols = 8, kDepth = 8;
  std::vector<float> x;
  for (uint32_t exponent = 127 + 1; exponent < 127 + 3; ++exponent) {  // |x| in [2, 8)
    for (uint32_t mantissa = 0; mantissa < 128; ++mantissa) {
      x.push_back(from_bf16(uint16_t(0x8000u | (exponent << 7) | mantissa)));
    }
  }
  ASSERT_EQ(int64_t(x.size()), kValues);
  // In the sigmoid form, s = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): 1 + tanh(u) cancels in double
  // too (below about -6.5 it is a few multiples of 2^-53, or 0).
  const double c = std::sqrt(2.0 / M_PI);
  auto sigmoid_2u = [c](double v) { return 1.0 / (1.0 + std::exp(-2.0 * c * (v + 0.044715 * v * v * v))); };
  auto gelu = [&](double v) { return v * sigmoid_2u(v); };
  auto gelu_grad = [&](double v) {
    const double sv = sigmoid_2u(v);
    return sv + 2.0 * v * sv * (1.0 - sv) * c * (1.0 + 3.0 * 0.044715 * v * v);
  };
  struct Run {
    epigemm_epilogue_t epilogue;
    epigemm_op_t transa;
  };
  int ran = 0;
  for (const Run& r : {Run{EPIGEMM_EPILOGUE_ACT, EPIGEMM_OP_N}, Run{EPIGEMM_EPILOGUE_ACT, EPIGEMM_OP_T},
                       Run{EPIGEMM_EPILOGUE_DACT, EPIGEMM_OP_N}}) {
    const bool backward = r.epilogue == EPIGEMM_EPILOGUE_DACT, a_t = r.transa == EPIGEMM_OP_T;
    SCOPED_TRACE(std::string(epigemm_epilogue_name(r.epilogue)) + (a_t ? " TN" : " NN"));
    Operand A(EPIGEMM_DTYPE_BF16, target.memory, a_t ? kDepth : kValues, a_t ? kValues : kDepth);
    Operand B(EPIGEMM_DTYPE_BF16, target.memory, kDepth, kCols);
    Operand D(EPIGEMM_DTYPE_BF16, target.memory, kValues, kCols), aux(EPIGEMM_DTYPE_BF16, target.memory, kValues, kCols);
    for (int64_t i = 0; i < kValues; ++i) {
      const float value = backward ? 1.0f : x[size_t(i)];
      if (a_t) {
        A.set(0, i, value);
      } else {
        A.set(i, 0, value);
      }
    }
    for (int64_t j = 0; j < kCols; ++j) {
      B.set(0, j, 1.0f);
      for (int64_t i = 0; i < kValues; ++i) aux.set(i, j, x[size_t(i)]);
    }
    for (Operand* o : {&A, &B, &aux}) o->upload();
    Sides sides;
    if (backward) sides.aux = &aux;
    if (!run_epilogue(r.epilogue, EPIGEMM_ACTIVATION_GELU_TANH, sides, A, B, D, r.transa)) continue;
    ++ran;
    epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
    epigemm_context_last_backend(ctx_, &backend, nullptr);
    SCOPED_TRACE(std::string("ran on ") + epigemm_backend_name(backend));
    D.download();
    int off = 0;
    for (int64_t j = 0; j < kCols; ++j) {
      for (int64_t i = 0; i < kValues; ++i) {
        const double exact = backward ? gelu_grad(x[size_t(i)]) : gelu(x[size_t(i)]);
        const double ulp = std::ldexp(1.0, std::ilogb(exact) - 7);
        const double error = std::fabs(double(D.get(i, j)) - exact) / ulp;
        if (!(error <= 1.0) && off++ < 5) {  // NaN included
          ADD_FAILURE() << "x = " << x[size_t(i)] << ": " << D.get(i, j) << ", the formula " << exact << " ("
                        << error << " bf16 ulps)";
        }
      }
    }
    EXPECT_EQ(off, 0) << "results more than one bf16 ulp from the formula";
  }
  // Every target runs some of the three (cutlass: the TN forward and the backward).
  EXPECT_GT(ran, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTargets, SpecialValues, ::testing::ValuesIn(targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

}  // namespace
