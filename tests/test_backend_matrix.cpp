// The matrix of SPEC §5, for every backend: every structural epilogue (DEFAULT, BIAS, ACT,
// ACT_BIAS, ACT_AUX, ACT_AUX_BIAS, DACT, DACT_BGRAD, BGRADB, BGRADA) x every activation for the
// epilogues that have one (once for the others, which must ignore the description's activation)
// x every transa/transb x the dtype combinations (A/B in f32, f16, bf16; D in f32 or the input
// type; bias, aux and bias_grad dtypes cycled independently; TF32 opt-in; a reduced set for most
// (epilogue, activation) pairs, see full_matrix) x accumulate on/off x shapes with 1, odd primes,
// sizes that are not multiples of 8 or 16, padded leading dimensions, misaligned pointers,
// gemm_k = 0, gemm_m or gemm_n = 0, and a larger shape for part of the combinations.
//
// One test per (target, epilogue, activation, transa/transb), and for the (epilogue, activation)
// pairs of the reduced dtype set one per (target, epilogue, activation) that loops over the four
// transpositions; each loops over the dtype combinations and the shapes. Instantiated for
// reference, cpu, cuda, cublaslt, cutlass, auto on host memory and auto on device memory; a target that is
// not compiled in or cannot run here SKIPs with the reason.
//
// Degenerate sizes (docs/conventions.md): gemm_m = 0 or gemm_n = 0 writes nothing to the empty
// outputs, except bias_grad: DACT_BGRAD with gemm_n = 0 writes zeros (length gemm_m), BGRADA with
// gemm_n = 0 writes sum_p op(A)[i, p] (length gemm_m) and BGRADB with gemm_m = 0 writes
// sum_p op(B)[p, j] (length gemm_n). gemm_k = 0 gives acc = beta * D_old, then the epilogue.
// beta = 0 never reads D (D is NaN-poisoned then).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

constexpr epigemm_dtype_t F32 = EPIGEMM_DTYPE_F32, F16 = EPIGEMM_DTYPE_F16, BF16 = EPIGEMM_DTYPE_BF16;

// Every epilogue value of the header, by its structural name.
const epigemm_epilogue_t kEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS,         EPIGEMM_EPILOGUE_ACT,
    EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,     EPIGEMM_EPILOGUE_ACT_AUX_BIAS,
    EPIGEMM_EPILOGUE_DACT,    EPIGEMM_EPILOGUE_DACT_BGRAD,   EPIGEMM_EPILOGUE_BGRADB,
    EPIGEMM_EPILOGUE_BGRADA};
const epigemm_activation_t kActivations[] = {
    EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_GELU_ERF,
    EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU};

// The activations an epilogue is tested with: every one where it applies one; otherwise only
// the default (which it must ignore).
std::vector<epigemm_activation_t> activations_of(epigemm_epilogue_t e) {
  GemmCase c;
  c.epilogue = e;
  if (!c.has_activation()) return {c.activation};
  return std::vector<epigemm_activation_t>(std::begin(kActivations), std::end(kActivations));
}

struct Dtypes {
  epigemm_dtype_t ab, d, bias, aux, bias_grad;
  bool tf32;
};

// Transposition t = 0..3: transa = T when t >= 2, transb = T when t is odd.
epigemm_op_t transa_of(int t) { return t >= 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N; }
epigemm_op_t transb_of(int t) { return t % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N; }
constexpr int kAllTranspositions = -1;

// One test: a target, an (epilogue, activation), and one transposition or all four (the reduced
// set, see full_matrix: one process instead of four for its few cases).
struct MatrixParam {
  Target target;
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
  int transposition;  // 0..3, or kAllTranspositions
};

std::string transposition_str(int t) {
  return t == kAllTranspositions ? "NN,NT,TN,TT" : trans_str(transa_of(t), transb_of(t));
}

// Shown by gtest (and in ctest's test names) instead of the bytes of the struct.
void PrintTo(const MatrixParam& p, std::ostream* os) {
  *os << p.target.name() << " " << epilogue_with_activation_str(p.epilogue, p.activation) << " "
      << transposition_str(p.transposition);
}

