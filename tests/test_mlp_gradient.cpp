// Gradient check of a tiny two-layer MLP built only from the layer-level calls, for every
// activation act:
//
//   fc1 fprop  (ACT_AUX_BIAS)  P = X W1^T + b1 (saved), A = act(P)        X [T, in], W1 [hid, in]
//   fc2 fprop  (BIAS)          Y = A W2^T + b2                             W2 [out, hid]
//   loss = 0.5 * sum (Y - target)^2,  dY = Y - target
//   fc2 wgrad  (BGRADB)        dW2 = dY^T A,  db2 = sum_t dY
//   fc2 dgrad  (DACT_BGRAD)    dP = (dY W2) * act'(P),  db1 = sum_t dP
//   fc1 wgrad  (BGRADB)        dW1 = dP^T X,  and again db1 = sum_t dP
//   fc1 dgrad  (DEFAULT)       dX = dP W1
//
// in fp32 on the host, against central finite differences of a double forward written here, for
// every element of W1, b1, W2, b2 and X: fprop, dgrad and wgrad with their epilogues must compose
// into the true gradient. fc1 and fc2's dgrad go through epigemm_linear_fprop_act /
// epigemm_linear_dgrad_act, and for gelu_tanh also through epigemm_linear_fprop / dgrad (which
// mean gelu_tanh).
//
// relu has a kink at 0, where central differences straddling it measure neither side's slope. The
// inputs keep every pre-activation P at least kKinkMargin away from 0 by construction (each b1[h]
// is moved, if needed, to the nearest value that clears the column's pre-activations), and a
// finite-difference step moves a pre-activation by at most max(|x|, |w1|, 1) h < 2e-4, so no
// difference crosses the kink. The other activations are smooth and keep the drawn b1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

constexpr int64_t kT = 6, kIn = 5, kHid = 7, kOut = 4;
constexpr epigemm_dtype_t F32 = EPIGEMM_DTYPE_F32;
constexpr double kKinkMargin = 0.02;

// The parameters and the input of the MLP in double, row-major dense.
struct Params {
  std::vector<double> x, w1, b1, w2, b2;
};

std::vector<double> dense_row_major(const Tensor& t) {  // t is a row-major [cols(), rows()]
  const int64_t rows = t.cols(), cols = t.rows();
  std::vector<double> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = rm_get(t, r, c);
  }
  return out;
}

// The forward pass and the loss in double (the activation in long double).
double loss(epigemm_activation_t activation, const Params& p, const std::vector<double>& target) {
  double total = 0.0;
  for (int64_t t = 0; t < kT; ++t) {
    double a[kHid];
    for (int64_t h = 0; h < kHid; ++h) {
      double z = p.b1[h];
      for (int64_t i = 0; i < kIn; ++i) z += p.x[t * kIn + i] * p.w1[h * kIn + i];
      a[h] = double(golden_activation(activation, z));
    }
    for (int64_t o = 0; o < kOut; ++o) {
      double y = p.b2[o];
      for (int64_t h = 0; h < kHid; ++h) y += a[h] * p.w2[o * kHid + h];
      const double e = y - target[t * kOut + o];
      total += 0.5 * e * e;
    }
  }
  return total;
}

// d loss / d values[i] for every i, by central differences.
std::vector<double> finite_differences(epigemm_activation_t activation, Params p,
                                       std::vector<double> Params::*member,
                                       const std::vector<double>& target) {
  const double h = 1e-4;  // truncation error ~h^2 = 1e-8, rounding ~1e-16 / h = 1e-12
  std::vector<double>& values = p.*member;
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double keep = values[i];
    values[i] = keep + h;
    const double up = loss(activation, p, target);
    values[i] = keep - h;
    const double down = loss(activation, p, target);
    values[i] = keep;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

// fp32 gradients against the finite differences: within 1e-4 of (|fd| + the largest |fd| of the
// tensor). fp32 rounding through two layers is ~1e-6 of that; a wrong epilogue is O(1).
void expect_gradient(const std::string& name, const std::vector<double>& got,
                     const std::vector<double>& fd) {
  ASSERT_EQ(got.size(), fd.size());
  double scale = 0.0;
  for (double v : fd) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < fd.size(); ++i) {
    const double allowed = 1e-4 * (std::fabs(fd[i]) + scale);
    if (!(std::fabs(got[i] - fd[i]) <= allowed) && bad++ < 4) {
      ADD_FAILURE() << name << "[" << i << "]: library " << got[i] << ", finite differences "
                    << fd[i] << " (allowed " << allowed << ")";
    }
  }
  EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << fd.size() << " elements differ";
}

