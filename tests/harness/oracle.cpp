// Expected values (SPEC §5): an independent naive computation written from SPEC §2 and
// docs/conventions.md (for the reference backend), and the reference backend itself run on host
// copies of the same inputs (for every other backend). The naive path uses nothing of the library
// but its public header: its own dtype conversions (dtype.hpp) and its own activations in long
// double.
#include <cmath>

#include "harness/harness.hpp"

namespace epigemm_test {

namespace {

constexpr long double kPi = 3.141592653589793238462643383279502884L;
constexpr long double kSqrt2OverPi = 0.797884560802865355879892119868763737L;  // sqrt(2/pi)
constexpr long double kCubic = 0.044715L;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)), as 0.5 erfc(-x / sqrt 2): the same value without the
// cancellation of 1 + erf(.) for x << 0.
long double normal_cdf(long double x) { return 0.5L * std::erfc(-x / std::sqrt(2.0L)); }
long double normal_pdf(long double x) { return std::exp(-0.5L * x * x) / std::sqrt(2.0L * kPi); }
long double sigmoid(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

// gelu_tanh'(x) = t1 + t2, t1 = 0.5 (1 + tanh(u)), t2 = 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 *
// 0.044715 x^2), u = sqrt(2/pi) (x + 0.044715 x^3).
struct GeluTanhGradTerms {
  long double t1, t2;
};
GeluTanhGradTerms gelu_tanh_grad_terms(long double x) {
  const long double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return {0.5L * (1.0L + t), 0.5L * x * (1.0L - t * t) * kSqrt2OverPi * (1.0L + 3.0L * kCubic * x * x)};
}

}  // namespace

long double golden_activation(epigemm_activation_t activation, long double x) {
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY: return x;
    case EPIGEMM_ACTIVATION_GELU_TANH:  // 0.5 x (1 + tanh(u))
      return 0.5L * x * (1.0L + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
    case EPIGEMM_ACTIVATION_GELU_ERF: return x * normal_cdf(x);  // 0.5 x (1 + erf(x / sqrt 2))
    case EPIGEMM_ACTIVATION_RELU: return x < 0 ? 0.0L : x;
    case EPIGEMM_ACTIVATION_SILU: return x * sigmoid(x);
  }
  ADD_FAILURE() << "golden_activation: activation " << int(activation) << " is not in the header";
  return NAN;
}

long double golden_activation_grad(epigemm_activation_t activation, long double x) {
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY: return 1.0L;
    case EPIGEMM_ACTIVATION_GELU_TANH: {
      const GeluTanhGradTerms g = gelu_tanh_grad_terms(x);
      return g.t1 + g.t2;
    }
    case EPIGEMM_ACTIVATION_GELU_ERF: return normal_cdf(x) + x * normal_pdf(x);
    case EPIGEMM_ACTIVATION_RELU: return x > 0 ? 1.0L : 0.0L;
    case EPIGEMM_ACTIVATION_SILU: {  // s (1 + x (1 - s))
      const long double s = sigmoid(x);
      return s * (1.0L + x * (1.0L - s));
    }
  }
  ADD_FAILURE() << "golden_activation_grad: activation " << int(activation) << " is not in the header";
  return NAN;
}

long double golden_activation_grad_terms(epigemm_activation_t activation, long double x) {
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY:
    case EPIGEMM_ACTIVATION_RELU: return std::fabs(golden_activation_grad(activation, x));  // exact
    case EPIGEMM_ACTIVATION_GELU_TANH: {
      const GeluTanhGradTerms g = gelu_tanh_grad_terms(x);
      return std::fabs(g.t1) + std::fabs(g.t2);
    }
    case EPIGEMM_ACTIVATION_GELU_ERF: return normal_cdf(x) + std::fabs(x * normal_pdf(x));
    case EPIGEMM_ACTIVATION_SILU: {
      const long double s = sigmoid(x);
      return s + std::fabs(x * s * (1.0L - s));
    }
  }
  ADD_FAILURE() << "golden_activation_grad_terms: activation " << int(activation) << " is not in the header";
  return NAN;
}

long double golden_activation_sensitivity(epigemm_activation_t activation, long double x) {
  if (activation == EPIGEMM_ACTIVATION_RELU) return 1.0L;
  return std::fabs(golden_activation_grad(activation, x));
}

ValueAndMagnitude expected_activation(epigemm_activation_t activation, double z, double z_magnitude) {
  const double value = double(golden_activation(activation, z));
  return {value, double(golden_activation_sensitivity(activation, z)) * z_magnitude + std::fabs(value)};
}

ValueAndMagnitude expected_times_activation_grad(epigemm_activation_t activation, double acc,
                                                 double acc_magnitude, double x) {
  const double grad = double(golden_activation_grad(activation, x));
  return {acc * grad, acc_magnitude * std::fabs(grad) +
                          std::fabs(acc) * double(golden_activation_grad_terms(activation, x))};
}

