// The matrix of SPEC §5, for every backend: every epilogue x every transa/transb x the dtype
// combinations (A/B in f32, f16, bf16; D in f32 or the input type; bias, aux and bias_grad
// dtypes cycled independently; TF32 opt-in) x accumulate on/off x shapes with 1, odd primes,
// sizes that are not multiples of 8 or 16, padded leading dimensions, misaligned pointers,
// gemm_k = 0, gemm_m or gemm_n = 0, and a larger shape for part of the combinations.
//
// One test per (target, epilogue, transa/transb, dtype combination); it loops over the shapes.
// Instantiated for reference, cpu, cuda, cublaslt, auto on host memory and auto on device
// memory; a target that is not compiled in or cannot run here SKIPs with the reason.
//
// Degenerate sizes (docs/conventions.md): gemm_m = 0 or gemm_n = 0 writes nothing to the empty
// outputs, except bias_grad: DGELU_BGRAD with gemm_n = 0 writes zeros (length gemm_m) and BGRADB
// with gemm_m = 0 writes sum_p op(B)[p, j] (length gemm_n). gemm_k = 0 gives acc = beta * D_old,
// then the epilogue. beta = 0 never reads D (D is NaN-poisoned then).
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <sstream>

#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

constexpr epigemm_dtype_t F32 = EPIGEMM_DTYPE_F32, F16 = EPIGEMM_DTYPE_F16, BF16 = EPIGEMM_DTYPE_BF16;

const epigemm_epilogue_t kEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT,  EPIGEMM_EPILOGUE_BIAS,        EPIGEMM_EPILOGUE_GELU_AUX,
    EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_EPILOGUE_DGELU,  EPIGEMM_EPILOGUE_DGELU_BGRAD,
    EPIGEMM_EPILOGUE_BGRADB};

struct Dtypes {
  epigemm_dtype_t ab, d, bias, aux, bias_grad;
  bool tf32;
};

struct MatrixParam {
  Target target;
  epigemm_epilogue_t epilogue;
  epigemm_op_t transa, transb;
};

// Shown by gtest (and in ctest's test names) instead of the bytes of the struct.
void PrintTo(const MatrixParam& p, std::ostream* os) {
  *os << p.target.name() << " " << epigemm_epilogue_name(p.epilogue) << " "
      << trans_str(p.transa, p.transb);
}

// The dtype combinations one epilogue is tested with: the (A/B, D) pairs, each with bias, aux
// and bias_grad cycled through f32 / f16 / bf16 (only the ones the epilogue uses vary, so no
// two combinations of an epilogue are the same), and fp32 with TF32 allowed.
std::vector<Dtypes> dtype_combinations(epigemm_epilogue_t e) {
  const bool uses_side = e != EPIGEMM_EPILOGUE_DEFAULT;
  const epigemm_dtype_t cycle[] = {F32, F16, BF16};
  const std::pair<epigemm_dtype_t, epigemm_dtype_t> pairs[] = {
      {F32, F32}, {F16, F16}, {F16, F32}, {BF16, BF16}, {BF16, F32}};
  std::vector<Dtypes> out;
  for (const auto& pair : pairs) {
    for (int r = 0; r < (uses_side ? 3 : 1); ++r) {
      out.push_back(Dtypes{pair.first, pair.second, cycle[r % 3], cycle[(r + 1) % 3],
                           cycle[(r + 2) % 3], false});
    }
  }
  // bias, aux and bias_grad in D's own dtype: the combinations cuBLASLt's fused epilogues take
  // (it declines the others, and auto reroutes them).
  if (uses_side) {
    for (const auto& pair : pairs) out.push_back(Dtypes{pair.first, pair.second, pair.second, pair.second, pair.second, false});
  }
  out.push_back(Dtypes{F32, F32, F16, BF16, F32, true});
  return out;
}

std::vector<MatrixParam> matrix_params(Target target) {
  std::vector<MatrixParam> params;
  const epigemm_op_t ops[] = {EPIGEMM_OP_N, EPIGEMM_OP_T};
  for (epigemm_epilogue_t e : kEpilogues) {
    for (int t = 0; t < 4; ++t) params.push_back(MatrixParam{target, e, ops[t / 2], ops[t % 2]});
  }
  return params;
}

