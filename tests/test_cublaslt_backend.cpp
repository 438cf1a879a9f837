// Tests of the `cublaslt` backend (cuBLASLt's fused epilogues) beside the full matrix of
// test_backend_matrix.cpp, which already runs every case on it:
//   - on the host (no GPU needed): the alignment it declares to cuBLASLt's heuristic per operand
//     and keys its plans by (cublaslt_alignment.hpp);
//   - the calls it runs since it takes the alignment from the call: a layer with an odd
//     out_features (D's leading dimension odd) through every forward epilogue cuBLASLt has, and
//     leading dimensions and pointers that are not multiples of 16 bytes, each asked of
//     `cublaslt` by name and compared with the reference backend;
//   - one case and one alignment class after another in one context, and the same calls in a
//     fresh context: an algorithm chosen for aligned operands is not reused for less aligned ones,
//     and the same call gives bitwise the same result whichever alignment came first;
//   - split-K partial sums added in fp32, never in D's 16-bit type (against the cuda backend on a
//     long-gemm_k data gradient);
//   - each rule it still declines: asked by name it answers NOT_SUPPORTED with the rule's reason,
//     and under auto the call runs on another backend, which says why, and matches the reference.
// Each GPU test prints SKIP where the cublaslt backend cannot run (no CUDA build, no GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "backends/cublaslt/cublaslt_alignment.hpp"
#include "epigemm/epigemm.h"
#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

// ---- the alignments on the host ---------------------------------------------------------------

TEST(CublasLtAlignment, LargestPowerOfTwoUpTo16) {
  EXPECT_EQ(epigemm::lt_alignment_of(0), 16u);  // a null pointer, or nothing to divide
  EXPECT_EQ(epigemm::lt_alignment_of(1), 1u);
  EXPECT_EQ(epigemm::lt_alignment_of(0x10002), 2u);
  EXPECT_EQ(epigemm::lt_alignment_of(0x10004), 4u);
  EXPECT_EQ(epigemm::lt_alignment_of(24), 8u);
  EXPECT_EQ(epigemm::lt_alignment_of(48), 16u);
  EXPECT_EQ(epigemm::lt_alignment_of(256), 16u);  // capped: more than 16 is not asked for
  EXPECT_EQ(epigemm::lt_alignment_of(uint64_t(1) << 44), 16u);
}

// A matrix's alignment is its address's and its leading dimension's in bytes, whichever is less.
TEST(CublasLtAlignment, MatrixTakesItsLeadingDimensionInBytes) {
  epigemm::Matrix m;
  m.data = reinterpret_cast<void*>(uintptr_t(0x7f0000000000));
  m.dtype = EPIGEMM_DTYPE_BF16;
  m.rows = 229;
  m.cols = 64;
  m.ld = 229;  // an odd out_features: 458 bytes
  EXPECT_EQ(epigemm::lt_matrix_alignment(m), 2u);
  m.ld = 232;  // 464 bytes
  EXPECT_EQ(epigemm::lt_matrix_alignment(m), 16u);
  m.ld = 236;  // 472 bytes
  EXPECT_EQ(epigemm::lt_matrix_alignment(m), 8u);
  m.dtype = EPIGEMM_DTYPE_F32;
  m.ld = 229;  // 916 bytes
  EXPECT_EQ(epigemm::lt_matrix_alignment(m), 4u);
  m.dtype = EPIGEMM_DTYPE_BF16;
  m.ld = 232;
  m.data = reinterpret_cast<void*>(uintptr_t(0x7f0000000002));  // one element off
  EXPECT_EQ(epigemm::lt_matrix_alignment(m), 2u);
}

