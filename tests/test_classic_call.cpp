// The classic TransformerEngine-style call (epigemm_classic_gemm) and the layer-level calls
// (epigemm_linear_fprop / dgrad / wgrad), on every target.
//
// Classic call: every row of SPEC §2's decision table (the "any" row with grad = 0 and 1). Each
// row's outputs are compared with the naive expected result of the epilogue the table names AND
// bitwise with the equivalent description call, so a wrong row mapping fails either way. The
// classic workspace query must give the description query's answer, and suffice. With
// grad = 1 the `bias` argument is an output (the bias gradient, overwritten); accumulate means
// beta = 1. Bias lengths: forward bias gemm_m, DGELU_BGRAD's gradient gemm_m, BGRADB's gemm_n;
// the shapes are non-square so an m / n mix-up is refused or computes the wrong thing.
//
// Layer calls: against a naive computation in layer coordinates written here (row-major,
// Y = act(X W^T + b), dX = (dY W) * act'(pre_act), dW = dY^T X), with row strides larger than
// the columns: epigemm_linear_fprop / dgrad (with pre_gelu: gelu_tanh, without: none) and
// epigemm_linear_fprop_act / dgrad_act with every activation; and the first two bitwise equal to
// the _act calls with gelu_tanh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

constexpr epigemm_dtype_t F32 = EPIGEMM_DTYPE_F32, F16 = EPIGEMM_DTYPE_F16, BF16 = EPIGEMM_DTYPE_BF16;

struct ClassicRow {
  bool bias, pre_gelu;
  int grad;
  epigemm_epilogue_t epilogue;  // what SPEC §2's table says the row means
};

// SPEC §2: (bias given, pre_gelu_out given, grad) -> epilogue.
const ClassicRow kRows[] = {
    {false, false, 0, EPIGEMM_EPILOGUE_DEFAULT},  {false, false, 1, EPIGEMM_EPILOGUE_DEFAULT},
    {true, false, 0, EPIGEMM_EPILOGUE_BIAS},      {true, false, 1, EPIGEMM_EPILOGUE_BGRADB},
    {false, true, 0, EPIGEMM_EPILOGUE_GELU_AUX},  {false, true, 1, EPIGEMM_EPILOGUE_DGELU},
    {true, true, 0, EPIGEMM_EPILOGUE_GELU_AUX_BIAS}, {true, true, 1, EPIGEMM_EPILOGUE_DGELU_BGRAD}};

std::string row_str(const ClassicRow& row) {
  return std::string("bias=") + (row.bias ? "yes" : "no") + " pre_gelu_out=" +
         (row.pre_gelu ? "yes" : "no") + " grad=" + std::to_string(row.grad) + " -> " +
         epigemm_epilogue_name(row.epilogue);
}