// Moves b1[h] (on a grid of kKinkMargin / 2 around the drawn value, nearest first) until every
// pre-activation of column h, sum_i X[t, i] W1[h, i] + b1[h], is at least kKinkMargin away from 0.
// Each of the T pre-activations excludes an interval of width 2 kKinkMargin, at most 5 grid
// points, so at most 5 T = 30 of the 8 T + 1 = 49 candidates within 12 kKinkMargin are excluded.
void clear_the_kink(const Tensor& x, const Tensor& w1, Tensor* b1) {
  for (int64_t h = 0; h < kHid; ++h) {
    const double drawn = b1->get(h, 0);
    for (int step = 0; step <= 8 * int(kT); ++step) {
      const double candidate = double(float(drawn + (step % 2 ? 1 : -1) * (step / 2) * 0.5 * kKinkMargin));
      bool clear = true;
      for (int64_t t = 0; t < kT; ++t) {
        double z = candidate;
        for (int64_t i = 0; i < kIn; ++i) z += rm_get(x, t, i) * rm_get(w1, h, i);
        clear = clear && std::fabs(z) >= kKinkMargin;
      }
      if (clear) {
        b1->set(h, 0, candidate);
        break;
      }
      ASSERT_LT(step, 8 * int(kT)) << "no bias clears the kink of column " << h;
    }
  }
}

// One activation, through the _act calls or (legacy: gelu_tanh only) through linear_fprop / dgrad.
struct MlpVariant {
  epigemm_activation_t activation;
  bool legacy_calls;
};

struct MlpParam {
  Target target;
  MlpVariant variant;
};

void PrintTo(const MlpParam& p, std::ostream* os) {
  *os << p.target.name() << " " << activation_str(p.variant.activation)
      << (p.variant.legacy_calls ? " (linear_fprop / linear_dgrad)" : "");
}

class MlpGradient : public ::testing::TestWithParam<MlpParam> {};

