// The one tolerance table and the comparisons of SPEC §5: every output element written, within
// tolerance, no NaN the expected result does not have; nothing outside an output touched; inputs
// unchanged.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "harness/harness.hpp"

namespace epigemm_test {

// ---- the tolerance table ---------------------------------------------------------------------
//
// Keyed by the coarser of two precisions: the computation's (fp32 inputs; fp16/bf16 inputs,
// whose products are exact in fp32 and are summed in fp32; fp32 inputs with TF32 allowed) and
// the output's storage dtype (f32, f16, bf16). An output element passes when
//
//     |out - ref| <= elementwise * (|ref| + floor),   floor = max(scale, magnitude),
//
// and the tensor passes when ||out - ref|| <= norm * ||max(|ref|, magnitude)||, where
//   - magnitude (per element, from the naive computation, see Expected) is the sum of the
//     absolute values of the terms the element is made of: |alpha| sum_p |a b| + |beta D_old|
//     (+ |bias|), carried through the epilogue. acc is a sum of gemm_k products of both signs; an
//     element near zero by cancellation carries the rounding error of its large terms, not one
//     relative to itself. This is the classic error bound of a sum, and it also covers a one-
//     element tensor (gemm_m = 1 bias gradients, 1 x 1 products) and gelu'(aux) near its root.
//   - scale = max |ref| over the tensor: an absolute error that small against the tensor's
//     largest value is accepted too (gelu of a very negative z is ~0 however it is computed).
// With ref all zeros and no terms (gemm_k = 0, beta = 0, no bias) both are zero and the output
// must be exactly zero.
//
// Why these numbers (SPEC §5: fp32 ~1e-5, TF32 ~5e-4, bf16/fp16 ~1e-2, tighter on the norm):
//  - f32: fp32 accumulation over gemm_k <= 541 in any order errs by well under 1e-6 of the
//    magnitude.
//  - 16-bit inputs into an f32 output: the products are exact and summed in fp32, but tensor
//    cores may align addends by truncation (a bias of ~2^-24 per step), so 10x the f32 row. Still
//    tight enough that rounding an intermediate to fp16/bf16 (the activation applied to a rounded
//    acc, a bias gradient summed from the rounded D: 2^-11 .. 2^-8 relative) fails.
//  - tf32: 10 mantissa bits (unit roundoff 2^-11 ~ 4.9e-4, and hardware may truncate instead of
//    round): products err by ~1e-3 each.
//  - f16 / bf16 outputs are compared at their storage precision (ref rounded to the dtype) and may
//    differ from the reference by one ulp where a value lies near a rounding boundary: 2^-10
//    (fp16) and 2^-7 (bf16) relative at worst, inside 1e-2.
Tolerance tolerance_for(Precision compute, epigemm_dtype_t storage) {
  static const Tolerance kTable[] = {
      /* f32         */ {1e-5, 3e-6, "f32"},
      /* 16-bit in   */ {1e-4, 3e-5, "f16/bf16 inputs, fp32 sums"},
      /* tf32        */ {5e-3, 2e-3, "tf32"},
      /* f16 storage */ {1e-2, 2e-3, "f16"},
      /* bf16 storage*/ {1e-2, 5e-3, "bf16"},
  };
  const Precision stored = storage == EPIGEMM_DTYPE_F16    ? Precision::f16
                           : storage == EPIGEMM_DTYPE_BF16 ? Precision::bf16
                                                           : Precision::f32;
  return kTable[std::max(int(compute), int(stored))];
}

Precision compute_precision(epigemm_dtype_t ab_dtype, bool allow_tf32) {
  if (ab_dtype != EPIGEMM_DTYPE_F32) return Precision::inputs_16bit;
  return allow_tf32 ? Precision::tf32 : Precision::f32;
}

// ---- comparisons -----------------------------------------------------------------------------

namespace {

constexpr int kShown = 4;  // mismatches listed per tensor

// "(r, c)" of a buffer index, or where outside the matrix it is.
std::string where(const Tensor& t, int64_t index) {
  std::ostringstream os;
  const int64_t front = t.index_of(0, 0);
  const int64_t local = index - front;
  if (local < 0) {
    os << "front guard [" << local << "]";
  } else if (local >= t.ld() * t.cols()) {
    os << "back guard [+" << (local - t.ld() * t.cols()) << "]";
  } else if (t.inside(index)) {
    os << "(" << local % t.ld() << ", " << local / t.ld() << ")";
  } else {
    os << "padding (row " << local % t.ld() << " >= rows " << t.rows() << ", column "
       << local / t.ld() << ", ld " << t.ld() << ")";
  }
  return os.str();
}

bool element_bytes_equal(const Tensor& x, const Tensor& y, int64_t index) {
  const size_t size = dtype_bytes(x.dtype());
  return std::memcmp(x.buffer() + index * size, y.buffer() + index * size, size) == 0;
}

}  // namespace

void expect_unchanged(const std::string& name, const Tensor& before, const Tensor& after) {
  if (before.buffer_bytes() == 0 && after.buffer_bytes() == 0) return;
  if (before.buffer_bytes() == after.buffer_bytes() &&
      std::memcmp(before.buffer(), after.buffer(), before.buffer_bytes()) == 0) {
    return;
  }
  int64_t changed = 0, first = -1;
  for (int64_t i = 0; i < before.buffer_elements(); ++i) {
    if (!element_bytes_equal(before, after, i)) {
      if (first < 0) first = i;
      ++changed;
    }
  }
  ADD_FAILURE() << name << " (an input) was modified by the call: " << changed
                << " elements changed, the first at " << where(before, first);
}

void expect_bitwise_equal(const std::string& name, const Tensor& x, const Tensor& y) {
  ASSERT_EQ(x.buffer_bytes(), y.buffer_bytes()) << name;
  if (x.buffer_bytes() == 0 || std::memcmp(x.buffer(), y.buffer(), x.buffer_bytes()) == 0) return;
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < x.buffer_elements(); ++i) {
    if (!element_bytes_equal(x, y, i)) {
      if (first < 0) first = i;
      ++differ;
    }
  }
  ADD_FAILURE() << name << ": not bitwise identical: " << differ << " elements differ, the first at "
                << where(x, first) << " (" << decode(x.buffer(), x.dtype(), first) << " vs "
                << decode(y.buffer(), y.dtype(), first) << ")";
}