// The plan key's alignments: calls that differ only in where their operands lie get different
// keys when an alignment class (up to 16 bytes) differs, the same key otherwise.
TEST(CublasLtAlignment, EveryOperandsClassIsInThePlanKey) {
  epigemm::GemmCall call;
  call.gemm_m = 64;
  call.gemm_n = 32;
  call.gemm_k = 16;
  auto matrix = [](uintptr_t address, int64_t rows, int64_t cols) {
    epigemm::Matrix m;
    m.data = reinterpret_cast<void*>(address);
    m.dtype = EPIGEMM_DTYPE_BF16;
    m.rows = rows;
    m.cols = cols;
    m.ld = rows;
    m.memory = EPIGEMM_MEMORY_DEVICE;
    return m;
  };
  call.a = matrix(0x100000, 64, 16);
  call.b = matrix(0x200000, 16, 32);
  call.d = matrix(0x300000, 64, 32);
  call.aux = matrix(0x400000, 64, 32);
  call.has_aux = true;
  call.bias.data = reinterpret_cast<void*>(uintptr_t(0x500000));
  call.bias.dtype = EPIGEMM_DTYPE_BF16;
  call.bias.length = 64;
  call.has_bias = true;
  const epigemm::LtAlignments aligned = epigemm::lt_alignments(call);
  EXPECT_EQ(aligned, (epigemm::LtAlignments{16, 16, 16, 16, 16}));

  epigemm::GemmCall moved = call;  // every operand 32 bytes further: still 16-byte aligned
  moved.a.data = static_cast<char*>(moved.a.data) + 32;
  moved.b.data = static_cast<char*>(moved.b.data) + 32;
  moved.d.data = static_cast<char*>(moved.d.data) + 32;
  moved.aux.data = static_cast<char*>(moved.aux.data) + 32;
  moved.bias.data = static_cast<char*>(moved.bias.data) + 32;
  EXPECT_EQ(epigemm::lt_alignments(moved), aligned);

  // One operand at a time one element off: only its class changes.
  using Shift = void (*)(epigemm::GemmCall&);
  const Shift shifts[] = {
      [](epigemm::GemmCall& c) { c.a.data = static_cast<char*>(c.a.data) + 2; },
      [](epigemm::GemmCall& c) { c.b.data = static_cast<char*>(c.b.data) + 2; },
      [](epigemm::GemmCall& c) { c.d.data = static_cast<char*>(c.d.data) + 2; },
      [](epigemm::GemmCall& c) { c.bias.data = static_cast<char*>(c.bias.data) + 2; },
      [](epigemm::GemmCall& c) { c.aux.data = static_cast<char*>(c.aux.data) + 2; },
  };
  for (const Shift shift : shifts) {
    epigemm::GemmCall off = call;
    shift(off);
    const epigemm::LtAlignments classes = epigemm::lt_alignments(off);
    EXPECT_NE(classes, aligned);
    const uint32_t twos = uint32_t(classes.a == 2) + uint32_t(classes.b == 2) + uint32_t(classes.d == 2) +
                          uint32_t(classes.bias == 2) + uint32_t(classes.aux == 2);
    EXPECT_EQ(twos, 1u);
  }

  // The bias gradient takes the bias's place (cuBLASLt has one bias pointer); absent operands 0.
  epigemm::GemmCall bgradb = call;
  bgradb.has_bias = false;
  bgradb.has_aux = false;
  bgradb.has_bias_grad = true;
  bgradb.bias_grad.data = reinterpret_cast<void*>(uintptr_t(0x600008));
  bgradb.bias_grad.dtype = EPIGEMM_DTYPE_BF16;
  EXPECT_EQ(epigemm::lt_alignments(bgradb), (epigemm::LtAlignments{16, 16, 16, 8, 0}));
}

// What the heuristic is shown for the bias and aux pointers: an address of exactly the class,
// within 32 bytes of the call's own.
TEST(CublasLtAlignment, RepresentativeAddressHasExactlyTheClass) {
  const uintptr_t addresses[] = {0, 2, 0x7f0000000000, 0x7f0000000010, 0x7f0000000026, 0x7f00000000fe};
  for (const uintptr_t address : addresses) {
    for (uint32_t alignment = 1; alignment <= 16; alignment *= 2) {
      const void* shown = epigemm::lt_with_alignment(reinterpret_cast<const void*>(address), alignment);
      const uintptr_t value = reinterpret_cast<uintptr_t>(shown);
      EXPECT_EQ(epigemm::lt_alignment_of(value), alignment) << std::hex << address;
      EXPECT_NE(value % (2 * alignment), 0u) << "exactly " << alignment << ", not more";
      const uintptr_t distance = value > address ? value - address : address - value;
      EXPECT_LT(distance, 32u) << std::hex << address;
    }
  }
}

