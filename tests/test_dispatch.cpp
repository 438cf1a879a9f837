// AUTO's choice (docs/dispatch.md): the same call goes to the same backend every time, in the
// same context and in a fresh one, with the same stated reason, and every call reports the
// backend that ran. On the host this exercises cpu vs reference; on a GPU, cuda vs cublaslt
// through the measured decision table (SKIP without a GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "harness/harness.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include "backends/cublaslt/cublaslt_preference.hpp"
#endif

namespace epigemm_test {
namespace {

struct Choice {
  epigemm_backend_t backend;
  std::string reason;
};

Choice last_choice(epigemm_context_t ctx) {
  Choice c{EPIGEMM_BACKEND_AUTO, ""};
  const char* reason = nullptr;
  EXPECT_EQ(epigemm_context_last_backend(ctx, &c.backend, &reason), EPIGEMM_STATUS_SUCCESS);
  c.reason = reason ? reason : "";
  return c;
}

// Cases on both sides of the GPU decision table (the bias forward, where cuBLASLt measured faster;
// bias gradients, where cuda did), GELU epilogues (which auto keeps off cuBLASLt) and ones cublaslt
// declines (f32 dGELU, odd shapes).
std::vector<GemmCase> dispatch_cases(epigemm_memory_t memory) {
  struct Spec {
    epigemm_epilogue_t epilogue;
    epigemm_dtype_t ab, d;
    int64_t m, n, k;
  };
  const Spec specs[] = {
      {EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, 256, 128, 64},
      {EPIGEMM_EPILOGUE_BIAS, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, 128, 256, 96},
      {EPIGEMM_EPILOGUE_DGELU_BGRAD, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, 192, 256, 128},
      {EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, 64, 128, 256},
      {EPIGEMM_EPILOGUE_DGELU, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F32, 64, 64, 64},
      {EPIGEMM_EPILOGUE_GELU_AUX, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_F32, 17, 229, 13},
  };
  std::vector<GemmCase> cases;
  uint64_t index = 0;
  for (const Spec& s : specs) {
    GemmCase c;
    c.target = Target{EPIGEMM_BACKEND_AUTO, memory};
    c.epilogue = s.epilogue;
    c.transa = EPIGEMM_OP_T;
    c.ab_dtype = s.ab;
    c.d_dtype = s.d;
    c.bias_dtype = c.aux_dtype = c.bias_grad_dtype = s.d;
    c.gemm_m = s.m;
    c.gemm_n = s.n;
    c.gemm_k = s.k;
    c.seed = case_seed("dispatch", index++);
    cases.push_back(c);
  }
  return cases;
}

class AutoDispatch : public ::testing::TestWithParam<epigemm_memory_t> {};

TEST_P(AutoDispatch, SameCallSameBackendEveryTime) {
  const Target target{EPIGEMM_BACKEND_AUTO, GetParam()};
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  for (const GemmCase& c : dispatch_cases(target.memory)) {
    SCOPED_TRACE(c.describe());
    const CaseRun first = run_case(ctx, c);
    ASSERT_TRUE(first.ok);  // run_case checked that a backend for this memory was reported
    const Choice chosen = last_choice(ctx);
    EXPECT_EQ(chosen.backend, first.ran);
    EXPECT_NE(chosen.reason.find(epigemm_backend_name(chosen.backend)), std::string::npos)
        << "the reason does not name the backend: " << chosen.reason;
    check_case(ctx, c, first);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const CaseRun again = run_case(ctx, c);
      ASSERT_TRUE(again.ok);
      const Choice same = last_choice(ctx);
      EXPECT_EQ(same.backend, chosen.backend) << "repeat " << repeat;
      EXPECT_EQ(same.reason, chosen.reason) << "repeat " << repeat;
      expect_bitwise_equal("D", first.after.d, again.after.d);
    }
    Context fresh;  // a new context decides the same way
    const CaseRun elsewhere = run_case(fresh, c);
    ASSERT_TRUE(elsewhere.ok);
    EXPECT_EQ(last_choice(fresh).backend, chosen.backend);
    expect_bitwise_equal("D (fresh context)", first.after.d, elsewhere.after.d);
  }
}

INSTANTIATE_TEST_SUITE_P(Memory, AutoDispatch,
                         ::testing::Values(EPIGEMM_MEMORY_HOST, EPIGEMM_MEMORY_DEVICE),
                         [](const ::testing::TestParamInfo<epigemm_memory_t>& info) {
                           return std::string(info.param == EPIGEMM_MEMORY_HOST ? "host" : "device");
                         });

// The reason is the documented sentence, built when asked for; a call that fails leaves the last
// successful call's backend and reason in place.
TEST(LastBackend, ReasonOfTheLastSuccessfulCall) {
  float x[4 * 8] = {}, w[8 * 8] = {}, y[4 * 8] = {};
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * float(i % 5);
  for (int i = 0; i < 64; ++i) w[i] = 0.125f * float(i % 3);
  const epigemm_tensor_t X = {x, EPIGEMM_DTYPE_F32, 4, 8, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t W = {w, EPIGEMM_DTYPE_F32, 8, 8, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t Y = {y, EPIGEMM_DTYPE_F32, 4, 8, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t wrong_y = {y, EPIGEMM_DTYPE_F32, 4, 7, 8, EPIGEMM_MEMORY_HOST};
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  epigemm_backend_t ran = EPIGEMM_BACKEND_CUTLASS;
  const char* reason = nullptr;
  ASSERT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(ran, EPIGEMM_BACKEND_AUTO);
  EXPECT_STREQ(reason, "") << "no call has run yet";

  ASSERT_EQ(epigemm_context_set_backend(ctx, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_linear_fprop(ctx, &X, &W, nullptr, nullptr, &Y, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(ran, EPIGEMM_BACKEND_REFERENCE);
  EXPECT_STREQ(reason, "requested: reference");

  ASSERT_EQ(epigemm_context_set_backend(ctx, EPIGEMM_BACKEND_AUTO), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_linear_fprop(ctx, &X, &W, nullptr, nullptr, &wrong_y, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  ASSERT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(ran, EPIGEMM_BACKEND_REFERENCE) << "the failed call changed the last backend";
  EXPECT_STREQ(reason, "requested: reference") << "the failed call changed the reason";

  ASSERT_EQ(epigemm_linear_fprop(ctx, &X, &W, nullptr, nullptr, &Y, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
  const std::string expected = std::string("auto: ") + epigemm_backend_name(ran) + " has the highest priority (" +
                               (ran == EPIGEMM_BACKEND_CPU ? "10" : "0") + ") among the backends that support the call";
  // On a machine with a GPU the device backends rank above cpu for this call and decline it
  // (host memory): each adds "; <name> declined (...)".
  const std::string text = reason;
  EXPECT_EQ(text.substr(0, expected.size()), expected) << text;
  if (text.size() > expected.size()) {
    EXPECT_EQ(text.substr(expected.size(), 2), "; ") << text;
  }
  epigemm_context_destroy(ctx);
}

#ifdef EPIGEMM_TESTS_WITH_CUDA
// The decision table itself (no GPU needed): a pure function of the call, and silent (cuda)
// for a dtype it has no measurement of.
TEST(DispatchTable, PureFunctionOfTheCall) {
  epigemm::GemmCall call;
  call.a.dtype = call.b.dtype = call.d.dtype = EPIGEMM_DTYPE_BF16;
  bool any_cublaslt = false, any_cuda = false;
  for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_BIAS, EPIGEMM_EPILOGUE_GELU_AUX, EPIGEMM_EPILOGUE_GELU_AUX_BIAS,
                               EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD, EPIGEMM_EPILOGUE_BGRADB}) {
    for (int64_t size : {64, 1024, 4096, 16384}) {
      call.epilogue = e;
      call.gemm_m = size;
      call.gemm_n = 2 * size;
      call.gemm_k = size / 2;
      const bool first = epigemm::cublaslt_preferred(call);
      EXPECT_EQ(epigemm::cublaslt_preferred(call), first);
      (first ? any_cublaslt : any_cuda) = true;
    }
  }
  // The committed table has cases on both sides (docs/dispatch.md).
  EXPECT_TRUE(any_cublaslt);
  EXPECT_TRUE(any_cuda);
  call.a.dtype = call.b.dtype = call.d.dtype = EPIGEMM_DTYPE_F16;  // not measured
  call.epilogue = EPIGEMM_EPILOGUE_BIAS;
  EXPECT_FALSE(epigemm::cublaslt_preferred(call));
}

// The table is keyed by epilogue and activation as the parts name them: an activation the
// epilogue does not read changes nothing, ACT_BIAS with the identity is BIAS, and an
// (epilogue, activation) with no measured row goes to cuda: ACT_AUX has no rows (cuBLASLt saves a
// pre-activation for gelu_tanh only, and auto never runs its GELU: GeluTanhNeverPrefersCuBlasLt).
TEST(DispatchTable, KeyedByEpilogueAndActivation) {
  epigemm::GemmCall call;
  call.a.dtype = call.b.dtype = call.d.dtype = EPIGEMM_DTYPE_BF16;
  for (int64_t size : {64, 1024, 4096, 16384}) {
    call.gemm_m = size;
    call.gemm_n = 2 * size;
    call.gemm_k = size / 2;
    call.epilogue = EPIGEMM_EPILOGUE_ACT_AUX;
    for (epigemm_activation_t other : {EPIGEMM_ACTIVATION_GELU_ERF, EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU,
                                       EPIGEMM_ACTIVATION_IDENTITY}) {
      call.activation = other;
      EXPECT_FALSE(epigemm::cublaslt_preferred(call)) << epigemm_activation_name(other) << ", size " << size;
    }
    call.epilogue = EPIGEMM_EPILOGUE_BIAS;
    call.activation = EPIGEMM_ACTIVATION_GELU_TANH;
    const bool bias = epigemm::cublaslt_preferred(call);
    call.activation = EPIGEMM_ACTIVATION_SILU;  // not read by BIAS
    EXPECT_EQ(epigemm::cublaslt_preferred(call), bias) << "size " << size;
    call.epilogue = EPIGEMM_EPILOGUE_ACT_BIAS;
    call.activation = EPIGEMM_ACTIVATION_IDENTITY;  // the parts of BIAS
    EXPECT_EQ(epigemm::cublaslt_preferred(call), bias) << "size " << size;
  }
}

// auto never prefers cuBLASLt's GELU epilogues (forward or backward, with or without bias, aux or
// bias gradient), at any size: they are not the contract's gelu_tanh for negative pre-activations
// (cublaslt_preference.cpp). The ReLU and bias epilogues of the same sizes still follow the table,
// which prefers cuBLASLt for some of them.
TEST(DispatchTable, GeluTanhNeverPrefersCuBlasLt) {
  epigemm::GemmCall call;
  call.a.dtype = call.b.dtype = call.d.dtype = EPIGEMM_DTYPE_BF16;
  call.activation = EPIGEMM_ACTIVATION_GELU_TANH;
  bool relu_or_bias_on_cublaslt = false;
  for (int64_t size : {256, 768, 2048, 3072, 8192, 16384}) {
    call.gemm_m = size;
    call.gemm_n = 2 * size;
    call.gemm_k = size / 4;
    for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,
                                 EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD}) {
      call.epilogue = e;
      call.activation = EPIGEMM_ACTIVATION_GELU_TANH;
      EXPECT_FALSE(epigemm::cublaslt_preferred(call)) << epigemm_epilogue_name(e) << ", size " << size;
    }
    call.epilogue = EPIGEMM_EPILOGUE_ACT_BIAS;
    call.activation = EPIGEMM_ACTIVATION_RELU;
    relu_or_bias_on_cublaslt = relu_or_bias_on_cublaslt || epigemm::cublaslt_preferred(call);
    call.epilogue = EPIGEMM_EPILOGUE_BIAS;
    relu_or_bias_on_cublaslt = relu_or_bias_on_cublaslt || epigemm::cublaslt_preferred(call);
  }
  EXPECT_TRUE(relu_or_bias_on_cublaslt) << "the committed table prefers cuBLASLt for no ReLU or bias case";
}

// The table was measured with every matrix 16-byte aligned (address and leading dimension). A
// call with a matrix below that is decided apart, by its epilogue alone: the bias and ReLU forward
// (BIAS, ACT and ACT_BIAS with relu) on cublaslt, whatever its size; everything else (the bias
// gradients, whose cuBLASLt kernels were 3.4-3.9x slower there; DEFAULT) on cuda.
TEST(DispatchTable, MatricesBelow16ByteAlignmentAreDecidedByTheEpilogue) {
  epigemm::GemmCall call;
  call.epilogue = EPIGEMM_EPILOGUE_ACT_BIAS;
  call.activation = EPIGEMM_ACTIVATION_RELU;
  call.gemm_m = 3072;  // the forward of (2048, 768, 3072), where cuBLASLt measured faster
  call.gemm_n = 2048;
  call.gemm_k = 768;
  auto matrix = [](uintptr_t address, int64_t ld) {
    epigemm::Matrix x;
    x.data = reinterpret_cast<void*>(address);
    x.dtype = EPIGEMM_DTYPE_BF16;
    x.ld = ld;
    return x;
  };
  call.a = matrix(0x10000000, 768);
  call.b = matrix(0x20000000, 768);
  call.d = matrix(0x30000000, 3072);
  ASSERT_TRUE(epigemm::cublaslt_preferred(call)) << "the committed table no longer prefers cuBLASLt here";

  // Where the table prefers cuda, an unaligned bias or ReLU forward still goes to cublaslt: a
  // size no table row is near, and D's rows of 50257 elements (2-byte aligned).
  epigemm::GemmCall vocabulary = call;
  vocabulary.gemm_m = 50257;
  vocabulary.gemm_n = 64;
  vocabulary.d.ld = 50257;
  for (const epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_BIAS, EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS}) {
    vocabulary.epilogue = e;
    EXPECT_TRUE(epigemm::cublaslt_preferred(vocabulary)) << epigemm_epilogue_name(e);
  }
  for (const epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_EPILOGUE_BGRADA}) {
    vocabulary.epilogue = e;
    EXPECT_FALSE(epigemm::cublaslt_preferred(vocabulary)) << epigemm_epilogue_name(e);
  }
  vocabulary.epilogue = EPIGEMM_EPILOGUE_ACT_BIAS;
  vocabulary.activation = EPIGEMM_ACTIVATION_GELU_TANH;
  EXPECT_FALSE(epigemm::cublaslt_preferred(vocabulary)) << "cuBLASLt's GELU, never";
  vocabulary.activation = EPIGEMM_ACTIVATION_SILU;
  EXPECT_FALSE(epigemm::cublaslt_preferred(vocabulary)) << "an activation cuBLASLt does not have";

  // Each matrix's alignment counts: the same call misaligned in one matrix at a time. With the
  // forward ReLU and bias it stays on cublaslt; with an aux (ACT_AUX_BIAS, gelu_tanh excepted
  // above, so relu: cuBLASLt's ReLU aux is a bit mask and the backend declines it anyway) or a
  // bias gradient it goes to cuda.
  epigemm::GemmCall unaligned = call;
  unaligned.d.ld = 3076;  // 6152 bytes: 8-byte aligned
  EXPECT_TRUE(epigemm::cublaslt_preferred(unaligned)) << "D's leading dimension";
  unaligned = call;
  unaligned.b.ld = 772;
  EXPECT_TRUE(epigemm::cublaslt_preferred(unaligned)) << "B's leading dimension";
  unaligned = call;
  unaligned.a.data = reinterpret_cast<void*>(0x10000008);
  EXPECT_TRUE(epigemm::cublaslt_preferred(unaligned)) << "A's address";
  unaligned.epilogue = EPIGEMM_EPILOGUE_ACT_AUX_BIAS;
  unaligned.has_aux = true;
  unaligned.aux = matrix(0x40000000, 3072);
  EXPECT_FALSE(epigemm::cublaslt_preferred(unaligned)) << "an aux, with A unaligned";
  unaligned = call;
  unaligned.epilogue = EPIGEMM_EPILOGUE_BGRADB;
  unaligned.b.ld = 772;
  EXPECT_FALSE(epigemm::cublaslt_preferred(unaligned)) << "BGRADB with B unaligned";
}
#endif

}  // namespace
}  // namespace epigemm_test
