// Storage at any byte address (docs/conventions.md §4: any alignment is correct). Every operand of
// a case is moved to an address one byte past a 64-byte boundary, so that no fp32 element is at a
// multiple of 4 and no fp16/bf16 element at a multiple of 2, and the call runs there: on the
// reference backend, and under auto (the cpu backend declines such storage and auto routes the
// call to the reference). The harness checks the results against its own naive computation,
// for every epilogue, transpose pair and dtype family, with padded leading dimensions.
// Element-aligned pointers off a 256-byte boundary are the backend matrix's `misaligned` shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0x5b;

// One operand's bytes (its span from element (0, 0) to the last element), moved to an address one
// byte past a 64-byte boundary with guard bytes on both sides, and moved back after the call.
class ByteShiftedCopy {
 public:
  ByteShiftedCopy(void* data, size_t span) : origin_(data), span_(span) {
    const size_t total = kGuardBytes + 1 + span + kGuardBytes;
    storage_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, (total + 63) / 64 * 64)));
    if (!storage_) throw std::bad_alloc();
    std::memset(storage_.get(), kGuardByte, total);
    if (span_ > 0) std::memcpy(shifted(), origin_, span_);
  }
  void* shifted() const { return storage_.get() + kGuardBytes + 1; }
  // The bytes back where the harness checks them; a write outside the span is a failure here.
  void restore(const char* name) const {
    if (span_ > 0) std::memcpy(origin_, shifted(), span_);
    const unsigned char* bytes = storage_.get();
    for (size_t i = 0; i < kGuardBytes + 1; ++i) {
      ASSERT_EQ(bytes[i], kGuardByte) << name << ": written " << kGuardBytes + 1 - i << " bytes before its data";
    }
    for (size_t i = 0; i < kGuardBytes; ++i) {
      ASSERT_EQ(bytes[kGuardBytes + 1 + span_ + i], kGuardByte) << name << ": written " << i << " bytes past its data";
    }
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  void* origin_;
  size_t span_;
  std::unique_ptr<unsigned char, Free> storage_;
};

size_t element_bytes(epigemm_dtype_t dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 4 : 2; }

size_t span_of(const epigemm_matrix_t& m) {
  if (m.rows == 0 || m.cols == 0) return 0;
  return size_t((m.cols - 1) * m.ld + m.rows) * element_bytes(m.dtype);
}
size_t span_of(const epigemm_vector_t& v) { return size_t(v.length) * element_bytes(v.dtype); }

// The harness's call (epigemm_gemm with the case's description) on byte-shifted copies of every
// operand.
epigemm_status_t invoke_on_byte_shifted_copies(epigemm_context_t ctx, const GemmCase& c,
                                               const OperandViews& v, void* workspace,
                                               size_t workspace_bytes, void* stream) {
  OperandViews shifted = v;
  ByteShiftedCopy a(v.a.data, span_of(v.a)), b(v.b.data, span_of(v.b)), d(v.d.data, span_of(v.d));
  shifted.a.data = a.shifted();
  shifted.b.data = b.shifted();
  shifted.d.data = d.shifted();
  std::unique_ptr<ByteShiftedCopy> bias, aux, bias_grad;
  if (c.has_bias()) {
    bias = std::make_unique<ByteShiftedCopy>(v.bias.data, span_of(v.bias));
    shifted.bias.data = bias->shifted();
  }
  if (c.has_aux()) {
    aux = std::make_unique<ByteShiftedCopy>(v.aux.data, span_of(v.aux));
    shifted.aux.data = aux->shifted();
  }
  if (c.has_bias_grad()) {
    bias_grad = std::make_unique<ByteShiftedCopy>(v.bias_grad.data, span_of(v.bias_grad));
    shifted.bias_grad.data = bias_grad->shifted();
  }
  const epigemm_status_t status =
      invoke_description(ctx, c, shifted, workspace, workspace_bytes, stream);
  a.restore("A");
  b.restore("B");
  d.restore("D");
  if (bias) bias->restore("bias");
  if (aux) aux->restore("aux");
  if (bias_grad) bias_grad->restore("bias_grad");
  return status;
}