#ifdef EPIGEMM_TESTS_WITH_CUDA

const Target kCublasLt{EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_MEMORY_DEVICE};
const Target kAutoDevice{EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_DEVICE};

struct Reported {
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
  std::string reason;
};
Reported last_backend(epigemm_context_t ctx) {
  Reported r;
  const char* reason = nullptr;
  EXPECT_EQ(epigemm_context_last_backend(ctx, &r.backend, &reason), EPIGEMM_STATUS_SUCCESS);
  r.reason = reason ? reason : "";
  return r;
}

// What `cublaslt`, asked by name, answers for a case before anything runs: the workspace query's
// status and, when it declines, its reason. `shift_b` moves B's device pointer by that many bytes
// (only this query sees it; nothing is run at such an address).
struct Answer {
  epigemm_status_t status = EPIGEMM_STATUS_SUCCESS;
  std::string message;
};
Answer ask_cublaslt(epigemm_context_t ctx, const GemmCase& c, size_t shift_b = 0) {
  Operands ops = Operands::make(c);
  ops.upload(c);
  OperandViews v = OperandViews::of(c, ops, EPIGEMM_MEMORY_DEVICE);
  v.b.data = static_cast<char*>(v.b.data) + shift_b;
  Desc desc = make_desc(c, v, EPIGEMM_BACKEND_CUBLASLT);
  size_t bytes = 0;
  Answer answer;
  answer.status = epigemm_gemm_workspace_size(ctx, desc.get(), &v.a, &v.b, &v.d, &bytes);
  if (answer.status != EPIGEMM_STATUS_SUCCESS) answer.message = epigemm_context_last_error(ctx);
  return answer;
}

// The reason every decline of cuBLASLt's heuristic carries (cublaslt_backend.cpp).
const char kNoAlgorithm[] = "cuBLASLt has no algorithm for";

// A bf16 case in the layout of a pass (fprop TN, dgrad NN, wgrad NT), operands in D's dtype.
GemmCase lt_case(epigemm_epilogue_t epilogue, epigemm_activation_t activation, int64_t m, int64_t n,
                 int64_t k, const std::string& name, uint64_t index) {
  GemmCase c;
  c.target = kCublasLt;
  c.epilogue = epilogue;
  c.activation = activation;
  const bool dgrad = epilogue == EPIGEMM_EPILOGUE_DACT || epilogue == EPIGEMM_EPILOGUE_DACT_BGRAD;
  const bool wgrad = epilogue == EPIGEMM_EPILOGUE_BGRADB || epilogue == EPIGEMM_EPILOGUE_BGRADA;
  c.transa = dgrad || wgrad ? EPIGEMM_OP_N : EPIGEMM_OP_T;
  c.transb = wgrad ? EPIGEMM_OP_T : EPIGEMM_OP_N;
  c.ab_dtype = c.d_dtype = c.bias_dtype = c.aux_dtype = c.bias_grad_dtype = EPIGEMM_DTYPE_BF16;
  c.gemm_m = m;
  c.gemm_n = n;
  c.gemm_k = k;
  c.seed = case_seed(name, index);
  return c;
}

// The smallest multiple of 8 >= x: an aux leading dimension cuBLASLt accepts.
int64_t round_up_8(int64_t x) { return (x + 7) / 8 * 8; }

// The forward epilogues cuBLASLt computes with our meaning (cublaslt_epilogue.hpp).
struct Forward {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
};
const Forward kForwardEpilogues[] = {
    {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_TANH},
    {EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_RELU},
    {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU},
};

