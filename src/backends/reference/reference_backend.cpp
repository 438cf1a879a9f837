// The reference backend: docs/conventions.md "Epilogues" implemented literally.
// acc is accumulated and kept in double (the contract asks for at least fp32); every epilogue is
// applied to that value and rounded once, into the output's dtype. Host memory only.
// It allocates host scratch (op(A) and a column of op(B) widened to double): it is the
// definition, not a fast path, and asks for no workspace.
#include "backends/reference/reference_backend.hpp"

#include <algorithm>
#include <memory>
#include <new>

#include "core/epilogue_math.hpp"
#include "core/numeric.hpp"

namespace epigemm {
namespace {

double load(const void* data, epigemm_dtype_t dtype, int64_t index) {
  return double(load_as_float(data, dtype, index));
}

// Column-major element (row, col) of a matrix.
int64_t at(const Matrix& m, int64_t row, int64_t col) { return row + col * m.ld; }

class ReferenceBackend final : public Backend {
 public:
  epigemm_backend_t id() const override { return EPIGEMM_BACKEND_REFERENCE; }
  bool usable() const override { return true; }
  Support supports(const GemmCall& call) const override {
    if (call.memory() != EPIGEMM_MEMORY_HOST) {
      return Support::no("the reference backend runs on host memory only");
    }
    return Support::yes();
  }
  size_t workspace_bytes(const GemmCall&) const override { return 0; }
  int auto_priority(const GemmCall&) const override { return 0; }
  Status run(const GemmCall& call) override;
};

// Host scratch of `count` doubles, or nullptr when the host cannot provide it. A return value
// rather than std::vector's exception, so that the caller turns it into OUT_OF_MEMORY itself,
// before anything is written, on every allocator (AddressSanitizer's aborts on a failed throwing
// new instead of throwing).
std::unique_ptr<double[]> allocate_doubles(size_t count) {
  return std::unique_ptr<double[]>(new (std::nothrow) double[count]);
}

Status ReferenceBackend::run(const GemmCall& call) {
  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  const epigemm_epilogue_t e = call.epilogue;

  // D has elements only when gemm_m and gemm_n both do. Otherwise no product is formed: nothing
  // is allocated and no loop runs over the other, possibly huge, dimensions (an empty D with
  // gemm_k = 2^62 is a valid call, and so are tokens = 2^62 with in = out = 0).
  const bool has_product = m > 0 && n > 0;

  // All scratch is allocated before the first write, so that a call that fails leaves every
  // output as it was (docs/conventions.md, "What a call guarantees").
  // op(A) widened to double, row i contiguous over p: opa[i * k + p]; m k is at most 2^59 (A
  // spans at most 2^60 bytes), so the count fits in size_t.
  std::unique_ptr<double[]> opa, opb_column, row_sums;
  if (has_product) {
    const bool sums_rows = e == EPIGEMM_EPILOGUE_DGELU_BGRAD;
    opa = allocate_doubles(size_t(m) * size_t(k));
    opb_column = allocate_doubles(size_t(k));
    if (sums_rows) row_sums = allocate_doubles(size_t(m));
    if (!opa || !opb_column || (sums_rows && !row_sums)) {
      const int64_t doubles = m * k + k + (sums_rows ? m : 0);  // < 2^60: fits with the 8 bytes
      return error(EPIGEMM_STATUS_OUT_OF_MEMORY, "host memory allocation of ",
                   doubles * int64_t(sizeof(double)),
                   " bytes failed (the reference backend's scratch: op(A) widened to double, "
                   "gemm_m = ", m, " x gemm_k = ", k, ")");
    }
  }

  // BGRADB: bias_grad[j] = sum over p of op(B)[p, j]; it does not depend on gemm_m, so it is
  // written even when D is empty (docs/conventions.md, "Degenerate sizes"). Its loop runs over
  // bias_grad's gemm_n elements.
  if (e == EPIGEMM_EPILOGUE_BGRADB) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += call.transb == EPIGEMM_OP_N ? load(call.b.data, call.b.dtype, at(call.b, p, j))
                                           : load(call.b.data, call.b.dtype, at(call.b, j, p));
      }
      store_from_float(call.bias_grad.data, call.bias_grad.dtype, j, float(sum));
    }
  }

  // DGELU_BGRAD: bias_grad[i] = sum over j of g[i, j]; all zeros when gemm_n = 0 (an empty sum).
  if (e == EPIGEMM_EPILOGUE_DGELU_BGRAD && !has_product) {
    for (int64_t i = 0; i < m; ++i) store_from_float(call.bias_grad.data, call.bias_grad.dtype, i, 0.0f);
  }
  if (!has_product) return Status();

  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t index = call.transa == EPIGEMM_OP_N ? at(call.a, i, p) : at(call.a, p, i);
      opa[size_t(i * k + p)] = load(call.a.data, call.a.dtype, index);
    }
  }
  if (row_sums) std::fill(row_sums.get(), row_sums.get() + m, 0.0);

  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t index = call.transb == EPIGEMM_OP_N ? at(call.b, p, j) : at(call.b, j, p);
      opb_column[size_t(p)] = load(call.b.data, call.b.dtype, index);
    }
    for (int64_t i = 0; i < m; ++i) {
      double dot = 0.0;
      for (int64_t p = 0; p < k; ++p) dot += opa[size_t(i * k + p)] * opb_column[size_t(p)];
      double acc = double(call.alpha) * dot;
      // beta = 0 does not read D: an uninitialized (even NaN) D is fine then, as in BLAS.
      if (call.beta != 0.0f) acc += double(call.beta) * load(call.d.data, call.d.dtype, at(call.d, i, j));

      double out = acc;
      switch (e) {
        case EPIGEMM_EPILOGUE_DEFAULT:
        case EPIGEMM_EPILOGUE_BGRADB:
          break;
        case EPIGEMM_EPILOGUE_BIAS:
          out = acc + load(call.bias.data, call.bias.dtype, i);
          break;
        case EPIGEMM_EPILOGUE_GELU_AUX:
          store_from_float(call.aux.data, call.aux.dtype, at(call.aux, i, j), float(acc));
          out = gelu_tanh(acc);
          break;
        case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: {
          const double z = acc + load(call.bias.data, call.bias.dtype, i);
          store_from_float(call.aux.data, call.aux.dtype, at(call.aux, i, j), float(z));
          out = gelu_tanh(z);
          break;
        }
        case EPIGEMM_EPILOGUE_DGELU:
          out = acc * gelu_tanh_grad(load(call.aux.data, call.aux.dtype, at(call.aux, i, j)));
          break;
        case EPIGEMM_EPILOGUE_DGELU_BGRAD:
          // The gradient first, then the reduction of its unrounded value.
          out = acc * gelu_tanh_grad(load(call.aux.data, call.aux.dtype, at(call.aux, i, j)));
          row_sums[size_t(i)] += out;
          break;
      }
      store_from_float(call.d.data, call.d.dtype, at(call.d, i, j), float(out));
    }
  }

  if (e == EPIGEMM_EPILOGUE_DGELU_BGRAD) {
    for (int64_t i = 0; i < m; ++i) {
      store_from_float(call.bias_grad.data, call.bias_grad.dtype, i, float(row_sums[size_t(i)]));
    }
  }
  return Status();
}

}  // namespace

std::unique_ptr<Backend> create_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace epigemm