// Whether an (epilogue, activation) is tested with the full set of dtype combinations and the
// two extra shapes on every transposition: the epilogues without an activation, and the four GELU
// epilogues (ACT_AUX, ACT_AUX_BIAS, DACT, DACT_BGRAD with gelu_tanh), where the handling of the
// side operands' dtypes is tested. Every other (epilogue, activation) -- ACT and ACT_BIAS with
// each activation, the aux epilogues with identity, gelu_erf, relu and silu -- takes the reduced
// set: its side operands go through the same code as those of the GELU epilogues (only the
// functor differs), and what it adds is the activation's numerics on every layout.
bool full_matrix(epigemm_epilogue_t e, epigemm_activation_t activation) {
  GemmCase c;
  c.epilogue = e;
  return !c.has_activation() || (activation == EPIGEMM_ACTIVATION_GELU_TANH && c.has_aux());
}

// The dtype combinations one (epilogue, activation, transposition t = 0..3) is tested with.
//
// Full set: the (A/B, D) pairs, each with bias, aux and bias_grad cycled through f32 / f16 / bf16
// (only the ones the epilogue uses vary, so no two combinations of an epilogue are the same), the
// pairs with every side operand in D's dtype, and fp32 with TF32 allowed: 21 combinations.
//
// Reduced set: two (A/B, D) pairs per transposition t, pairs[t] and pairs[(t + 2) mod 5], so that
// each of the five pairs meets the (epilogue, activation) on one or two of the four
// transpositions; the side operands in D's dtype for the pairs with D = A/B (the combinations a
// vendor's fused epilogue takes) and cycled for the two with fp32 D, so that bias, aux and
// bias_grad each still meet f32, f16 and bf16. Why reduced: on the 2-core CI machine the whole
// ctest run took 2.6x its wall time before activations (2.9x its CPU time) with all five pairs on
// every transposition, 1.9x (2.2x) with three, and 1.5x to 1.8x (1.7x to 1.8x) with these two and
// one test process instead of four; the full set for every (epilogue, activation) would give the
// matrix 5x its cases.
std::vector<Dtypes> dtype_combinations(epigemm_epilogue_t e, epigemm_activation_t activation, int t) {
  const bool uses_side = e != EPIGEMM_EPILOGUE_DEFAULT;
  const epigemm_dtype_t cycle[] = {F32, F16, BF16};
  const std::pair<epigemm_dtype_t, epigemm_dtype_t> pairs[] = {
      {F32, F32}, {F16, F16}, {F16, F32}, {BF16, BF16}, {BF16, F32}};
  std::vector<Dtypes> out;
  if (!full_matrix(e, activation)) {
    for (const int step : {0, 2}) {
      const size_t k = size_t(t + step) % std::size(pairs);
      const epigemm_dtype_t ab = pairs[k].first, d = pairs[k].second;
      if (ab == d) {
        out.push_back(Dtypes{ab, d, d, d, d, false});
      } else {
        const size_t r = k % 3;
        out.push_back(Dtypes{ab, d, cycle[r], cycle[(r + 1) % 3], cycle[(r + 2) % 3], false});
      }
    }
    return out;
  }
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
  for (epigemm_epilogue_t e : kEpilogues) {
    for (epigemm_activation_t a : activations_of(e)) {
      if (!full_matrix(e, a)) {
        params.push_back(MatrixParam{target, e, a, kAllTranspositions});
        continue;
      }
      for (int t = 0; t < 4; ++t) params.push_back(MatrixParam{target, e, a, t});
    }
  }
  return params;
}

// "ACT_AUX_BIAS_gelu_tanh_NT", "BGRADB_NN", "ACT_relu" (all four transpositions).
std::string param_name(const ::testing::TestParamInfo<MatrixParam>& info) {
  const MatrixParam& p = info.param;
  GemmCase c;
  c.epilogue = p.epilogue;
  const std::string activation = c.has_activation() ? "_" + activation_str(p.activation) : "";
  const std::string trans = p.transposition == kAllTranspositions ? "" : "_" + transposition_str(p.transposition);
  return epilogue_str(p.epilogue) + activation + trans;
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
    {31, 0, 11, 1.0f, 0.5f, 0, false, true},       // gemm_n = 0 (DACT_BGRAD zeros, BGRADA sums)
    {0, 0, 0, 1.0f, 0.0f, 0, false, false},        // nothing at all
};