// A small layer whose out_features is odd (fprop: gemm_m = out_features = D's leading dimension,
// 229 bf16 elements = 458 bytes): `cublaslt`, asked by name, runs every forward epilogue cuBLASLt
// has, and matches the reference. The aux (the pre-activation, [tokens, out_features]) has its row
// stride padded to a multiple of 8, which cuBLASLt requires (the odd one is declined: see
// DeclinesOnlyWhatCuBlasLtCannotRun). Under auto the backend no longer declines these calls.
TEST(CublasLtBackend, OddOutFeaturesRunsEveryForwardEpilogue) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCublasLt);
  const int64_t tokens = 64, in_features = 96, out_features = 229;
  uint64_t index = 0;
  for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (const Forward& f : kForwardEpilogues) {
      GemmCase c = lt_case(f.epilogue, f.activation, out_features, tokens, in_features, "lt_odd_out", index++);
      c.ab_dtype = c.d_dtype = c.bias_dtype = c.aux_dtype = dtype;
      if (c.has_aux()) c.ldaux = round_up_8(out_features);
      SCOPED_TRACE(c.describe());
      const CaseRun run = run_case(ctx, c);
      EXPECT_FALSE(run.declined) << "cublaslt declined a call cuBLASLt runs";
      ASSERT_TRUE(run.ok);
      EXPECT_EQ(run.ran, EPIGEMM_BACKEND_CUBLASLT);
      EXPECT_EQ(last_backend(ctx).reason, "requested: cublaslt");
      check_case(ctx, c, run);

      GemmCase under_auto = c;
      under_auto.target = kAutoDevice;
      const CaseRun automatic = run_case(ctx, under_auto);
      ASSERT_TRUE(automatic.ok);
      const Reported reported = last_backend(ctx);
      EXPECT_EQ(reported.reason.find("cublaslt declined"), std::string::npos) << reported.reason;
      check_case(ctx, under_auto, automatic);
    }
  }
}

// Leading dimensions and pointers that are not multiples of 16 bytes, through every epilogue
// cuBLASLt has, asked of `cublaslt` by name. Strict for DEFAULT (cuBLAS's own plain GEMM, which
// takes any leading dimension and element-aligned pointers, runs on cuBLASLt's kernels);
// elsewhere a decline is accepted only when it is the heuristic's (no algorithm for these
// alignments), never one of the backend's own rules. Prints which cases the heuristic declined.
TEST(CublasLtBackend, LeadingDimensionsAndPointersOffSixteenBytes) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCublasLt);
  struct Layout {
    const char* name;
    int64_t pad;      // every leading dimension padded by an odd amount (0: default lds)
    bool misaligned;  // every pointer one element off a 256-byte boundary
  };
  const Layout layouts[] = {{"odd leading dimensions", 3, false},
                            {"pointers one element off", 0, true},
                            {"both", 1, true}};
  struct Epilogue {
    epigemm_epilogue_t epilogue;
    epigemm_activation_t activation;
    bool known_to_run;
  };
  const Epilogue epilogues[] = {
      {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_GELU_TANH, true},
      {EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, false},
      {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, false},
      {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, false},
      {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, false},
      {EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_TANH, false},
      {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_TANH, false},
      {EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_ACTIVATION_IDENTITY, false},
      {EPIGEMM_EPILOGUE_BGRADA, EPIGEMM_ACTIVATION_IDENTITY, false},
  };
  uint64_t index = 0;
  int ran = 0, total = 0;
  std::vector<std::string> heuristic_declined;
  for (const Layout& layout : layouts) {
    for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F32}) {
      for (const Epilogue& e : epilogues) {
        // declined by rule: fp32 GELU and dGELU
        if (e.activation == EPIGEMM_ACTIVATION_GELU_TANH && dtype == EPIGEMM_DTYPE_F32) continue;
        GemmCase c = lt_case(e.epilogue, e.activation, 181, 77, 53, "lt_off16", index++);
        c.ab_dtype = c.d_dtype = c.bias_dtype = c.aux_dtype = c.bias_grad_dtype = dtype;
        if (layout.pad > 0) c.padded(layout.pad);
        c.misaligned = layout.misaligned;
        if (c.has_aux()) c.ldaux = round_up_8(c.gemm_m) + 8;  // cuBLASLt's rule for the aux
        SCOPED_TRACE(std::string(layout.name) + ": " + c.describe());
        const Answer answer = ask_cublaslt(ctx, c);
        ++total;
        if (answer.status != EPIGEMM_STATUS_SUCCESS) {
          EXPECT_EQ(answer.status, EPIGEMM_STATUS_NOT_SUPPORTED) << answer.message;
          EXPECT_NE(answer.message.find(kNoAlgorithm), std::string::npos)
              << "declined by a rule of the backend, not by cuBLASLt: " << answer.message;
          EXPECT_FALSE(e.known_to_run) << answer.message;
          heuristic_declined.push_back(std::string(layout.name) + ", " + dtype_str(dtype) + ", " +
                                       epilogue_with_activation_str(e.epilogue, e.activation));
        } else {
          ++ran;
        }
        const CaseRun run = run_case(ctx, c);  // under auto where declined
        ASSERT_TRUE(run.ok);
        EXPECT_EQ(run.declined, answer.status != EPIGEMM_STATUS_SUCCESS);
        check_case(ctx, c, run);
      }
    }
  }
  std::cout << "[ cublaslt ] ran " << ran << " of " << total
            << " cases with leading dimensions or pointers off 16 bytes; its heuristic had no algorithm for "
            << heuristic_declined.size() << (heuristic_declined.empty() ? "" : ":") << "\n";
  for (const std::string& name : heuristic_declined) std::cout << "[ cublaslt ]   " << name << "\n";
}