std::string param_name(const ::testing::TestParamInfo<MatrixParam>& info) {
  return std::string(epigemm_epilogue_name(info.param.epilogue)) + "_" +
         trans_str(info.param.transa, info.param.transb);
}

struct Shape {
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;      // 0: default leading dimensions
  bool misaligned;  // data pointers one element off a 256-byte boundary
  bool stale;       // aux (out) and bias_grad hold old values, not poison: overwrite, not add
};

const Shape kShapes[] = {
    {1, 1, 1, 1.0f, 0.0f, 0, false, false},        // the smallest
    {17, 229, 13, 1.0f, 0.0f, 0, false, false},    // odd primes, gemm_k not a multiple of 8
    {229, 17, 33, 1.5f, 0.5f, 3, true, false},     // accumulate, alpha != 1, padded, misaligned
    {541, 3, 67, 1.0f, 1.0f, 0, false, true},      // beta = 1 (the classic accumulate), tall
    {5, 541, 19, -0.75f, 0.0f, 1, false, false},   // wide, negative alpha, padded
    {31, 37, 541, 1.0f, 0.5f, 5, true, false},     // long gemm_k
    {64, 48, 32, 1.0f, 0.0f, 0, false, false},     // all multiples of 16: aligned fast paths
    {96, 64, 48, 0.5f, 0.5f, 8, false, false},     // aligned, padded by 8, accumulating
    {1, 23, 100, 1.0f, 0.0f, 0, true, false},      // gemm_m = 1
    {47, 1, 29, 1.0f, 0.5f, 1, false, true},       // gemm_n = 1
    {19, 23, 0, 1.0f, 0.0f, 0, false, false},      // gemm_k = 0, beta = 0: acc = 0
    {19, 23, 0, 2.0f, 0.5f, 3, false, true},       // gemm_k = 0: acc = beta * D_old
    {0, 29, 11, 1.0f, 0.0f, 1, false, false},      // gemm_m = 0 (BGRADB still writes bias_grad)
    {31, 0, 11, 1.0f, 0.5f, 0, false, true},       // gemm_n = 0 (DGELU_BGRAD writes zeros)
    {0, 0, 0, 1.0f, 0.0f, 0, false, false},        // nothing at all
};

class BackendMatrix : public ::testing::TestWithParam<MatrixParam> {};

// One test per (target, epilogue, transa/transb): every dtype combination x every shape.
TEST_P(BackendMatrix, DtypesAndShapes) {
  const MatrixParam& p = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, p.target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const int t = (p.transa == EPIGEMM_OP_T ? 2 : 0) + (p.transb == EPIGEMM_OP_T ? 1 : 0);
  const std::vector<Dtypes> combos = dtype_combinations(p.epilogue);
  // The larger shape for one dtype combination per test, a different one per transpose and
  // epilogue (its cost is the CPU oracle's, so not for all of them).
  const size_t large = size_t(t * 5 + int(p.epilogue) * 3) % combos.size();
  uint64_t index = 0;
  for (size_t i = 0; i < combos.size(); ++i) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    if (i == large) {
      // Past one tile in every direction; accumulating, padded and misaligned on NT and TN.
      const bool odd = t == 1 || t == 2;
      shapes.push_back(Shape{300, 257, 259, odd ? 0.5f : 1.0f, odd ? 0.5f : 0.0f, odd ? 7 : 0, odd, false});
    }
    if (i == 0 && t == 2) {
      // A layer fprop's layout (op(A) = A^T, op(B) = B) with few columns and long gemm_m, gemm_k,
      // fp32, alpha = 1, beta = 0: the cpu backend runs it through oneDNN's matmul primitive, not
      // dnnl_sgemm (onednn_overwrite_for_shape; test_cpu_backend.cpp checks that it does).
      shapes.push_back(Shape{1024, 24, 1040, 1.0f, 0.0f, 3, true, false});
    }
    for (const Shape& shape : shapes) {
      GemmCase c;
      c.target = p.target;
      c.epilogue = p.epilogue;
      c.transa = p.transa;
      c.transb = p.transb;
      c.ab_dtype = combos[i].ab;
      c.d_dtype = combos[i].d;
      c.bias_dtype = combos[i].bias;
      c.aux_dtype = combos[i].aux;
      c.bias_grad_dtype = combos[i].bias_grad;
      c.allow_tf32 = combos[i].tf32;
      c.alpha = shape.alpha;
      c.beta = shape.beta;
      c.gemm_m = shape.m;
      c.gemm_n = shape.n;
      c.gemm_k = shape.k;
      if (shape.pad > 0) c.padded(shape.pad);
      c.misaligned = shape.misaligned;
      c.stale_outputs = shape.stale;
      c.seed = case_seed(name, index++);
      run_and_check(ctx, c);
      if (HasFailure()) return;  // the first failing case says enough
    }
  }
}