// Every dtype combination x every shape of one transposition t; `index` numbers the cases of the
// test for their seeds.
void run_transposition(epigemm_context_t ctx, const MatrixParam& p, int t, const std::string& name,
                       uint64_t* index) {
  const std::vector<Dtypes> combos = dtype_combinations(p.epilogue, p.activation, t);
  const bool full = full_matrix(p.epilogue, p.activation);
  // The larger shape for one dtype combination per test, a different one per transpose,
  // epilogue and activation (its cost is the CPU oracle's, so not for all of them); for the
  // reduced set on one transposition of the four.
  const size_t large = size_t(t * 5 + int(p.epilogue) * 3 + int(p.activation) * 2) % combos.size();
  const bool with_large = full || t == (int(p.epilogue) + int(p.activation)) % 4;
  for (size_t i = 0; i < combos.size(); ++i) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    if (i == large && with_large) {
      // Past one tile in every direction; accumulating, padded and misaligned on NT and TN.
      const bool odd = t == 1 || t == 2;
      shapes.push_back(Shape{300, 257, 259, odd ? 0.5f : 1.0f, odd ? 0.5f : 0.0f, odd ? 7 : 0, odd, false});
    }
    if (full && i == 0 && t == 2) {
      // A layer fprop's layout (op(A) = A^T, op(B) = B) with few columns and long gemm_m, gemm_k,
      // fp32, alpha = 1, beta = 0: the cpu backend runs it through oneDNN's matmul primitive, not
      // dnnl_sgemm (onednn_overwrite_for_shape; test_cpu_backend.cpp checks that it does).
      shapes.push_back(Shape{1024, 24, 1040, 1.0f, 0.0f, 3, true, false});
    }
    for (const Shape& shape : shapes) {
      GemmCase c;
      c.target = p.target;
      c.epilogue = p.epilogue;
      // An epilogue without an activation must ignore the description's: it gets a different one
      // per dtype combination and transposition.
      c.activation = c.has_activation() ? p.activation : kActivations[(i + size_t(t)) % std::size(kActivations)];
      c.transa = transa_of(t);
      c.transb = transb_of(t);
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
      c.seed = case_seed(name, (*index)++);
      run_and_check(ctx, c);
      if (::testing::Test::HasFailure()) return;  // the first failing case says enough
    }
  }
}

class BackendMatrix : public ::testing::TestWithParam<MatrixParam> {};