// One case in three alignment classes, one after another in one context (aligned, pointers one
// element off, aligned again), and the less aligned one first in a fresh context. Each result
// matches the reference, each class gets its own plan (an algorithm chosen for 16-byte operands
// would fault or be refused on 2-byte ones), and the same call gives bitwise the same outputs
// whichever class the context saw first.
TEST(CublasLtBackend, PlanIsChosenPerAlignment) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCublasLt);
  const Forward cases[] = {{EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH},
                           {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_TANH},
                           {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_TANH},
                           {EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_ACTIVATION_IDENTITY}};
  uint64_t index = 0;
  for (const Forward& f : cases) {
    GemmCase aligned = lt_case(f.epilogue, f.activation, 256, 192, 128, "lt_plan_alignment", index++);
    GemmCase off = aligned;
    off.misaligned = true;  // 2-byte aligned bf16 pointers; the same shapes and lds
    SCOPED_TRACE(aligned.describe());
    const CaseRun first = run_case(ctx, aligned);
    ASSERT_TRUE(first.ok);
    EXPECT_FALSE(first.declined);
    check_case(ctx, aligned, first);
    const Answer off_answer = ask_cublaslt(ctx, off);
    if (off_answer.status != EPIGEMM_STATUS_SUCCESS) {
      EXPECT_NE(off_answer.message.find(kNoAlgorithm), std::string::npos) << off_answer.message;
    }
    const CaseRun second = run_case(ctx, off);
    ASSERT_TRUE(second.ok);
    check_case(ctx, off, second);
    const CaseRun third = run_case(ctx, aligned);
    ASSERT_TRUE(third.ok);
    expect_bitwise_equal("D (aligned, after the unaligned call)", first.after.d, third.after.d);

    Context fresh;  // the unaligned call first: the same algorithm per class, so the same bits
    const CaseRun fresh_off = run_case(fresh, off);
    ASSERT_TRUE(fresh_off.ok);
    expect_bitwise_equal("D (unaligned, fresh context)", second.after.d, fresh_off.after.d);
    const CaseRun fresh_aligned = run_case(fresh, aligned);
    ASSERT_TRUE(fresh_aligned.ok);
    expect_bitwise_equal("D (aligned, fresh context)", first.after.d, fresh_aligned.after.d);
    if (aligned.has_bias_grad()) {
      expect_bitwise_equal("bias_grad (aligned, fresh context)", first.after.bias_grad,
                           fresh_aligned.after.bias_grad);
    }
  }
}

