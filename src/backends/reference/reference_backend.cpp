// The reference backend: docs/conventions.md "Epilogues" implemented literally, by the epilogue's
// parts (core/epilogue_parts.hpp) and the activation's functor (core/epilogue_math.hpp).
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

// op(X)[row, col] of a stored matrix X, op = N or T, as a double.
double op_element(const Matrix& m, epigemm_op_t op, int64_t row, int64_t col) {
  return load(m.data, m.dtype, op == EPIGEMM_OP_N ? at(m, row, col) : at(m, col, row));
}

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
  std::string description() const override {
    return "plain loops on the calling thread, double accumulation: the definition every other "
           "backend is tested against";
  }
  Status run(const GemmCall& call) override;

 private:
  template <class Activation>
  Status run_with(const GemmCall& call, Activation) const;
};

// Host scratch of `count` doubles, or nullptr when the host cannot provide it. A return value
// rather than std::vector's exception, so that the caller turns it into OUT_OF_MEMORY itself,
// before anything is written, on every allocator (AddressSanitizer's aborts on a failed throwing
// new instead of throwing).
std::unique_ptr<double[]> allocate_doubles(size_t count) {
  return std::unique_ptr<double[]>(new (std::nothrow) double[count]);
}

Status ReferenceBackend::run(const GemmCall& call) {
  return visit_activation(call.parts().activation,
                          [&](auto activation) { return run_with(call, activation); });
}

template <class Activation>
Status ReferenceBackend::run_with(const GemmCall& call, Activation) const {
  const int64_t m = call.gemm_m, n = call.gemm_n, k = call.gemm_k;
  const EpilogueParts parts = call.parts();
  const bool row_sums_of_g = parts.bias_grad == BiasGradPart::rows_of_gradient;

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
    opa = allocate_doubles(size_t(m) * size_t(k));
    opb_column = allocate_doubles(size_t(k));
    if (row_sums_of_g) row_sums = allocate_doubles(size_t(m));
    if (!opa || !opb_column || (row_sums_of_g && !row_sums)) {
      const int64_t doubles = m * k + k + (row_sums_of_g ? m : 0);  // < 2^60: fits with the 8 bytes
      return error(EPIGEMM_STATUS_OUT_OF_MEMORY, "host memory allocation of ",
                   doubles * int64_t(sizeof(double)),
                   " bytes failed (the reference backend's scratch: op(A) widened to double, "
                   "gemm_m = ", m, " x gemm_k = ", k, ")");
    }
  }

  // Bias gradients of an operand do not depend on the product, so they are written even when D
  // is empty (docs/conventions.md, "Degenerate sizes"); each loop runs over bias_grad's elements.
  //   BGRADB: bias_grad[j] = sum over p of op(B)[p, j];  BGRADA: bias_grad[i] = sum over p of op(A)[i, p].
  if (parts.bias_grad == BiasGradPart::columns_of_b) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += op_element(call.b, call.transb, p, j);
      }
      store_from_double(call.bias_grad.data, call.bias_grad.dtype, j, sum);
    }
  }
  if (parts.bias_grad == BiasGradPart::rows_of_a) {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += op_element(call.a, call.transa, i, p);
      }
      store_from_double(call.bias_grad.data, call.bias_grad.dtype, i, sum);
    }
  }

  // Rows of g: bias_grad[i] = sum over j of g[i, j]; all zeros when gemm_n = 0 (an empty sum).
  if (row_sums_of_g && !has_product) {
    for (int64_t i = 0; i < m; ++i) store_from_float(call.bias_grad.data, call.bias_grad.dtype, i, 0.0f);
  }
  if (!has_product) return Status();

  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      opa[size_t(i * k + p)] = op_element(call.a, call.transa, i, p);
    }
  }
  if (row_sums) std::fill(row_sums.get(), row_sums.get() + m, 0.0);

  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      opb_column[size_t(p)] = op_element(call.b, call.transb, p, j);
    }
    for (int64_t i = 0; i < m; ++i) {
      double dot = 0.0;
      for (int64_t p = 0; p < k; ++p) dot += opa[size_t(i * k + p)] * opb_column[size_t(p)];
      // alpha = 0 leaves the product out and beta = 0 does not read D, as in BLAS: NaN in A or B
      // then reaches nothing, and an uninitialized (even NaN) D is fine (docs/conventions.md).
      // (The dispatcher runs alpha = 0 as gemm_k = 0 but for the operand sums of BGRADB and BGRADA.)
      // gemm_k = 0 is the empty product, not alpha times 0: a NaN or infinite alpha reaches nothing.
      const double scaled_d =
          call.beta != 0.0f ? double(call.beta) * load(call.d.data, call.d.dtype, at(call.d, i, j)) : 0.0;
      const bool adds_product = call.alpha != 0.0f && k > 0;
      double acc = adds_product ? double(call.alpha) * dot : scaled_d;
      if (adds_product && call.beta != 0.0f) acc += scaled_d;

      double out = acc;
      if (parts.backward()) {
        // g = acc * act'(aux): the gradient first, then the reduction of its unrounded value.
        out = acc * Activation::derivative(load(call.aux.data, call.aux.dtype, at(call.aux, i, j)));
        if (row_sums_of_g) row_sums[size_t(i)] += out;
      } else {
        const double z = parts.reads_bias() ? acc + load(call.bias.data, call.bias.dtype, i) : acc;
        if (parts.writes_aux()) store_from_double(call.aux.data, call.aux.dtype, at(call.aux, i, j), z);
        out = Activation::forward(z);
      }
      store_from_double(call.d.data, call.d.dtype, at(call.d, i, j), out);
    }
  }

  if (row_sums_of_g) {
    for (int64_t i = 0; i < m; ++i) {
      store_from_double(call.bias_grad.data, call.bias_grad.dtype, i, row_sums[size_t(i)]);
    }
  }
  return Status();
}

}  // namespace

std::unique_ptr<Backend> create_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace epigemm