// One test per (target, epilogue, activation, transposition), or per (target, epilogue,
// activation) for the reduced set: every dtype combination x every shape.
TEST_P(BackendMatrix, DtypesAndShapes) {
  const MatrixParam& p = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, p.target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (int t = 0; t < 4; ++t) {
    if (p.transposition != kAllTranspositions && t != p.transposition) continue;
    run_transposition(ctx, p, t, name, &index);
    if (HasFailure()) return;
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
EPIGEMM_MATRIX_FOR(cutlass, EPIGEMM_BACKEND_CUTLASS, EPIGEMM_MEMORY_DEVICE);
EPIGEMM_MATRIX_FOR(auto_host, EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST);
EPIGEMM_MATRIX_FOR(auto_device, EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_DEVICE);

// ---- determinism (SPEC §4): the same inputs twice on the same backend, bitwise the same -------

class BackendDeterminism : public ::testing::TestWithParam<Target> {};

// Every epilogue with each of its activations, twice each on the same inputs: D, aux and
// bias_grad bitwise the same. The epilogues without an activation in both dtype combinations, the
// others in one, alternating (an activation's evaluation order does not depend on the dtypes).
TEST_P(BackendDeterminism, SameInputsSameBits) {
  const Target& target = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const Dtypes combos[] = {{F32, F32, F32, F32, F32, false}, {BF16, BF16, F16, BF16, F32, false}};
  struct Run {
    epigemm_epilogue_t epilogue;
    epigemm_activation_t activation;
    size_t combo;
  };
  std::vector<Run> runs;
  for (epigemm_epilogue_t e : kEpilogues) {
    const std::vector<epigemm_activation_t> activations = activations_of(e);
    for (size_t a = 0; a < activations.size(); ++a) {
      if (activations.size() == 1) {
        runs.push_back({e, activations[a], 0});
        runs.push_back({e, activations[a], 1});
      } else {
        runs.push_back({e, activations[a], (a + size_t(e)) % 2});
      }
    }
  }
  uint64_t index = 0;
  for (const Run& run : runs) {
    const size_t i = run.combo;
    GemmCase c;
    c.target = target;
    c.epilogue = run.epilogue;
    c.activation = run.activation;
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

INSTANTIATE_TEST_SUITE_P(AllTargets, BackendDeterminism, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

// Half the spacing of a 16-bit dtype's values at x: the largest error of rounding x once.
double half_spacing(epigemm_dtype_t dtype, double x) {
  const int significand_bits = dtype == BF16 ? 8 : 11;  // the implicit bit included
  const int min_exponent = dtype == BF16 ? -126 : -14;  // of the normal numbers
  const int exponent = std::max(std::ilogb(std::max(std::fabs(x), 1e-300)), min_exponent);
  return std::ldexp(1.0, exponent - significand_bits);
}

class RoundedOnce : public ::testing::TestWithParam<Target> {};

// A 16-bit D is the epilogue's result rounded once (docs/conventions.md, "Epilogues": acc is kept
// in fp32): every element within half a spacing of D's dtype of the exact value, plus what the
// fp32 sum of k + 2 terms can add (its magnitude times (k + 2) 2^-24), checked element by element,
// also where beta D_old or the bias cancels the product (the matrix's tolerance, relative to the
// magnitude, lets one extra rounding through there). With bf16 or f16 operands the products are
// exact in fp32. The paths it guards: a GEMM that adds beta D_old or a bias through its C (cuBLAS
// and cuBLASLt round alpha acc to a 16-bit C's dtype first: two roundings, up to 21 ulps of the
// result where the sum cancels).
TEST_P(RoundedOnce, SixteenBitDIsTheResultRoundedOnce) {
  const Target& target = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  struct Call {
    epigemm_epilogue_t epilogue;
    float beta;
  };
  const Call calls[] = {{EPIGEMM_EPILOGUE_BIAS, 0.0f},    // D = acc + bias
                        {EPIGEMM_EPILOGUE_DEFAULT, 1.0f},  // accumulate: D = acc + D_old
                        {EPIGEMM_EPILOGUE_BIAS, 1.0f},
                        {EPIGEMM_EPILOGUE_BGRADB, 1.0f}};  // a weight gradient accumulated
  const int64_t shapes[][3] = {{40, 48, 64}, {192, 160, 256}};
  uint64_t index = 0;
  for (const epigemm_dtype_t dtype : {BF16, F16}) {
    for (const Call& call : calls) {
      for (const auto& shape : shapes) {
        GemmCase c;
        c.target = target;
        c.epilogue = call.epilogue;
        c.transa = EPIGEMM_OP_T;
        c.ab_dtype = c.d_dtype = c.bias_dtype = c.bias_grad_dtype = dtype;
        c.beta = call.beta;
        c.gemm_m = shape[0];
        c.gemm_n = shape[1];
        c.gemm_k = shape[2];
        c.seed = case_seed(name, index++);
        SCOPED_TRACE(c.describe());
        const CaseRun run = run_case(ctx, c);
        ASSERT_TRUE(run.ok);
        const Expected expected = naive_expected(c, run.before);
        int64_t off = 0;
        double worst = 0;
        for (int64_t j = 0; j < c.gemm_n; ++j) {
          for (int64_t i = 0; i < c.gemm_m; ++i) {
            const size_t e = size_t(i + j * c.gemm_m);
            const double exact = expected.d[e];
            const double bound = half_spacing(dtype, exact) +
                                 double(c.gemm_k + 2) * std::ldexp(1.0, -24) * expected.d_magnitude[e];
            const double ratio = std::fabs(run.after.d.get(i, j) - exact) / bound;
            worst = std::max(worst, ratio);
            if (ratio > 1.0) ++off;
          }
        }
        EXPECT_EQ(off, 0) << off << " of " << c.gemm_m * c.gemm_n
                          << " elements are farther from the exact value than one rounding; worst "
                          << worst << " times the bound";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, RoundedOnce, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

}  // namespace
}  // namespace epigemm_test