// The classic call for a row: `bias` is the case's bias (forward) or its bias_grad (grad = 1),
// pre_gelu_out the case's aux; accumulate = (beta != 0). NULL for what the row does not give.
Invoke classic_invoke(const ClassicRow& row) {
  return [row](epigemm_context_t ctx, const GemmCase& c, const OperandViews& v, void* workspace,
               size_t workspace_bytes, void* stream) {
    EXPECT_EQ(epigemm_context_set_backend(ctx, c.target.backend), EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(epigemm_context_set_allow_tf32(ctx, c.allow_tf32 ? 1 : 0), EPIGEMM_STATUS_SUCCESS);
    const epigemm_vector_t* bias = nullptr;
    if (row.bias) bias = row.grad ? &v.bias_grad : &v.bias;
    const epigemm_matrix_t* pre_gelu_out = row.pre_gelu ? &v.aux : nullptr;
    return epigemm_classic_gemm(ctx, &v.a, &v.b, &v.d, bias, pre_gelu_out, c.transa, c.transb,
                                row.grad, workspace, workspace_bytes, c.beta != 0.0f ? 1 : 0, stream);
  };
}

class ClassicCall : public ::testing::TestWithParam<Target> {};

TEST_P(ClassicCall, DecisionTableRows) {
  const Target& target = GetParam();
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();

  struct Setup {
    int64_t m, n, k;
    epigemm_op_t transa, transb;
    epigemm_dtype_t ab, d, bias, aux;
    bool accumulate;
    int64_t pad;
    bool misaligned, stale;
  };
  // Non-square throughout (m != n != k) so bias lengths gemm_m and gemm_n differ.
  const Setup setups[] = {
      {23, 41, 13, EPIGEMM_OP_T, EPIGEMM_OP_N, F32, F32, F32, F32, false, 0, false, false},
      {37, 19, 29, EPIGEMM_OP_N, EPIGEMM_OP_T, BF16, F32, F16, BF16, true, 3, true, true},
      {11, 53, 7, EPIGEMM_OP_N, EPIGEMM_OP_N, F16, F16, BF16, F32, true, 1, false, false},
  };
  uint64_t index = 0;
  for (const ClassicRow& row : kRows) {
    for (const Setup& s : setups) {
      GemmCase c;
      c.target = target;
      c.epilogue = row.epilogue;
      c.transa = s.transa;
      c.transb = s.transb;
      c.ab_dtype = s.ab;
      c.d_dtype = s.d;
      c.bias_dtype = s.bias;
      c.bias_grad_dtype = s.bias;  // with grad the classic bias is the gradient, in its dtype
      c.aux_dtype = s.aux;
      c.beta = s.accumulate ? 1.0f : 0.0f;  // accumulate means beta = 1 (alpha = 1)
      c.gemm_m = s.m;
      c.gemm_n = s.n;
      c.gemm_k = s.k;
      if (s.pad > 0) c.padded(s.pad);
      c.misaligned = s.misaligned;
      c.stale_outputs = s.stale;
      c.seed = case_seed(name, index++);
      SCOPED_TRACE("classic row: " + row_str(row) + " accumulate=" + std::to_string(s.accumulate));
      SCOPED_TRACE(c.describe());

      // 1. The classic call against the naive result of the epilogue the table names.
      const CaseRun classic = run_case(ctx, c, classic_invoke(row));
      ASSERT_TRUE(classic.ok);
      check_outputs(c, classic, naive_expected(c, classic.before));

      // 2. Bitwise the same as the equivalent description call on the same inputs and backend.
      const CaseRun described = run_case(ctx, c);
      ASSERT_TRUE(described.ok);
      EXPECT_EQ(classic.ran, described.ran);
      expect_bitwise_equal("D (classic vs description)", classic.after.d, described.after.d);
      if (c.aux_is_output()) {
        expect_bitwise_equal("pre_gelu_out (classic vs description)", classic.after.aux, described.after.aux);
      }
      if (c.has_bias_grad()) {
        expect_bitwise_equal("bias as the bias gradient (classic vs description)",
                             classic.after.bias_grad, described.after.bias_grad);
      }

      // 3. The classic workspace query: the same answer (status and bytes) as the query of the
      //    equivalent description, and the classic call runs with exactly that many bytes.
      {
        const OperandViews v = OperandViews::of(c, classic.after, target.memory);
        const epigemm_vector_t* bias = row.bias ? (row.grad ? &v.bias_grad : &v.bias) : nullptr;
        const epigemm_matrix_t* pre_gelu_out = row.pre_gelu ? &v.aux : nullptr;
        size_t classic_bytes = 0, described_bytes = 0;
        // The classic call takes its backend from the context; run_case may have left it at auto
        // (a case the target's backend declines is re-run under auto).
        ASSERT_EQ(epigemm_context_set_backend(ctx, target.backend), EPIGEMM_STATUS_SUCCESS);
        ASSERT_EQ(epigemm_context_set_allow_tf32(ctx, c.allow_tf32 ? 1 : 0), EPIGEMM_STATUS_SUCCESS);
        const epigemm_status_t classic_status = epigemm_classic_gemm_workspace_size(
            ctx, &v.a, &v.b, &v.d, bias, pre_gelu_out, c.transa, c.transb, row.grad,
            s.accumulate ? 1 : 0, &classic_bytes);
        const Desc desc = make_desc(c, v, target.backend);
        const epigemm_status_t described_status =
            epigemm_gemm_workspace_size(ctx, desc.get(), &v.a, &v.b, &v.d, &described_bytes);
        EXPECT_EQ(classic_status, described_status) << epigemm_context_last_error(ctx);
        if (classic_status == EPIGEMM_STATUS_SUCCESS) {
          EXPECT_EQ(classic_bytes, described_bytes);
          const CaseRun exact = run_case(ctx, c, [&](epigemm_context_t ctx_, const GemmCase& c_,
                                                     const OperandViews& v_, void* workspace,
                                                     size_t, void* stream) {
            return classic_invoke(row)(ctx_, c_, v_, workspace, classic_bytes, stream);
          });
          EXPECT_TRUE(exact.ok) << "the classic call refused the workspace size its query reported";
        }
      }

      // 4. The bias-length rule: a bias of the other dimension's length (gemm_n where the row
      //    needs gemm_m, gemm_m where it needs gemm_n) is refused, naming the bias.
      if (row.bias) {
        const bool over_n = row.epilogue == EPIGEMM_EPILOGUE_BGRADB;
        const int64_t needed = over_n ? c.gemm_n : c.gemm_m, swapped = over_n ? c.gemm_m : c.gemm_n;
        Tensor wrong_buffer = Tensor::vector(s.bias, swapped, false);
        Rng rng(c.seed);
        wrong_buffer.fill_uniform(rng, -1.0, 1.0);
        if (target.memory == EPIGEMM_MEMORY_DEVICE) wrong_buffer.upload();
        const epigemm_vector_t wrong = wrong_buffer.as_vector(target.memory);
        const OperandViews v = OperandViews::of(c, classic.after, target.memory);
        const epigemm_status_t status = epigemm_classic_gemm(
            ctx, &v.a, &v.b, &v.d, &wrong, row.pre_gelu ? &v.aux : nullptr, c.transa, c.transb,
            row.grad, nullptr, 0, s.accumulate ? 1 : 0, nullptr);
        EXPECT_EQ(status, EPIGEMM_STATUS_INVALID_VALUE)
            << "a bias of length " << swapped << " was not refused; "
            << epigemm_epilogue_name(row.epilogue) << " needs "
            << (over_n ? "gemm_n = " : "gemm_m = ") << needed;
        EXPECT_NE(std::strstr(epigemm_context_last_error(ctx), "bias"), nullptr)
            << "message: " << epigemm_context_last_error(ctx);
      }
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, ClassicCall, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

// ---- layer level -----------------------------------------------------------------------------

struct LayerDtypes {
  epigemm_dtype_t in;    // X, W, dY (the GEMM inputs)
  epigemm_dtype_t out;   // Y, dX, dW
  epigemm_dtype_t side;  // bias, pre_gelu, bias_grad
};
const LayerDtypes kLayerDtypes[] = {{F32, F32, F32}, {BF16, F32, F16}, {F16, F16, BF16}};

// tokens, in_features, out_features: all different, none a multiple of 8.
constexpr int64_t kTokens = 29, kIn = 19, kOut = 11;

class LinearLayer : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override { EPIGEMM_SKIP_IF_UNUSABLE(ctx_, GetParam()); }
  Tolerance tolerance(const LayerDtypes& dt, epigemm_dtype_t storage) const {
    return tolerance_for(compute_precision(dt.in, false), storage);
  }
  Context ctx_;
};

// One way of calling fprop or dgrad: the classic layer call (legacy: epigemm_linear_fprop /
// dgrad, whose pre_gelu means gelu_tanh) or the _act call with an activation; with or without the
// pre-activation (dgrad_act always has one).
struct LayerVariant {
  bool legacy;
  epigemm_activation_t activation;  // what the call applies (legacy: gelu_tanh with pre_gelu, else none)
  bool with_pre;
};

std::vector<LayerVariant> layer_variants(bool dgrad) {
  std::vector<LayerVariant> variants;
  variants.push_back({true, EPIGEMM_ACTIVATION_IDENTITY, false});  // Y = X W^T + b; dX = dY W
  variants.push_back({true, EPIGEMM_ACTIVATION_GELU_TANH, true});
  for (int a = 0; a < 5; ++a) {
    if (!dgrad) variants.push_back({false, epigemm_activation_t(a), false});
    variants.push_back({false, epigemm_activation_t(a), true});
  }
  return variants;
}

std::string variant_str(const LayerVariant& v, bool dgrad) {
  const std::string pre = v.legacy ? "pre_gelu" : "pre_act";
  return std::string(v.legacy ? (dgrad ? "linear_dgrad" : "linear_fprop")
                              : (dgrad ? "linear_dgrad_act" : "linear_fprop_act")) +
         (v.legacy ? "" : " activation=" + activation_str(v.activation)) + " " + pre + "=" +
         (v.with_pre ? "yes" : "no");
}

TEST_P(LinearLayer, Fprop) {
  const Target& target = GetParam();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (const LayerDtypes& dt : kLayerDtypes) {
    for (const bool with_bias : {false, true}) {
      for (const LayerVariant& variant : layer_variants(false)) {
        const uint64_t seed = case_seed(name, index++);
        SCOPED_TRACE(::testing::Message() << "fprop in=" << dtype_str(dt.in) << " out=" << dtype_str(dt.out)
                                          << " side=" << dtype_str(dt.side) << " bias=" << with_bias
                                          << " " << variant_str(variant, false) << " seed=" << seed
                                          << " (" << replay_hint() << ")");
        Rng rng(seed);
        // Row strides larger than the columns, each by a different amount.
        Tensor x = row_major_tensor(dt.in, kTokens, kIn, kIn + 3, false);
        Tensor w = row_major_tensor(dt.in, kOut, kIn, kIn + 5, true);
        Tensor bias = Tensor::vector(dt.side, kOut, false);
        Tensor pre = row_major_tensor(dt.side, kTokens, kOut, kOut + 4, false);
        Tensor y = row_major_tensor(dt.out, kTokens, kOut, kOut + 2, false);
        x.fill_uniform(rng, -1.0, 1.0);
        w.fill_uniform(rng, -1.0, 1.0);
        bias.fill_uniform(rng, -1.0, 1.0);
        const Tensor x0 = x, w0 = w, bias0 = bias, pre0 = pre, y0 = y;

        // Y[t, o] = act(sum_i X[t, i] W[o, i] + b[o]); pre = the argument of act.
        // Magnitudes (the tolerance's floor, see Expected): the same sums of absolute values.
        std::vector<double> want_y(kTokens * kOut), want_pre(kTokens * kOut);
        std::vector<double> mag_y(kTokens * kOut), mag_pre(kTokens * kOut);
        for (int64_t t = 0; t < kTokens; ++t) {
          for (int64_t o = 0; o < kOut; ++o) {
            double z = with_bias ? bias.get(o, 0) : 0.0, mag = std::fabs(z);
            for (int64_t i = 0; i < kIn; ++i) {
              z += rm_get(x, t, i) * rm_get(w, o, i);
              mag += std::fabs(rm_get(x, t, i) * rm_get(w, o, i));
            }
            want_pre[t * kOut + o] = z;
            mag_pre[t * kOut + o] = mag;
            const ValueAndMagnitude out = expected_activation(variant.activation, z, mag);
            want_y[t * kOut + o] = out.value;
            mag_y[t * kOut + o] = out.magnitude;
          }
        }
        const bool ok = run_layer_call(
            ctx_, target, {&x, &w, &bias, &pre, &y}, kTokens, kIn, kOut, dt.in,
            [&](epigemm_memory_t memory, void* ws, size_t bytes, void* stream) {
              const epigemm_tensor_t X = x.row_major(memory), W = w.row_major(memory);
              const epigemm_tensor_t P = pre.row_major(memory), Y = y.row_major(memory);
              const epigemm_vector_t b = bias.as_vector(memory);
              const epigemm_vector_t* b_arg = with_bias ? &b : nullptr;
              const epigemm_tensor_t* p_arg = variant.with_pre ? &P : nullptr;
              if (variant.legacy) return epigemm_linear_fprop(ctx_, &X, &W, b_arg, p_arg, &Y, ws, bytes, stream);
              return epigemm_linear_fprop_act(ctx_, &X, &W, b_arg, variant.activation, p_arg, &Y, ws,
                                              bytes, stream);
            });
        ASSERT_TRUE(ok);
        expect_unchanged("X", x0, x);
        expect_unchanged("W", w0, w);
        expect_unchanged("bias", bias0, bias);
        expect_output("Y", y0, y, want_y, mag_y, tolerance(dt, dt.out));
        if (variant.with_pre) {
          expect_output("pre-activation", pre0, pre, want_pre, mag_pre, tolerance(dt, dt.side));
        } else {
          expect_unchanged("pre-activation (not given)", pre0, pre);
        }
        if (HasFailure()) return;
      }
    }
  }
}

TEST_P(LinearLayer, Dgrad) {
  const Target& target = GetParam();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (const LayerDtypes& dt : kLayerDtypes) {
    for (const LayerVariant& variant : layer_variants(true)) {
      // bias_grad only through an activation: the previous layer's bias gradient.
      for (const bool with_bias_grad : {false, true}) {
        if (with_bias_grad && !variant.with_pre) continue;
        const uint64_t seed = case_seed(name, index++);
        SCOPED_TRACE(::testing::Message() << "dgrad in=" << dtype_str(dt.in) << " out=" << dtype_str(dt.out)
                                          << " side=" << dtype_str(dt.side) << " " << variant_str(variant, true)
                                          << " bias_grad=" << with_bias_grad << " seed=" << seed << " ("
                                          << replay_hint() << ")");
        Rng rng(seed);
        Tensor dy = row_major_tensor(dt.in, kTokens, kOut, kOut + 3, false);
        Tensor w = row_major_tensor(dt.in, kOut, kIn, kIn + 1, false);
        Tensor pre = row_major_tensor(dt.side, kTokens, kIn, kIn + 5, true);
        Tensor bias_grad = Tensor::vector(dt.side, kIn, false);
        Tensor dx = row_major_tensor(dt.out, kTokens, kIn, kIn + 2, false);
        dy.fill_uniform(rng, -1.0, 1.0);
        w.fill_uniform(rng, -1.0, 1.0);
        pre.fill_uniform(rng, -4.0, 4.0);
        const Tensor dy0 = dy, w0 = w, pre0 = pre, bias_grad0 = bias_grad, dx0 = dx;

        // dX[t, i] = (sum_o dY[t, o] W[o, i]) * act'(pre[t, i]); bias_grad[i] = sum_t dX[t, i].
        std::vector<double> want_dx(kTokens * kIn), want_bias_grad(kIn, 0.0);
        std::vector<double> mag_dx(kTokens * kIn), mag_bias_grad(kIn, 0.0);
        for (int64_t t = 0; t < kTokens; ++t) {
          for (int64_t i = 0; i < kIn; ++i) {
            double g = 0.0, mag = 0.0;
            for (int64_t o = 0; o < kOut; ++o) {
              g += rm_get(dy, t, o) * rm_get(w, o, i);
              mag += std::fabs(rm_get(dy, t, o) * rm_get(w, o, i));
            }
            ValueAndMagnitude out{g, mag};
            if (variant.with_pre) out = expected_times_activation_grad(variant.activation, g, mag, rm_get(pre, t, i));
            want_dx[t * kIn + i] = out.value;
            mag_dx[t * kIn + i] = out.magnitude;
            want_bias_grad[i] += out.value;
            mag_bias_grad[i] += out.magnitude;
          }
        }
        const bool ok = run_layer_call(
            ctx_, target, {&dy, &w, &pre, &bias_grad, &dx}, kTokens, kIn, kOut, dt.in,
            [&](epigemm_memory_t memory, void* ws, size_t bytes, void* stream) {
              const epigemm_tensor_t DY = dy.row_major(memory), W = w.row_major(memory);
              const epigemm_tensor_t P = pre.row_major(memory), DX = dx.row_major(memory);
              const epigemm_vector_t bg = bias_grad.as_vector(memory);
              const epigemm_vector_t* bg_arg = with_bias_grad ? &bg : nullptr;
              if (variant.legacy) {
                return epigemm_linear_dgrad(ctx_, &DY, &W, variant.with_pre ? &P : nullptr, bg_arg, &DX, ws,
                                            bytes, stream);
              }
              return epigemm_linear_dgrad_act(ctx_, &DY, &W, variant.activation, &P, bg_arg, &DX, ws, bytes,
                                              stream);
            });
        ASSERT_TRUE(ok);
        expect_unchanged("dY", dy0, dy);
        expect_unchanged("W", w0, w);
        expect_unchanged("pre-activation", pre0, pre);
        expect_output("dX", dx0, dx, want_dx, mag_dx, tolerance(dt, dt.out));
        if (with_bias_grad) {
          expect_output("bias_grad (length in_features)", bias_grad0, bias_grad, want_bias_grad,
                        mag_bias_grad, tolerance(dt, dt.side));
        } else {
          expect_unchanged("bias_grad (not given)", bias_grad0, bias_grad);
        }
        if (HasFailure()) return;
      }
    }
  }
}

// epigemm_linear_fprop / dgrad with pre_gelu are the _act calls with gelu_tanh: bitwise the same
// outputs on the same inputs and backend (and another activation gives other values, so the
// comparison can tell).
TEST_P(LinearLayer, ClassicLayerCallsMeanGeluTanh) {
  const Target& target = GetParam();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (const LayerDtypes& dt : kLayerDtypes) {
    const uint64_t seed = case_seed(name, index++);
    SCOPED_TRACE(::testing::Message() << "in=" << dtype_str(dt.in) << " out=" << dtype_str(dt.out)
                                      << " side=" << dtype_str(dt.side) << " seed=" << seed << " ("
                                      << replay_hint() << ")");
    Rng rng(seed);
    Tensor x = row_major_tensor(dt.in, kTokens, kIn, kIn + 1, false);
    Tensor w = row_major_tensor(dt.in, kOut, kIn, kIn, false);
    Tensor bias = Tensor::vector(dt.side, kOut, false);
    Tensor dy = row_major_tensor(dt.in, kTokens, kOut, kOut, false);
    Tensor pre_in = row_major_tensor(dt.side, kTokens, kIn, kIn + 2, false);
    x.fill_uniform(rng, -1.0, 1.0);
    w.fill_uniform(rng, -1.0, 1.0);
    bias.fill_uniform(rng, -1.0, 1.0);
    dy.fill_uniform(rng, -1.0, 1.0);
    pre_in.fill_uniform(rng, -4.0, 4.0);
    // Outputs of each call: [0] classic, [1] _act with gelu_tanh, [2] _act with relu.
    std::vector<Tensor> y, pre, dx, bias_grad;
    for (int call = 0; call < 3; ++call) {
      y.push_back(row_major_tensor(dt.out, kTokens, kOut, kOut + 1, false));
      pre.push_back(row_major_tensor(dt.side, kTokens, kOut, kOut, false));
      dx.push_back(row_major_tensor(dt.out, kTokens, kIn, kIn, false));
      bias_grad.push_back(Tensor::vector(dt.side, kIn, false));
    }
    const epigemm_activation_t activations[] = {EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_GELU_TANH,
                                                EPIGEMM_ACTIVATION_RELU};
    for (int call = 0; call < 3; ++call) {
      const epigemm_activation_t act = activations[call];
      ASSERT_TRUE(run_layer_call(
          ctx_, target, {&x, &w, &bias, &pre[call], &y[call]}, kTokens, kIn, kOut, dt.in,
          [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
            const epigemm_tensor_t X = x.row_major(m), W = w.row_major(m), P = pre[call].row_major(m),
                                   Y = y[call].row_major(m);
            const epigemm_vector_t b = bias.as_vector(m);
            if (call == 0) return epigemm_linear_fprop(ctx_, &X, &W, &b, &P, &Y, ws, bytes, stream);
            return epigemm_linear_fprop_act(ctx_, &X, &W, &b, act, &P, &Y, ws, bytes, stream);
          }));
      ASSERT_TRUE(run_layer_call(
          ctx_, target, {&dy, &w, &pre_in, &bias_grad[call], &dx[call]}, kTokens, kIn, kOut, dt.in,
          [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
            const epigemm_tensor_t DY = dy.row_major(m), W = w.row_major(m), P = pre_in.row_major(m),
                                   DX = dx[call].row_major(m);
            const epigemm_vector_t bg = bias_grad[call].as_vector(m);
            if (call == 0) return epigemm_linear_dgrad(ctx_, &DY, &W, &P, &bg, &DX, ws, bytes, stream);
            return epigemm_linear_dgrad_act(ctx_, &DY, &W, act, &P, &bg, &DX, ws, bytes, stream);
          }));
    }
    expect_bitwise_equal("Y (linear_fprop vs linear_fprop_act gelu_tanh)", y[0], y[1]);
    expect_bitwise_equal("pre_gelu (linear_fprop vs linear_fprop_act gelu_tanh)", pre[0], pre[1]);
    expect_bitwise_equal("dX (linear_dgrad vs linear_dgrad_act gelu_tanh)", dx[0], dx[1]);
    expect_bitwise_equal("bias_grad (linear_dgrad vs linear_dgrad_act gelu_tanh)", bias_grad[0], bias_grad[1]);
    // relu: the same pre-activation, another Y and dX.
    expect_bitwise_equal("pre_act (gelu_tanh vs relu)", pre[1], pre[2]);
    EXPECT_NE(std::memcmp(y[1].buffer(), y[2].buffer(), y[1].buffer_bytes()), 0) << "relu gave gelu_tanh's Y";
    EXPECT_NE(std::memcmp(dx[1].buffer(), dx[2].buffer(), dx[1].buffer_bytes()), 0) << "relu gave gelu_tanh's dX";
    if (HasFailure()) return;
  }
}

TEST_P(LinearLayer, Wgrad) {
  const Target& target = GetParam();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  uint64_t index = 0;
  for (const LayerDtypes& dt : kLayerDtypes) {
    for (const bool accumulate : {false, true}) {
      for (const bool with_bias_grad : {false, true}) {
        const uint64_t seed = case_seed(name, index++);
        SCOPED_TRACE(::testing::Message() << "wgrad in=" << dtype_str(dt.in) << " out=" << dtype_str(dt.out)
                                          << " side=" << dtype_str(dt.side) << " accumulate=" << accumulate
                                          << " bias_grad=" << with_bias_grad << " seed=" << seed
                                          << " (" << replay_hint() << ")");
        Rng rng(seed);
        Tensor x = row_major_tensor(dt.in, kTokens, kIn, kIn + 2, true);
        Tensor dy = row_major_tensor(dt.in, kTokens, kOut, kOut + 1, false);
        Tensor dw = row_major_tensor(dt.out, kOut, kIn, kIn + 3, false);
        Tensor bias_grad = Tensor::vector(dt.side, kOut, false);
        x.fill_uniform(rng, -1.0, 1.0);
        dy.fill_uniform(rng, -1.0, 1.0);
        if (accumulate) dw.fill_uniform(rng, -1.0, 1.0);  // otherwise poison: must not be read
        const Tensor x0 = x, dy0 = dy, dw0 = dw, bias_grad0 = bias_grad;

        // dW[o, i] = sum_t dY[t, o] X[t, i] (+ dW_old[o, i]); bias_grad[o] = sum_t dY[t, o].
        std::vector<double> want_dw(kOut * kIn), want_bias_grad(kOut, 0.0);
        std::vector<double> mag_dw(kOut * kIn), mag_bias_grad(kOut, 0.0);
        for (int64_t o = 0; o < kOut; ++o) {
          for (int64_t i = 0; i < kIn; ++i) {
            double g = accumulate ? rm_get(dw, o, i) : 0.0, mag = std::fabs(g);
            for (int64_t t = 0; t < kTokens; ++t) {
              g += rm_get(dy, t, o) * rm_get(x, t, i);
              mag += std::fabs(rm_get(dy, t, o) * rm_get(x, t, i));
            }
            want_dw[o * kIn + i] = g;
            mag_dw[o * kIn + i] = mag;
          }
          for (int64_t t = 0; t < kTokens; ++t) {
            want_bias_grad[o] += rm_get(dy, t, o);
            mag_bias_grad[o] += std::fabs(rm_get(dy, t, o));
          }
        }
        const bool ok = run_layer_call(
            ctx_, target, {&x, &dy, &dw, &bias_grad}, kTokens, kIn, kOut, dt.in,
            [&](epigemm_memory_t memory, void* ws, size_t bytes, void* stream) {
              const epigemm_tensor_t X = x.row_major(memory), DY = dy.row_major(memory);
              const epigemm_tensor_t DW = dw.row_major(memory);
              const epigemm_vector_t bg = bias_grad.as_vector(memory);
              return epigemm_linear_wgrad(ctx_, &X, &DY, &DW, accumulate ? 1 : 0,
                                          with_bias_grad ? &bg : nullptr, ws, bytes, stream);
            });
        ASSERT_TRUE(ok);
        expect_unchanged("X", x0, x);
        expect_unchanged("dY", dy0, dy);
        expect_output("dW", dw0, dw, want_dw, mag_dw, tolerance(dt, dt.out));
        if (with_bias_grad) {
          expect_output("bias_grad (length out_features)", bias_grad0, bias_grad, want_bias_grad,
                        mag_bias_grad, tolerance(dt, dt.side));
        } else {
          expect_unchanged("bias_grad (not given)", bias_grad0, bias_grad);
        }
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, LinearLayer, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

}  // namespace
}  // namespace epigemm_test