#define EPIGEMM_MATRIX_FOR(prefix, backend, memory)                                     \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendMatrix,                                       \
                           ::testing::ValuesIn(matrix_params(Target{backend, memory})), \
                           param_name)

// After all tests: how many cases each backend ran itself, and how many it declined (those ran
// under auto elsewhere and were checked there), so a backend that declines everything shows.
class CaseCountReport : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const Target& target : all_targets()) {
      const epigemm_backend_t b = target.backend;
      if (b == EPIGEMM_BACKEND_AUTO || (ran_case_count(b) == 0 && declined_case_count(b) == 0)) continue;
      std::printf("[ cases    ] %s ran %lld cases itself; declined %lld (rerouted by auto and checked)\n",
                  epigemm_backend_name(b), static_cast<long long>(ran_case_count(b)),
                  static_cast<long long>(declined_case_count(b)));
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kCaseCountReport =
    ::testing::AddGlobalTestEnvironment(new CaseCountReport);

EPIGEMM_MATRIX_FOR(reference, EPIGEMM_BACKEND_REFERENCE, EPIGEMM_MEMORY_HOST);
EPIGEMM_MATRIX_FOR(cpu, EPIGEMM_BACKEND_CPU, EPIGEMM_MEMORY_HOST);
EPIGEMM_MATRIX_FOR(cuda, EPIGEMM_BACKEND_CUDA, EPIGEMM_MEMORY_DEVICE);
EPIGEMM_MATRIX_FOR(cublaslt, EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_MEMORY_DEVICE);
EPIGEMM_MATRIX_FOR(auto_host, EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST);
EPIGEMM_MATRIX_FOR(auto_device, EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_DEVICE);

// ---- determinism (SPEC §4): the same inputs twice on the same backend, bitwise the same -------

class BackendDeterminism : public ::testing::TestWithParam<Target> {};

// Every epilogue, twice each on the same inputs: D, aux and bias_grad bitwise the same.
TEST_P(BackendDeterminism, SameInputsSameBits) {
  const Target& target = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const Dtypes combos[] = {{F32, F32, F32, F32, F32, false}, {BF16, BF16, F16, BF16, F32, false}};
  uint64_t index = 0;
  for (epigemm_epilogue_t e : kEpilogues) {
    for (size_t i = 0; i < 2; ++i) {
      GemmCase c;
      c.target = target;
      c.epilogue = e;
      c.transa = EPIGEMM_OP_T;
      c.ab_dtype = combos[i].ab;
      c.d_dtype = combos[i].d;
      c.bias_dtype = combos[i].bias;
      c.aux_dtype = combos[i].aux;
      c.bias_grad_dtype = combos[i].bias_grad;
      c.gemm_m = 229;
      c.gemm_n = 67;
      c.gemm_k = 541;  // long reductions, where a varying summation order would show
      c.beta = i == 0 ? 0.0f : 0.5f;
      c.padded(3);
      c.seed = case_seed(name, index++);
      SCOPED_TRACE(c.describe());
      const CaseRun first = run_case(ctx, c);
      const CaseRun second = run_case(ctx, c);
      ASSERT_TRUE(first.ok && second.ok);
      expect_bitwise_equal("D", first.after.d, second.after.d);
      if (c.aux_is_output()) expect_bitwise_equal("aux", first.after.aux, second.after.aux);
      if (c.has_bias_grad()) {
        expect_bitwise_equal("bias_grad", first.after.bias_grad, second.after.bias_grad);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, BackendDeterminism, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

}  // namespace
}  // namespace epigemm_test
