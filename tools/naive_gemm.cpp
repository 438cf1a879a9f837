#include "naive_gemm.hpp"

#include <cmath>

#include "activations.hpp"

namespace epigemm_cli {
namespace {

using Real = long double;

// op(X)[row, col] of a stored matrix.
float op_at(const HostMatrix& m, epigemm_op_t op, int64_t row, int64_t col) {
  return op == EPIGEMM_OP_N ? m.at(row, col) : m.at(col, row);
}

}  // namespace

EpilogueUse epilogue_use(epigemm_epilogue_t e) {
  EpilogueUse u;
  switch (e) {
    case EPIGEMM_EPILOGUE_DEFAULT: u.name = "DEFAULT"; break;
    case EPIGEMM_EPILOGUE_BIAS: u.name = "BIAS"; u.reads_bias = true; break;
    case EPIGEMM_EPILOGUE_ACT: u.name = "ACT"; u.has_activation = true; break;
    case EPIGEMM_EPILOGUE_ACT_BIAS: u.name = "ACT_BIAS"; u.has_activation = u.reads_bias = true; break;
    case EPIGEMM_EPILOGUE_ACT_AUX: u.name = "ACT_AUX"; u.has_activation = u.writes_aux = true; break;
    case EPIGEMM_EPILOGUE_ACT_AUX_BIAS:
      u.name = "ACT_AUX_BIAS";
      u.has_activation = u.writes_aux = u.reads_bias = true;
      break;
    case EPIGEMM_EPILOGUE_DACT: u.name = "DACT"; u.has_activation = u.reads_aux = true; break;
    case EPIGEMM_EPILOGUE_DACT_BGRAD:
      u.name = "DACT_BGRAD";
      u.has_activation = u.reads_aux = u.writes_bias_grad = true;
      break;
    case EPIGEMM_EPILOGUE_BGRADB: u.name = "BGRADB"; u.writes_bias_grad = u.bias_grad_along_n = true; break;
    case EPIGEMM_EPILOGUE_BGRADA: u.name = "BGRADA"; u.writes_bias_grad = true; break;
  }
  return u;
}

std::string epilogue_label(epigemm_epilogue_t e, epigemm_activation_t activation) {
  const EpilogueUse use = epilogue_use(e);
  if (!use.has_activation) return use.name;
  return std::string(use.name) + "(" + epigemm_activation_name(activation) + ")";
}

GemmOutputs naive_gemm(const GemmProblem& p) {
  const EpilogueUse use = p.use();
  const epigemm_activation_t act = p.activation;
  GemmOutputs out;
  out.d = p.d;  // keeps the padding between columns as it was
  if (use.writes_aux) out.aux = p.aux;
  if (use.writes_bias_grad) out.bias_grad = p.bias_grad;

  std::vector<Real> row_sums(size_t(p.gemm_m), 0.0L);  // DACT_BGRAD: sum over j of g[i, j]
  for (int64_t j = 0; j < p.gemm_n; ++j) {
    for (int64_t i = 0; i < p.gemm_m; ++i) {
      Real acc = 0.0L;
      for (int64_t q = 0; q < p.gemm_k; ++q) {
        acc += Real(op_at(p.a, p.transa, i, q)) * Real(op_at(p.b, p.transb, q, j));
      }
      acc = Real(p.alpha) * acc + (p.beta != 0.0f ? Real(p.beta) * Real(p.d.at(i, j)) : 0.0L);
      Real d = acc;
      if (use.reads_aux) {
        d = acc * activation_derivative<Real>(act, Real(p.aux.at(i, j)));  // g, before any sum
        row_sums[size_t(i)] += d;
      } else {
        const Real z = use.reads_bias ? acc + Real(p.bias.at(i)) : acc;
        if (use.writes_aux) out.aux.set(i, j, float(z));
        d = use.has_activation ? activation_value<Real>(act, z) : z;
      }
      out.d.set(i, j, float(d));
    }
  }
  if (p.epilogue == EPIGEMM_EPILOGUE_DACT_BGRAD) {
    for (int64_t i = 0; i < p.gemm_m; ++i) out.bias_grad.set(i, float(row_sums[size_t(i)]));
  }
  if (p.epilogue == EPIGEMM_EPILOGUE_BGRADB) {  // sum_q op(B)[q, j], also when gemm_m = 0
    for (int64_t j = 0; j < p.gemm_n; ++j) {
      Real sum = 0.0L;
      for (int64_t q = 0; q < p.gemm_k; ++q) sum += Real(op_at(p.b, p.transb, q, j));
      out.bias_grad.set(j, float(sum));
    }
  }
  if (p.epilogue == EPIGEMM_EPILOGUE_BGRADA) {  // sum_q op(A)[i, q], also when gemm_n = 0
    for (int64_t i = 0; i < p.gemm_m; ++i) {
      Real sum = 0.0L;
      for (int64_t q = 0; q < p.gemm_k; ++q) sum += Real(op_at(p.a, p.transa, i, q));
      out.bias_grad.set(i, float(sum));
    }
  }
  return out;
}

}  // namespace epigemm_cli
