// Expected values (SPEC §5): an independent naive computation written from SPEC §2 (for the
// reference backend), and the reference backend itself run on host copies of the same inputs
// (for every other backend). The naive path uses nothing of the library but its public header:
// its own dtype conversions (dtype.hpp) and its own GELU in long double.
#include <cmath>

#include "harness/harness.hpp"

namespace epigemm_test {

namespace {

constexpr long double kSqrt2OverPi = 0.797884560802865355879892119868763737L;  // sqrt(2/pi)
constexpr long double kCubic = 0.044715L;

}  // namespace

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
long double golden_gelu(long double x) {
  const long double u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5L * x * (1.0L + std::tanh(u));
}

// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
long double golden_gelu_grad(long double x) {
  const long double u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const long double t = std::tanh(u);
  return 0.5L * (1.0L + t) + 0.5L * x * (1.0L - t * t) * kSqrt2OverPi * (1.0L + 3.0L * kCubic * x * x);
}

long double golden_gelu_grad_terms(long double x) {
  const long double u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const long double t = std::tanh(u);
  return 0.5L * (1.0L + t) +
         std::fabs(0.5L * x * (1.0L - t * t) * kSqrt2OverPi * (1.0L + 3.0L * kCubic * x * x));
}

Expected naive_expected(const GemmCase& c, const Operands& in) {
  const int64_t m = c.gemm_m, n = c.gemm_n, k = c.gemm_k;
  const epigemm_epilogue_t e = c.epilogue;
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
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      opb[size_t(p)] = c.transb == EPIGEMM_OP_N ? in.b.get(p, j) : in.b.get(j, p);
    }
    // BGRADB: bias_grad[j] = sum_p op(B)[p, j], also when gemm_m = 0.
    if (e == EPIGEMM_EPILOGUE_BGRADB) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += opb[size_t(p)];
        magnitude += std::fabs(opb[size_t(p)]);
      }
      out.bias_grad[size_t(j)] = sum;
      out.bias_grad_magnitude[size_t(j)] = magnitude;
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
      double d = acc, d_magnitude = acc_magnitude;
      // gelu(z): the error of z scaled by gelu'(z), plus the evaluation's own, relative to gelu(z).
      auto gelu_of = [&](double z, double z_magnitude) {
        d = double(golden_gelu(z));
        d_magnitude = std::fabs(double(golden_gelu_grad(z))) * z_magnitude + std::fabs(d);
      };
      // acc * gelu'(x): the error of acc scaled by gelu'(x), plus |acc| times the evaluation's.
      auto times_gelu_grad = [&](double x) {
        d = acc * double(golden_gelu_grad(x));
        d_magnitude = acc_magnitude * std::fabs(double(golden_gelu_grad(x))) +
                      std::fabs(acc) * double(golden_gelu_grad_terms(x));
      };
      switch (e) {
        case EPIGEMM_EPILOGUE_DEFAULT:
        case EPIGEMM_EPILOGUE_BGRADB:
          break;
        case EPIGEMM_EPILOGUE_BIAS:
          d = acc + in.bias.get(i, 0);
          d_magnitude = acc_magnitude + std::fabs(in.bias.get(i, 0));
          break;
        case EPIGEMM_EPILOGUE_GELU_AUX:
          out.aux[ij] = acc;
          out.aux_magnitude[ij] = acc_magnitude;
          gelu_of(acc, acc_magnitude);
          break;
        case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: {
          const double z = acc + in.bias.get(i, 0);
          const double z_magnitude = acc_magnitude + std::fabs(in.bias.get(i, 0));
          out.aux[ij] = z;
          out.aux_magnitude[ij] = z_magnitude;
          gelu_of(z, z_magnitude);
          break;
        }
        case EPIGEMM_EPILOGUE_DGELU:
          times_gelu_grad(in.aux.get(i, j));
          break;
        case EPIGEMM_EPILOGUE_DGELU_BGRAD:
          times_gelu_grad(in.aux.get(i, j));
          out.bias_grad[size_t(i)] += d;  // the unrounded g; zeros when gemm_n = 0
          out.bias_grad_magnitude[size_t(i)] += d_magnitude;
          break;
      }
      out.d[ij] = d;
      out.d_magnitude[ij] = d_magnitude;
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
