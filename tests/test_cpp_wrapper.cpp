// The C++ layer (include/epigemm/epigemm.hpp) adds no meaning of its own: each wrapper is its C
// call. Checked on the reference backend, bitwise against the C calls on the same inputs, with
// another activation giving other values (so a setter or argument that is dropped shows), and
// errors arriving as epigemm::Error with the status and the context's message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "epigemm/epigemm.hpp"

namespace {

constexpr int64_t kTokens = 5, kIn = 3, kOut = 4;

// Row-major [rows, cols] f32 host tensor over `values`.
epigemm_tensor_t tensor(std::vector<float>& values, int64_t rows, int64_t cols) {
  return epigemm_tensor_t{values.data(), EPIGEMM_DTYPE_F32, rows, cols, cols, EPIGEMM_MEMORY_HOST};
}
epigemm_vector_t vector(std::vector<float>& values) {
  return epigemm_vector_t{values.data(), EPIGEMM_DTYPE_F32, int64_t(values.size()), EPIGEMM_MEMORY_HOST};
}

// Values of both signs, so that relu, silu and the GELUs all differ.
std::vector<float> values(size_t count, float scale) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = scale * (float(int(i * 7 % 11)) - 5.0f) / 5.0f;
  return v;
}

TEST(CppWrapper, GemmDescActivationIsTheDescriptionsActivation) {
  // D (gemm_m x gemm_n, column-major) = act(A B + bias), ACT_BIAS, through the wrapper and C.
  const int64_t m = 4, n = 3, k = 5;
  std::vector<float> a = values(size_t(m * k), 1.0f), b = values(size_t(k * n), 0.8f), bias = values(size_t(m), 0.5f);
  const epigemm_matrix_t A{a.data(), EPIGEMM_DTYPE_F32, m, k, m, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B{b.data(), EPIGEMM_DTYPE_F32, k, n, k, EPIGEMM_MEMORY_HOST};
  const epigemm_vector_t Bias = vector(bias);
  epigemm::Handle handle;
  handle.set_backend(EPIGEMM_BACKEND_REFERENCE);
  std::vector<std::vector<float>> outputs;
  for (const epigemm_activation_t act : {EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU}) {
    std::vector<float> wrapped(size_t(m * n)), direct(size_t(m * n));
    const epigemm_matrix_t D1{wrapped.data(), EPIGEMM_DTYPE_F32, m, n, m, EPIGEMM_MEMORY_HOST};
    const epigemm_matrix_t D2{direct.data(), EPIGEMM_DTYPE_F32, m, n, m, EPIGEMM_MEMORY_HOST};
    epigemm::GemmDesc desc;
    desc.epilogue(EPIGEMM_EPILOGUE_ACT_BIAS).activation(act).bias(&Bias).backend(EPIGEMM_BACKEND_REFERENCE);
    epigemm::gemm(handle, desc, A, B, D1);

    epigemm_gemm_desc_t c_desc = nullptr;
    ASSERT_EQ(epigemm_gemm_desc_create(&c_desc), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_set_epilogue(c_desc, EPIGEMM_EPILOGUE_ACT_BIAS);
    epigemm_gemm_desc_set_activation(c_desc, act);
    epigemm_gemm_desc_set_bias(c_desc, &Bias);
    epigemm_gemm_desc_set_backend(c_desc, EPIGEMM_BACKEND_REFERENCE);
    EXPECT_EQ(epigemm_gemm(handle.get(), c_desc, &A, &B, &D2, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS);
    epigemm_gemm_desc_destroy(c_desc);
    EXPECT_EQ(std::memcmp(wrapped.data(), direct.data(), wrapped.size() * sizeof(float)), 0)
        << epigemm_activation_name(act);
    outputs.push_back(wrapped);
  }
  EXPECT_NE(outputs[0], outputs[1]) << "relu and silu gave the same D: the activation was not set";
}

TEST(CppWrapper, LayerActCallsAreTheCCalls) {
  std::vector<float> x = values(kTokens * kIn, 1.0f), w = values(kOut * kIn, 0.7f), b = values(kOut, 0.3f);
  std::vector<float> dy = values(kTokens * kOut, 0.9f), pre_in = values(kTokens * kIn, 2.0f);
  epigemm::Handle handle;
  handle.set_backend(EPIGEMM_BACKEND_REFERENCE);
  const epigemm_tensor_t X = tensor(x, kTokens, kIn), W = tensor(w, kOut, kIn), DY = tensor(dy, kTokens, kOut);
  const epigemm_tensor_t P_in = tensor(pre_in, kTokens, kIn);
  const epigemm_vector_t Bias = vector(b);
  std::vector<std::vector<float>> dx_by_activation;
  for (const epigemm_activation_t act : {EPIGEMM_ACTIVATION_GELU_ERF, EPIGEMM_ACTIVATION_RELU}) {
    SCOPED_TRACE(epigemm_activation_name(act));
    // fprop_act: Y and pre_act.
    std::vector<float> y1(kTokens * kOut), y2(kTokens * kOut), p1(kTokens * kOut), p2(kTokens * kOut);
    const epigemm_tensor_t Y1 = tensor(y1, kTokens, kOut), Y2 = tensor(y2, kTokens, kOut);
    const epigemm_tensor_t P1 = tensor(p1, kTokens, kOut), P2 = tensor(p2, kTokens, kOut);
    handle.linear_fprop_act(X, W, &Bias, act, &P1, Y1);
    ASSERT_EQ(epigemm_linear_fprop_act(handle.get(), &X, &W, &Bias, act, &P2, &Y2, nullptr, 0, nullptr),
              EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(y1, y2);
    EXPECT_EQ(p1, p2);
    // dgrad_act: dX and the bias gradient.
    std::vector<float> dx1(kTokens * kIn), dx2(kTokens * kIn), g1(kIn), g2(kIn);
    const epigemm_tensor_t DX1 = tensor(dx1, kTokens, kIn), DX2 = tensor(dx2, kTokens, kIn);
    const epigemm_vector_t G1 = vector(g1), G2 = vector(g2);
    handle.linear_dgrad_act(DY, W, act, P_in, &G1, DX1);
    ASSERT_EQ(epigemm_linear_dgrad_act(handle.get(), &DY, &W, act, &P_in, &G2, &DX2, nullptr, 0, nullptr),
              EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(dx1, dx2);
    EXPECT_EQ(g1, g2);
    dx_by_activation.push_back(dx1);
  }
  EXPECT_NE(dx_by_activation[0], dx_by_activation[1]) << "gelu_erf and relu gave the same dX";
}

TEST(CppWrapper, BadActivationThrowsWithStatusAndMessage) {
  std::vector<float> x = values(kTokens * kIn, 1.0f), w = values(kOut * kIn, 1.0f), y(kTokens * kOut);
  epigemm::Handle handle;
  const epigemm_tensor_t X = tensor(x, kTokens, kIn), W = tensor(w, kOut, kIn), Y = tensor(y, kTokens, kOut);
  try {
    handle.linear_fprop_act(X, W, nullptr, epigemm_activation_t(9), nullptr, Y);
    ADD_FAILURE() << "an activation of value 9 was accepted";
  } catch (const epigemm::Error& e) {
    EXPECT_EQ(e.status(), EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_NE(std::string(e.what()).find("activation has value 9"), std::string::npos) << e.what();
  }
}

}  // namespace