void expect_output(const std::string& name, const Tensor& before, const Tensor& after,
                   const std::vector<double>& expected, const std::vector<double>& magnitude,
                   const Tolerance& tolerance) {
  const int64_t rows = after.rows(), cols = after.cols();
  ASSERT_EQ(int64_t(expected.size()), rows * cols) << name << ": expected values of the wrong size";
  ASSERT_TRUE(magnitude.empty() || magnitude.size() == expected.size()) << name;
  ASSERT_EQ(before.buffer_bytes(), after.buffer_bytes()) << name;

  // Outside the matrix (guards, padding between columns): bitwise untouched.
  int64_t outside_changed = 0, first_outside = -1;
  for (int64_t i = 0; i < after.buffer_elements(); ++i) {
    if (!after.inside(i) && !element_bytes_equal(before, after, i)) {
      if (first_outside < 0) first_outside = i;
      ++outside_changed;
    }
  }
  if (outside_changed > 0) {
    ADD_FAILURE() << name << ": " << outside_changed
                  << " elements outside the matrix were written, the first at "
                  << where(after, first_outside) << " (" << rows << " x " << cols << ", ld "
                  << after.ld() << ")";
  }

  // Inside: compared at the storage precision.
  const epigemm_dtype_t dtype = after.dtype();
  std::vector<double> ref(expected.size());
  double scale = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ref[i] = round_to_dtype(expected[i], dtype);
    if (std::isfinite(ref[i])) scale = std::max(scale, std::fabs(ref[i]));
  }
  int64_t unwritten = 0, bad_nan = 0, mismatched = 0;
  double diff2 = 0.0, bound2 = 0.0, worst = 0.0;
  std::ostringstream shown;
  int listed = 0;
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      const double want = ref[size_t(r + c * rows)];
      const double got = after.get(r, c);
      const char* problem = nullptr;
      if (std::isnan(want)) {
        if (!std::isnan(got)) problem = "expected NaN";
      } else if (after.is_poison(r, c)) {
        problem = "not written (still the poison NaN)";
        ++unwritten;
      } else if (!std::isfinite(got) || !std::isfinite(want)) {
        if (got != want) {
          problem = "NaN/Inf not in the expected result";
          ++bad_nan;
        }
      } else {
        const double diff = std::fabs(got - want);
        const double terms = magnitude.empty() ? 0.0 : magnitude[size_t(r + c * rows)];
        const double bound = std::max(std::fabs(want), terms);
        diff2 += diff * diff;
        bound2 += bound * bound;
        const double floor = std::max(scale, terms);
        if (diff > tolerance.elementwise * (std::fabs(want) + floor)) {
          problem = "outside tolerance";
          ++mismatched;
          worst = std::max(worst, diff / (std::fabs(want) + floor));
        }
      }
      if (problem != nullptr && listed < kShown) {
        ++listed;
        shown << "\n    (" << r << ", " << c << "): got " << got << ", expected " << want;
        if (!magnitude.empty()) shown << " (magnitude " << magnitude[size_t(r + c * rows)] << ")";
        shown << ": " << problem;
      }
    }
  }
  const int64_t bad = unwritten + bad_nan + mismatched;
  if (bad > 0) {
    std::ostringstream worst_text;
    if (mismatched > 0) worst_text << " (worst |out - ref| / (|ref| + floor) = " << worst << ")";
    ADD_FAILURE() << name << " (" << rows << " x " << cols << ", " << dtype_str(dtype)
                  << ", tolerance " << tolerance.name << "): " << bad << " of " << rows * cols
                  << " elements wrong: " << unwritten << " not written, " << bad_nan
                  << " unexpected NaN/Inf, " << mismatched << " outside |out - ref| <= "
                  << tolerance.elementwise << " * (|ref| + max(" << scale << ", magnitude))"
                  << worst_text.str() << shown.str();
  }
  const double norm_ratio = bound2 > 0.0 ? std::sqrt(diff2 / bound2) : std::sqrt(diff2);
  if (norm_ratio > tolerance.norm) {
    ADD_FAILURE() << name << ": ||out - ref|| / ||max(|ref|, magnitude)|| = " << norm_ratio << " > "
                  << tolerance.norm << " (tolerance " << tolerance.name << ")";
  }
}

