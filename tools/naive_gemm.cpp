#include "naive_gemm.hpp"

#include <cmath>

namespace epigemm_cli {
namespace {

using Real = long double;

// docs/conventions.md, "GELU": the tanh formulas as written there.
Real gelu(Real x) {
  const Real u = 0.79788456080286535588L * (x + 0.044715L * x * x * x);
  return 0.5L * x * (1.0L + std::tanh(u));
}
Real gelu_derivative(Real x) {
  const Real u = 0.79788456080286535588L * (x + 0.044715L * x * x * x);
  const Real t = std::tanh(u);
  return 0.5L * (1.0L + t) +
         0.5L * x * (1.0L - t * t) * 0.79788456080286535588L * (1.0L + 3.0L * 0.044715L * x * x);
}

// op(X)[row, col] of a stored matrix.
float op_at(const HostMatrix& m, epigemm_op_t op, int64_t row, int64_t col) {
  return op == EPIGEMM_OP_N ? m.at(row, col) : m.at(col, row);
}

}  // namespace

bool epilogue_writes_aux(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_GELU_AUX || e == EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
}
bool epilogue_reads_aux(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_DGELU || e == EPIGEMM_EPILOGUE_DGELU_BGRAD;
}
bool epilogue_reads_bias(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_BIAS || e == EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
}
bool epilogue_writes_bias_grad(epigemm_epilogue_t e) {
  return e == EPIGEMM_EPILOGUE_DGELU_BGRAD || e == EPIGEMM_EPILOGUE_BGRADB;
}

GemmOutputs naive_gemm(const GemmProblem& p) {
  const epigemm_epilogue_t e = p.epilogue;
  GemmOutputs out;
  out.d = p.d;  // keeps the padding between columns as it was
  if (epilogue_writes_aux(e)) out.aux = p.aux;
  if (epilogue_writes_bias_grad(e)) out.bias_grad = p.bias_grad;

  std::vector<Real> row_sums(size_t(p.gemm_m), 0.0L);  // DGELU_BGRAD: sum over j of g[i, j]
  for (int64_t j = 0; j < p.gemm_n; ++j) {
    for (int64_t i = 0; i < p.gemm_m; ++i) {
      Real acc = 0.0L;
      for (int64_t q = 0; q < p.gemm_k; ++q) {
        acc += Real(op_at(p.a, p.transa, i, q)) * Real(op_at(p.b, p.transb, q, j));
      }
      acc = Real(p.alpha) * acc + (p.beta != 0.0f ? Real(p.beta) * Real(p.d.at(i, j)) : 0.0L);
      Real d = acc;
      switch (e) {
        case EPIGEMM_EPILOGUE_DEFAULT:
        case EPIGEMM_EPILOGUE_BGRADB: break;
        case EPIGEMM_EPILOGUE_BIAS: d = acc + Real(p.bias.at(i)); break;
        case EPIGEMM_EPILOGUE_GELU_AUX:
          out.aux.set(i, j, float(acc));
          d = gelu(acc);
          break;
        case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: {
          const Real z = acc + Real(p.bias.at(i));
          out.aux.set(i, j, float(z));
          d = gelu(z);
          break;
        }
        case EPIGEMM_EPILOGUE_DGELU:
        case EPIGEMM_EPILOGUE_DGELU_BGRAD:
          d = acc * gelu_derivative(Real(p.aux.at(i, j)));
          row_sums[size_t(i)] += d;
          break;
      }
      out.d.set(i, j, float(d));
    }
  }
  if (e == EPIGEMM_EPILOGUE_DGELU_BGRAD) {
    for (int64_t i = 0; i < p.gemm_m; ++i) out.bias_grad.set(i, float(row_sums[size_t(i)]));
  }
  if (e == EPIGEMM_EPILOGUE_BGRADB) {
    for (int64_t j = 0; j < p.gemm_n; ++j) {
      Real sum = 0.0L;
      for (int64_t q = 0; q < p.gemm_k; ++q) sum += Real(op_at(p.b, p.transb, q, j));
      out.bias_grad.set(j, float(sum));
    }
  }
  return out;
}

}  // namespace epigemm_cli