const epigemm_epilogue_t kEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT,       EPIGEMM_EPILOGUE_BIAS,  EPIGEMM_EPILOGUE_GELU_AUX,
    EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD,
    EPIGEMM_EPILOGUE_BGRADB};

struct Dtypes {
  epigemm_dtype_t ab, d, side;  // side: bias, aux and bias_grad
};
const Dtypes kDtypes[] = {{EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F32},
                          {EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16},
                          {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16},
                          {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F32}};

class ByteShiftedStorage : public ::testing::TestWithParam<Target> {};

TEST_P(ByteShiftedStorage, EveryEpilogueMatchesTheNaiveComputation) {
  const Target target = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (const epigemm_epilogue_t e : kEpilogues) {
    for (int t = 0; t < 4; ++t) {
      for (const Dtypes& dtypes : kDtypes) {
        GemmCase c;
        c.target = target;
        c.epilogue = e;
        c.transa = t / 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
        c.transb = t % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
        c.ab_dtype = dtypes.ab;
        c.d_dtype = dtypes.d;
        c.bias_dtype = c.aux_dtype = c.bias_grad_dtype = dtypes.side;
        c.gemm_m = 37;  // a full AVX-512 vector, an AVX2 one and a tail of rows
        c.gemm_n = 29;
        c.gemm_k = 19;
        c.beta = t % 2 ? 0.5f : 0.0f;
        c.padded(3);
        c.seed = case_seed(name, index++);
        run_and_check(ctx, c, invoke_on_byte_shifted_copies);
        if (HasFailure()) return;  // the first failing case says enough
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HostTargets, ByteShiftedStorage,
                         ::testing::Values(Target{EPIGEMM_BACKEND_REFERENCE, EPIGEMM_MEMORY_HOST},
                                           Target{EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST}),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

// The cpu backend asked by name declines such storage, naming the operand and its address, rather
// than reading fp32 elements through a misaligned float* (its BLAS engines take float*); auto
// then runs the call on the reference backend.
TEST(ByteShiftedStorage, CpuBackendDeclinesWithTheOperandNamed) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, (Target{EPIGEMM_BACKEND_CPU, EPIGEMM_MEMORY_HOST}));
  for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
    GemmCase c;
    c.target = Target{EPIGEMM_BACKEND_CPU, EPIGEMM_MEMORY_HOST};
    c.epilogue = EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
    c.ab_dtype = c.d_dtype = c.bias_dtype = c.aux_dtype = dtype;
    c.gemm_m = 5;
    c.gemm_n = 4;
    c.gemm_k = 3;
    Operands ops = Operands::make(c);
    OperandViews v = OperandViews::of(c, ops, EPIGEMM_MEMORY_HOST);
    ByteShiftedCopy b(v.b.data, span_of(v.b));
    v.b.data = b.shifted();
    Desc desc = make_desc(c, v, EPIGEMM_BACKEND_CPU);
    size_t bytes = 0;
    EXPECT_EQ(epigemm_gemm_workspace_size(ctx, desc.get(), &v.a, &v.b, &v.d, &bytes),
              EPIGEMM_STATUS_NOT_SUPPORTED);
    const std::string message = epigemm_context_last_error(ctx);
    EXPECT_NE(message.find("B (" + std::string(epigemm_dtype_name(dtype)) + ") is at 0x"), std::string::npos)
        << message;
    EXPECT_NE(message.find("element size"), std::string::npos) << message;

    Desc under_auto = make_desc(c, v, EPIGEMM_BACKEND_AUTO);
    ASSERT_EQ(epigemm_gemm(ctx, under_auto.get(), &v.a, &v.b, &v.d, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
    epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
    const char* reason = nullptr;
    ASSERT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(ran, EPIGEMM_BACKEND_REFERENCE) << reason;
    EXPECT_NE(std::string(reason).find("cpu declined"), std::string::npos) << reason;
    b.restore("B");
  }
}

}  // namespace
}  // namespace epigemm_test