// Each rule the backend keeps (cublaslt_backend.cpp, docs/dispatch.md): asked by name it declines
// with the rule's reason; under auto the call runs elsewhere, the reported reason says that
// cublaslt declined and why, and the result matches the reference.
TEST(CublasLtBackend, DeclinesOnlyWhatCuBlasLtCannotRun) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCublasLt);
  struct Rule {
    const char* reason;  // a fragment of the backend's reason
    GemmCase c;
  };
  std::vector<Rule> rules;
  uint64_t index = 0;
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, 64, 32, 0, "lt_rules", index++);
    rules.push_back({"an empty dimension", c});
  }
  for (const epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_EPILOGUE_ACT_AUX}) {
    // The odd-out_features layer with its pre-activation at the default (odd) row stride.
    GemmCase c = lt_case(e, EPIGEMM_ACTIVATION_GELU_TANH, 229, 64, 96, "lt_rules", index++);
    rules.push_back({"is not divisible by 8", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_TANH, 96, 64, 229, "lt_rules", index++);
    c.ldaux = 100;  // dgrad's saved pre-activation, row stride 4 mod 8
    rules.push_back({"is not divisible by 8", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, 128, 64, 32, "lt_rules", index++);
    c.bias_dtype = EPIGEMM_DTYPE_F32;
    rules.push_back({"the bias dtype differs from D's", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_ACTIVATION_IDENTITY, 128, 64, 32, "lt_rules", index++);
    c.bias_grad_dtype = EPIGEMM_DTYPE_F32;
    rules.push_back({"the bias_grad dtype differs from D's", c});
  }
  {
    // alpha = 0 leaves the product out; cuBLASLt's BGRADB multiplied a NaN product by 0
    // (Degenerate.AlphaZeroLeavesTheProductOut has the NaN operands).
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_BGRADB, EPIGEMM_ACTIVATION_IDENTITY, 128, 64, 32, "lt_rules", index++);
    c.alpha = 0.0f;
    rules.push_back({"alpha = 0 with BGRADB", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_GELU_TANH, 128, 64, 32, "lt_rules", index++);
    c.aux_dtype = EPIGEMM_DTYPE_F32;
    rules.push_back({"the aux dtype differs from D's", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_TANH, 128, 64, 32, "lt_rules", index++);
    c.ab_dtype = c.d_dtype = c.aux_dtype = EPIGEMM_DTYPE_F32;
    rules.push_back({"fp32 dGELU", c});
  }
  {
    GemmCase c = lt_case(EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_GELU_TANH, 128, 64, 32, "lt_rules", index++);
    c.ab_dtype = c.d_dtype = EPIGEMM_DTYPE_F32;
    rules.push_back({"fp32 GELU", c});
  }
  for (const Rule& rule : rules) {
    SCOPED_TRACE(rule.c.describe());
    const Answer answer = ask_cublaslt(ctx, rule.c);
    EXPECT_EQ(answer.status, EPIGEMM_STATUS_NOT_SUPPORTED);
    EXPECT_NE(answer.message.find(rule.reason), std::string::npos) << answer.message;

    GemmCase under_auto = rule.c;
    under_auto.target = kAutoDevice;
    const CaseRun run = run_case(ctx, under_auto);
    ASSERT_TRUE(run.ok);
    EXPECT_NE(run.ran, EPIGEMM_BACKEND_CUBLASLT);
    // auto asks the backends in the order of their priority and stops at the first that runs the
    // call: where cublaslt was asked, the reason names its rule.
    const Reported reported = last_backend(ctx);
    if (reported.reason.find("cublaslt declined (") != std::string::npos) {
      EXPECT_NE(reported.reason.find(rule.reason), std::string::npos) << reported.reason;
    }
    check_case(ctx, under_auto, run);
  }

  // An operand off its element size (a byte offset into a buffer): declined, naming it. Only the
  // question is asked; nothing runs at such an address.
  GemmCase c = lt_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, 128, 64, 32, "lt_rules", index++);
  const Answer answer = ask_cublaslt(ctx, c, /*shift_b=*/1);
  EXPECT_EQ(answer.status, EPIGEMM_STATUS_NOT_SUPPORTED);
  EXPECT_NE(answer.message.find("B (bf16) is at 0x"), std::string::npos) << answer.message;
  EXPECT_NE(answer.message.find("not a multiple of its element size 2"), std::string::npos) << answer.message;
}

// The split-K reductions stay in fp32 (docs/conventions.md, "Data types": every reduction at
// least fp32). On a data gradient with few output tiles and a long gemm_k (the dgrad of a layer of
// 3001 tokens, 1022 in and 4094 out features, in bf16), cuBLASLt's heuristic splits gemm_k; left
// free, it adds the partial sums in D's bf16 (INPLACE), rounding an element once per partial sum:
// on the H200 527 k of the 3.07 M elements came out more than one bf16 ulp from the fp32 result
// (dev/cuda/cublaslt_reduction_lab.cu). The result is compared with the cuda backend's (cuBLAS
// with reduced-precision reductions disallowed, one rounding). Two results each rounded once from
// fp32 sums differ by at most one bf16 ulp, except where the sums themselves differ: near zero,
// where 4094 terms of magnitude ~1 cancel and two summation orders differ in their last fp32 bits.
// That is what the absolute term allows: 1/8 of a bf16 ulp at the result's root mean square, far
// above fp32 ordering differences (~1e-6 of it) and below what one bf16 rounding of a partial sum
// of that size adds (half an ulp).
TEST(CublasLtBackend, SplitKSumsAreReducedInFp32) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCublasLt);
  GemmCase c = lt_case(EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_GELU_TANH, 1022, 3001, 4094, "lt_split_k", 0);
  c.transa = c.transb = EPIGEMM_OP_N;  // dgrad: dX^T = W^T dY^T, both as stored
  SCOPED_TRACE(c.describe());
  const CaseRun lt = run_case(ctx, c);
  ASSERT_TRUE(lt.ok);
  ASSERT_EQ(lt.ran, EPIGEMM_BACKEND_CUBLASLT);
  GemmCase on_cuda = c;
  on_cuda.target = Target{EPIGEMM_BACKEND_CUDA, EPIGEMM_MEMORY_DEVICE};
  const CaseRun cuda = run_case(ctx, on_cuda);
  ASSERT_TRUE(cuda.ok);
  // One bf16 ulp at magnitude x (8 significant bits).
  auto bf16_ulp = [](double x) { return std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(x), 1e-30)) - 7); };
  double sum_of_squares = 0;
  for (int64_t j = 0; j < c.gemm_n; ++j) {
    for (int64_t i = 0; i < c.gemm_m; ++i) sum_of_squares += cuda.after.d.get(i, j) * cuda.after.d.get(i, j);
  }
  const double rms = std::sqrt(sum_of_squares / double(c.gemm_m * c.gemm_n));
  const double near_zero_allowance = bf16_ulp(rms) / 8;
  int64_t over = 0;
  double worst_ulps = 0;
  for (int64_t j = 0; j < c.gemm_n; ++j) {
    for (int64_t i = 0; i < c.gemm_m; ++i) {
      const double x = lt.after.d.get(i, j), y = cuda.after.d.get(i, j);
      const double ulp = bf16_ulp(std::fmax(std::fabs(x), std::fabs(y)));
      worst_ulps = std::fmax(worst_ulps, std::fabs(x - y) / ulp);
      if (!(std::fabs(x - y) <= ulp + near_zero_allowance)) ++over;
    }
  }
  EXPECT_EQ(over, 0) << "elements of cublaslt's D more than one bf16 ulp (plus " << near_zero_allowance
                     << " near zero) from cuda's; worst " << worst_ulps << " ulps; rms " << rms;
}

#else  // !EPIGEMM_TESTS_WITH_CUDA

TEST(CublasLtBackend, OddOutFeaturesRunsEveryForwardEpilogue) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cublaslt backend is not compiled in)";
}
TEST(CublasLtBackend, LeadingDimensionsAndPointersOffSixteenBytes) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cublaslt backend is not compiled in)";
}
TEST(CublasLtBackend, PlanIsChosenPerAlignment) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cublaslt backend is not compiled in)";
}
TEST(CublasLtBackend, DeclinesOnlyWhatCuBlasLtCannotRun) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cublaslt backend is not compiled in)";
}
TEST(CublasLtBackend, SplitKSumsAreReducedInFp32) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cublaslt backend is not compiled in)";
}

#endif  // EPIGEMM_TESTS_WITH_CUDA

}  // namespace
}  // namespace epigemm_test