TEST_P(MlpGradient, LayerCallsMatchFiniteDifferences) {
  const Target& target = GetParam().target;
  const epigemm_activation_t activation = GetParam().variant.activation;
  const bool legacy = GetParam().variant.legacy_calls;
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, target);
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (uint64_t round = 0; round < 3; ++round) {
    const uint64_t seed = case_seed(name, round);
    SCOPED_TRACE(::testing::Message() << "mlp T=" << kT << " in=" << kIn << " hid=" << kHid
                                      << " out=" << kOut << " activation=" << activation_str(activation)
                                      << (legacy ? " (linear_fprop / linear_dgrad)" : "")
                                      << " seed=" << seed << " (" << replay_hint() << ")");
    Rng rng(seed);
    // Parameters and activations, row-major; a few with row strides past the columns.
    Tensor x = row_major_tensor(F32, kT, kIn, kIn + 1, false);
    Tensor w1 = row_major_tensor(F32, kHid, kIn, kIn, false);
    Tensor b1 = Tensor::vector(F32, kHid, false);
    Tensor w2 = row_major_tensor(F32, kOut, kHid, kHid + 2, false);
    Tensor b2 = Tensor::vector(F32, kOut, false);
    Tensor pre = row_major_tensor(F32, kT, kHid, kHid, false);
    Tensor act = row_major_tensor(F32, kT, kHid, kHid + 3, false);
    Tensor y = row_major_tensor(F32, kT, kOut, kOut, false);
    x.fill_uniform(rng, -1.0, 1.0);
    w1.fill_uniform(rng, -1.2, 1.2);  // pre-activations ~ N(0, 1): the activations' curved part
    b1.fill_uniform(rng, -0.5, 0.5);
    if (activation == EPIGEMM_ACTIVATION_RELU) {
      clear_the_kink(x, w1, &b1);
      if (HasFatalFailure()) return;
    }
    w2.fill_uniform(rng, -0.8, 0.8);
    b2.fill_uniform(rng, -0.5, 0.5);
    std::vector<double> target_values(kT * kOut);
    for (double& v : target_values) v = rng.uniform(-1.0, 1.0);

    // Forward through the library.
    ASSERT_TRUE(run_layer_call(ctx, target, {&x, &w1, &b1, &pre, &act}, kT, kIn, kHid, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t X = x.row_major(m), W = w1.row_major(m);
                                 const epigemm_tensor_t P = pre.row_major(m), A = act.row_major(m);
                                 const epigemm_vector_t b = b1.as_vector(m);
                                 if (legacy) return epigemm_linear_fprop(ctx, &X, &W, &b, &P, &A, ws, bytes, stream);
                                 return epigemm_linear_fprop_act(ctx, &X, &W, &b, activation, &P, &A, ws,
                                                                 bytes, stream);
                               }));
    ASSERT_TRUE(run_layer_call(ctx, target, {&act, &w2, &b2, &y}, kT, kHid, kOut, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t A = act.row_major(m), W = w2.row_major(m);
                                 const epigemm_tensor_t Y = y.row_major(m);
                                 const epigemm_vector_t b = b2.as_vector(m);
                                 return epigemm_linear_fprop(ctx, &A, &W, &b, nullptr, &Y, ws, bytes, stream);
                               }));

    // dY = Y - target, in fp32 as a framework would.
    Tensor dy = row_major_tensor(F32, kT, kOut, kOut + 1, false);
    for (int64_t t = 0; t < kT; ++t) {
      for (int64_t o = 0; o < kOut; ++o) {
        dy.set(o, t, double(float(rm_get(y, t, o)) - float(target_values[t * kOut + o])));
      }
    }

    // Backward through the library.
    Tensor dw2 = row_major_tensor(F32, kOut, kHid, kHid, false);
    Tensor db2 = Tensor::vector(F32, kOut, false);
    Tensor dpre = row_major_tensor(F32, kT, kHid, kHid + 1, false);
    Tensor db1 = Tensor::vector(F32, kHid, false);
    Tensor dw1 = row_major_tensor(F32, kHid, kIn, kIn + 2, false);
    Tensor db1_wgrad = Tensor::vector(F32, kHid, false);
    Tensor dx = row_major_tensor(F32, kT, kIn, kIn, false);
    ASSERT_TRUE(run_layer_call(ctx, target, {&act, &dy, &dw2, &db2}, kT, kHid, kOut, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t A = act.row_major(m), DY = dy.row_major(m);
                                 const epigemm_tensor_t DW = dw2.row_major(m);
                                 const epigemm_vector_t bg = db2.as_vector(m);
                                 return epigemm_linear_wgrad(ctx, &A, &DY, &DW, 0, &bg, ws, bytes, stream);
                               }));
    ASSERT_TRUE(run_layer_call(ctx, target, {&dy, &w2, &pre, &db1, &dpre}, kT, kHid, kOut, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t DY = dy.row_major(m), W = w2.row_major(m);
                                 const epigemm_tensor_t P = pre.row_major(m), DP = dpre.row_major(m);
                                 const epigemm_vector_t bg = db1.as_vector(m);
                                 if (legacy) return epigemm_linear_dgrad(ctx, &DY, &W, &P, &bg, &DP, ws, bytes, stream);
                                 return epigemm_linear_dgrad_act(ctx, &DY, &W, activation, &P, &bg, &DP, ws,
                                                                 bytes, stream);
                               }));
    ASSERT_TRUE(run_layer_call(ctx, target, {&x, &dpre, &dw1, &db1_wgrad}, kT, kIn, kHid, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t X = x.row_major(m), DP = dpre.row_major(m);
                                 const epigemm_tensor_t DW = dw1.row_major(m);
                                 const epigemm_vector_t bg = db1_wgrad.as_vector(m);
                                 return epigemm_linear_wgrad(ctx, &X, &DP, &DW, 0, &bg, ws, bytes, stream);
                               }));
    ASSERT_TRUE(run_layer_call(ctx, target, {&dpre, &w1, &dx}, kT, kIn, kHid, F32,
                               [&](epigemm_memory_t m, void* ws, size_t bytes, void* stream) {
                                 const epigemm_tensor_t DP = dpre.row_major(m), W = w1.row_major(m);
                                 const epigemm_tensor_t DX = dx.row_major(m);
                                 return epigemm_linear_dgrad(ctx, &DP, &W, nullptr, nullptr, &DX, ws, bytes, stream);
                               }));

    // The same network in double, and its gradients by finite differences.
    Params p;
    p.x = dense_row_major(x);
    p.w1 = dense_row_major(w1);
    p.b1 = dense_row_major(b1);
    p.w2 = dense_row_major(w2);
    p.b2 = dense_row_major(b2);
    expect_gradient("dW1", dense_row_major(dw1), finite_differences(activation, p, &Params::w1, target_values));
    expect_gradient("db1 (fc2 dgrad, DACT_BGRAD)", dense_row_major(db1),
                    finite_differences(activation, p, &Params::b1, target_values));
    expect_gradient("db1 (fc1 wgrad, BGRADB)", dense_row_major(db1_wgrad),
                    finite_differences(activation, p, &Params::b1, target_values));
    expect_gradient("dW2", dense_row_major(dw2), finite_differences(activation, p, &Params::w2, target_values));
    expect_gradient("db2 (fc2 wgrad, BGRADB)", dense_row_major(db2),
                    finite_differences(activation, p, &Params::b2, target_values));
    expect_gradient("dX", dense_row_major(dx), finite_differences(activation, p, &Params::x, target_values));
    if (HasFailure()) return;
  }
}

std::vector<MlpParam> mlp_params() {
  const MlpVariant variants[] = {{EPIGEMM_ACTIVATION_GELU_TANH, true},  {EPIGEMM_ACTIVATION_IDENTITY, false},
                                 {EPIGEMM_ACTIVATION_GELU_TANH, false}, {EPIGEMM_ACTIVATION_GELU_ERF, false},
                                 {EPIGEMM_ACTIVATION_RELU, false},      {EPIGEMM_ACTIVATION_SILU, false}};
  std::vector<MlpParam> params;
  for (const Target& target : {Target{EPIGEMM_BACKEND_REFERENCE, EPIGEMM_MEMORY_HOST},
                               Target{EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST}}) {
    for (const MlpVariant& v : variants) params.push_back({target, v});
  }
  return params;
}

// "reference_relu", "auto_host_gelu_tanh_legacy_calls".
INSTANTIATE_TEST_SUITE_P(Host, MlpGradient, ::testing::ValuesIn(mlp_params()),
                         [](const ::testing::TestParamInfo<MlpParam>& info) {
                           return info.param.target.name() + "_" + activation_str(info.param.variant.activation) +
                                  (info.param.variant.legacy_calls ? "_legacy_calls" : "");
                         });

}  // namespace
}  // namespace epigemm_test