// ---- a whole case ----------------------------------------------------------------------------

void check_outputs(const GemmCase& c, const CaseRun& run, const Expected& expected) {
  const Precision precision = compute_precision(c.ab_dtype, c.allow_tf32);
  const Operands& before = run.before;
  const Operands& after = run.after;
  expect_unchanged("A", before.a, after.a);
  expect_unchanged("B", before.b, after.b);
  if (c.has_bias()) expect_unchanged("bias", before.bias, after.bias);
  if (c.has_aux() && !c.aux_is_output()) expect_unchanged("aux (input)", before.aux, after.aux);
  expect_output("D", before.d, after.d, expected.d, expected.d_magnitude,
                tolerance_for(precision, c.d_dtype));
  if (c.aux_is_output()) {
    expect_output("aux", before.aux, after.aux, expected.aux, expected.aux_magnitude,
                  tolerance_for(precision, c.aux_dtype));
  }
  if (c.has_bias_grad()) {
    expect_output("bias_grad", before.bias_grad, after.bias_grad, expected.bias_grad,
                  expected.bias_grad_magnitude, tolerance_for(precision, c.bias_grad_dtype));
  }
}

void check_case(epigemm_context_t ctx, const GemmCase& c, const CaseRun& run) {
  if (!run.ok) return;  // run_case has reported why
  Expected expected = naive_expected(c, run.before);
  if (run.ran != EPIGEMM_BACKEND_REFERENCE) {
    // The reference backend's values, with the naive computation's magnitudes as the floor.
    Expected reference = reference_expected(ctx, c, run.before);
    expected.d = std::move(reference.d);
    expected.aux = std::move(reference.aux);
    expected.bias_grad = std::move(reference.bias_grad);
  }
  check_outputs(c, run, expected);
}

}  // namespace epigemm_test