Expected naive_expected(const GemmCase& c, const Operands& in) {
  const int64_t m = c.gemm_m, n = c.gemm_n, k = c.gemm_k;
  // BGRADB sums columns of op(B), BGRADA rows of op(A), DACT_BGRAD rows of the gradient g.
  const bool bias_grad_of_b = c.epilogue == EPIGEMM_EPILOGUE_BGRADB;
  const bool bias_grad_of_a = c.epilogue == EPIGEMM_EPILOGUE_BGRADA;
  const bool bias_grad_of_g = c.has_bias_grad() && !bias_grad_of_a && !bias_grad_of_b;
  const bool backward = c.has_aux() && !c.aux_is_output();  // D = acc * act'(aux)
  Expected out;
  out.d.assign(size_t(m * n), 0.0);
  out.d_magnitude.assign(size_t(m * n), 0.0);
  if (c.aux_is_output()) {
    out.aux.assign(size_t(m * n), 0.0);
    out.aux_magnitude.assign(size_t(m * n), 0.0);
  }
  if (c.has_bias_grad()) {
    out.bias_grad.assign(size_t(c.bias_grad_length()), 0.0);
    out.bias_grad_magnitude.assign(size_t(c.bias_grad_length()), 0.0);
  }

  // op(A)[i, p] at opa[i * k + p]; op(B)[p, j] for the current j at opb[p].
  std::vector<double> opa(static_cast<size_t>(m * k)), opb(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      opa[size_t(i * k + p)] = c.transa == EPIGEMM_OP_N ? in.a.get(i, p) : in.a.get(p, i);
    }
    // BGRADA: bias_grad[i] = sum_p op(A)[i, p], also when gemm_n = 0.
    if (bias_grad_of_a) {
      for (int64_t p = 0; p < k; ++p) {
        out.bias_grad[size_t(i)] += opa[size_t(i * k + p)];
        out.bias_grad_magnitude[size_t(i)] += std::fabs(opa[size_t(i * k + p)]);
      }
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      opb[size_t(p)] = c.transb == EPIGEMM_OP_N ? in.b.get(p, j) : in.b.get(j, p);
    }
    // BGRADB: bias_grad[j] = sum_p op(B)[p, j], also when gemm_m = 0.
    if (bias_grad_of_b) {
      for (int64_t p = 0; p < k; ++p) {
        out.bias_grad[size_t(j)] += opb[size_t(p)];
        out.bias_grad_magnitude[size_t(j)] += std::fabs(opb[size_t(p)]);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      double dot = 0.0, dot_magnitude = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = opa[size_t(i * k + p)] * opb[size_t(p)];
        dot += term;
        dot_magnitude += std::fabs(term);
      }
      double acc = double(c.alpha) * dot;
      double acc_magnitude = std::fabs(double(c.alpha)) * dot_magnitude;
      if (c.beta != 0.0f) {  // beta = 0 never reads D
        acc += double(c.beta) * in.d.get(i, j);
        acc_magnitude += std::fabs(double(c.beta) * in.d.get(i, j));
      }
      const size_t ij = size_t(i + j * m);
      ValueAndMagnitude d{acc, acc_magnitude};
      if (backward) {
        // g = acc * act'(aux): the gradient first, then (DACT_BGRAD) the sum of the unrounded g.
        d = expected_times_activation_grad(c.activation, acc, acc_magnitude, in.aux.get(i, j));
        if (bias_grad_of_g) {
          out.bias_grad[size_t(i)] += d.value;  // zeros when gemm_n = 0
          out.bias_grad_magnitude[size_t(i)] += d.magnitude;
        }
      } else {
        // z = acc (+ bias[i]); aux = z when saved; D = act(z) for the epilogues with an activation.
        ValueAndMagnitude z{acc, acc_magnitude};
        if (c.has_bias()) z = {acc + in.bias.get(i, 0), acc_magnitude + std::fabs(in.bias.get(i, 0))};
        if (c.aux_is_output()) {
          out.aux[ij] = z.value;
          out.aux_magnitude[ij] = z.magnitude;
        }
        d = c.has_activation() ? expected_activation(c.activation, z.value, z.magnitude) : z;
      }
      out.d[ij] = d.value;
      out.d_magnitude[ij] = d.magnitude;
    }
  }
  return out;
}

namespace {

std::vector<double> dense(const Tensor& t) {
  std::vector<double> values(size_t(t.rows() * t.cols()));
  for (int64_t c = 0; c < t.cols(); ++c) {
    for (int64_t r = 0; r < t.rows(); ++r) values[size_t(r + c * t.rows())] = t.get(r, c);
  }
  return values;
}

}  // namespace

Expected reference_expected(epigemm_context_t ctx, const GemmCase& c, const Operands& in) {
  Operands ops = in;  // host copies
  const OperandViews v = OperandViews::of(c, ops, EPIGEMM_MEMORY_HOST);
  Desc desc = make_desc(c, v, EPIGEMM_BACKEND_REFERENCE);
  size_t bytes = 0;
  EXPECT_EQ(epigemm_gemm_workspace_size(ctx, desc.get(), &v.a, &v.b, &v.d, &bytes),
            EPIGEMM_STATUS_SUCCESS)
      << "oracle: " << epigemm_context_last_error(ctx);
  Workspace workspace(bytes, EPIGEMM_MEMORY_HOST);
  const epigemm_status_t status =
      epigemm_gemm(ctx, desc.get(), &v.a, &v.b, &v.d, workspace.data(), workspace.bytes(), nullptr);
  EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS)
      << "oracle: the reference backend failed: " << epigemm_context_last_error(ctx);
  epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
  epigemm_context_last_backend(ctx, &ran, nullptr);
  EXPECT_EQ(ran, EPIGEMM_BACKEND_REFERENCE) << "oracle: the reference backend did not run";
  Expected out;
  out.d = dense(ops.d);
  if (c.aux_is_output()) out.aux = dense(ops.aux);
  if (c.has_bias_grad()) out.bias_grad = dense(ops.bias_grad);
  return out;
}

}  // namespace epigemm_test
