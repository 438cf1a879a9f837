// `epigemm check`: a seeded random sample of the test matrix (tests/harness/README.md: every epilogue x every
// activation x every transa/transb x dtype combinations x accumulate x odd shapes x padded
// leading dimensions),
// run on every usable backend and compared with the reference backend. When the reference is
// the only usable backend, it is compared with the independent naive computation of
// naive_gemm.cpp instead. Outputs are poisoned first: an element left unwritten shows up as NaN.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "compute_device.hpp"
#include "epigemm/epigemm.hpp"
#include "naive_gemm.hpp"
#include "options.hpp"
#include "random.hpp"

namespace epigemm_cli {
namespace {

const epigemm_epilogue_t kEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS,       EPIGEMM_EPILOGUE_ACT,
    EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,   EPIGEMM_EPILOGUE_ACT_AUX_BIAS,
    EPIGEMM_EPILOGUE_DACT,    EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_EPILOGUE_BGRADB,
    EPIGEMM_EPILOGUE_BGRADA};
constexpr int64_t kEpilogueCount = int64_t(std::size(kEpilogues));
const epigemm_activation_t kActivations[] = {
    EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_GELU_ERF,
    EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU};
constexpr int64_t kActivationCount = int64_t(std::size(kActivations));
const epigemm_dtype_t kDtypes[] = {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16};
// The test matrix's sizes: 1, odd primes, sizes that are not multiples of 8 or 16, and round ones.
const int64_t kSizes[] = {1, 2, 7, 8, 16, 17, 31, 64, 100, 128, 229, 541};
// Half the cases are "aligned": multiples of 16, default leading dimensions and epilogue
// operands in D's dtype, the calls that vendor fast paths (cuBLASLt) take instead of declining.
const int64_t kAlignedSizes[] = {16, 32, 64, 128, 256};
// The product gemm_m x gemm_n x gemm_k of a case is kept below this so that the whole check
// stays within seconds on the reference backend.
constexpr double kMaxMultiplyAdds = 3.0e6;

// The rule of the test harness (tests/harness/check.cpp), restated here because the tool uses
// only the public headers: keyed by the coarser of the computation's precision (the A/B dtype)
// and the output's storage dtype, an output passes when every element has
//   |out - ref| <= elementwise * (|ref| + max(max |ref|, terms))
// and ||out - ref|| <= norm * ||max(|ref|, terms)||, where terms is the sum of the absolute values
// of the terms the element is made of (term_magnitudes): an element near 0 is a difference of large
// partial sums and carries their rounding error, also in a one-element output (a 1 x 1 product).
// 16-bit outputs may differ by one unit in the last place where the fp32 value lies near a
// rounding boundary.
struct Tolerance {
  double elementwise;
  double norm;
};

Tolerance tolerance(epigemm_dtype_t ab_dtype, epigemm_dtype_t output_dtype) {
  const auto rank = [](epigemm_dtype_t t) { return t == EPIGEMM_DTYPE_F32 ? 0 : t == EPIGEMM_DTYPE_F16 ? 1 : 2; };
  static const Tolerance kTable[] = {/* f32 */ {1e-5, 3e-6}, /* f16 */ {1e-2, 2e-3}, /* bf16 */ {1e-2, 5e-3}};
  return kTable[std::max(rank(ab_dtype), rank(output_dtype))];
}

struct Comparison {
  double error = 0.0;       // max |out - ref| / (|ref| + max |ref|)
  double norm_error = 0.0;  // ||out - ref|| / ||ref||
  bool unwritten = false;   // a NaN where the expected output has none (poison left, or a bad value)
  bool padding_touched = false;
  bool ok(const Tolerance& t) const {
    return !unwritten && !padding_touched && error <= t.elementwise && norm_error <= t.norm;
  }
};

// terms: each element's magnitude of terms, in the order of out and ref (empty: none).
void compare_values(const std::vector<float>& out, const std::vector<float>& ref, const std::vector<double>& terms,
                    Comparison* c) {
  double largest = 0.0;
  for (float r : ref) largest = std::isfinite(r) ? std::max(largest, double(std::fabs(r))) : largest;
  double diff_squares = 0.0, ref_squares = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i]) && !std::isnan(ref[i])) {
      c->unwritten = true;
      continue;
    }
    if (!std::isfinite(ref[i]) || !std::isfinite(out[i])) {
      if (!(out[i] == ref[i] || (std::isnan(out[i]) && std::isnan(ref[i])))) c->unwritten = true;
      continue;
    }
    const double diff = std::fabs(double(out[i]) - double(ref[i]));
    const double term = i < terms.size() && std::isfinite(terms[i]) ? terms[i] : 0.0;
    const double floor = std::max(std::fabs(double(ref[i])), term);
    diff_squares += diff * diff;
    ref_squares += floor * floor;
    const double scale = std::fabs(double(ref[i])) + std::max(largest, term);
    // Where ref is all zeros (gemm_k = 0 and beta = 0) the output must be exactly zero.
    c->error = std::max(c->error, scale > 0.0 ? diff / scale : (diff > 0.0 ? INFINITY : 0.0));
  }
  c->norm_error = ref_squares > 0.0 ? std::sqrt(diff_squares / ref_squares) : (diff_squares > 0.0 ? INFINITY : 0.0);
}

Comparison compare(const HostMatrix& out, const HostMatrix& ref, const std::vector<double>& terms) {
  Comparison c;
  std::vector<float> o, r;
  for (int64_t col = 0; col < ref.cols; ++col) {
    for (int64_t row = 0; row < ref.ld; ++row) {
      if (row < ref.rows) {
        o.push_back(out.at(row, col));
        r.push_back(ref.at(row, col));
      } else {
        // Between columns: must be left as it was (bitwise, NaN poison included).
        const size_t size = dtype_bytes(ref.dtype), offset = size_t(row + col * ref.ld) * size;
        if (!std::equal(ref.bytes.begin() + long(offset), ref.bytes.begin() + long(offset + size),
                        out.bytes.begin() + long(offset))) {
          c.padding_touched = true;
        }
      }
    }
  }
  compare_values(o, r, terms, &c);
  return c;
}

Comparison compare(const HostVector& out, const HostVector& ref, const std::vector<double>& terms) {
  Comparison c;
  std::vector<float> o, r;
  for (int64_t i = 0; i < ref.length; ++i) {
    o.push_back(out.at(i));
    r.push_back(ref.at(i));
  }
  compare_values(o, r, terms, &c);
  return c;
}

// The magnitude of the terms of each output element (the rule above): for D and aux (column-major,
// gemm_m x gemm_n) |alpha| sum_p |op(A)[i,p] op(B)[p,j]| + |beta D_old| (+ |bias[i]|), times 1.2 for
// the epilogue (|act(z)| <= |z|, act' at most 1.13); for the bias gradient the sum of its row's (the
// rows of g), of |op(B)| over p (BGRADB) or of |op(A)| over p (BGRADA).
struct TermMagnitudes {
  std::vector<double> d, bias_grad;
};
TermMagnitudes term_magnitudes(const GemmProblem& p) {
  const int64_t m = p.gemm_m, n = p.gemm_n, k = p.gemm_k;
  const auto op_a = [&](int64_t i, int64_t q) {
    return std::fabs(double(p.transa == EPIGEMM_OP_N ? p.a.at(i, q) : p.a.at(q, i)));
  };
  const auto op_b = [&](int64_t q, int64_t j) {
    return std::fabs(double(p.transb == EPIGEMM_OP_N ? p.b.at(q, j) : p.b.at(j, q)));
  };
  const EpilogueUse use = p.use();
  TermMagnitudes t;
  t.d.assign(size_t(m * n), 0.0);
  std::vector<double> row_sums(size_t(m), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t q = 0; q < k; ++q) sum += op_a(i, q) * op_b(q, j);
      double magnitude = std::fabs(double(p.alpha)) * sum;
      if (p.beta != 0.0f) magnitude += std::fabs(double(p.beta) * double(p.d.at(i, j)));
      if (use.reads_bias) magnitude += std::fabs(double(p.bias.at(i)));
      t.d[size_t(i + j * m)] = 1.2 * magnitude;
      row_sums[size_t(i)] += 1.2 * magnitude;
    }
  }
  if (!use.writes_bias_grad) return t;
  if (use.bias_grad_along_n) {  // BGRADB: columns of op(B)
    t.bias_grad.assign(size_t(n), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) t.bias_grad[size_t(j)] += op_b(q, j);
    }
  } else if (p.epilogue == EPIGEMM_EPILOGUE_BGRADA) {  // rows of op(A)
    t.bias_grad.assign(size_t(m), 0.0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < k; ++q) t.bias_grad[size_t(i)] += op_a(i, q);
    }
  } else {  // the rows of g
    t.bias_grad = row_sums;
  }
  return t;
}

HostMatrix random_matrix(Random& random, epigemm_dtype_t dtype, int64_t rows, int64_t cols,
                         int64_t ld, double low, double high) {
  HostMatrix m(dtype, rows, cols, ld);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < ld; ++r) m.set(r, c, r < rows ? float(random.uniform(low, high)) : NAN);
  }
  return m;
}

// A random case of the matrix; the i-th case takes the epilogue i mod 10, the transposes
// (i / 10) mod 4 and the activation (i / 10) mod 5, so that a sample of 40 or more covers every
// (epilogue, transposes) pair, 50 or more every (epilogue, activation) pair, and 200 every triple.
GemmProblem random_problem(Random& random, int64_t index, bool aligned, bool padded_ld) {
  GemmProblem p;
  p.epilogue = kEpilogues[index % kEpilogueCount];
  p.activation = kActivations[(index / kEpilogueCount) % kActivationCount];
  p.transa = (index / kEpilogueCount) % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
  p.transb = (index / (2 * kEpilogueCount)) % 2 ? EPIGEMM_OP_T : EPIGEMM_OP_N;
  const auto random_size = [&]() {
    return aligned ? kAlignedSizes[random.below(std::size(kAlignedSizes))]
                   : kSizes[random.below(std::size(kSizes))];
  };
  do {
    p.gemm_m = random_size();
    p.gemm_n = random_size();
    p.gemm_k = random_size();
  } while (double(p.gemm_m) * double(p.gemm_n) * double(p.gemm_k) > kMaxMultiplyAdds);
  const epigemm_dtype_t ab = kDtypes[random.below(3)];
  const epigemm_dtype_t d = random.below(2) ? EPIGEMM_DTYPE_F32 : ab;
  // The dtype of an epilogue operand (bias, aux, bias_grad): D's in aligned cases, else any.
  const auto epilogue_dtype = [&]() { return aligned ? d : kDtypes[random.below(3)]; };
  const bool accumulate = random.below(2) == 1;
  p.beta = accumulate ? 1.0f : 0.0f;
  p.alpha = random.below(4) == 0 ? 0.5f : 1.0f;
  const auto ld = [&](int64_t rows) { return std::max<int64_t>(1, rows) + (padded_ld && random.below(2) ? 1 + int64_t(random.below(5)) : 0); };

  // Inputs scaled so that acc is of order 1 whatever gemm_k is: the activation sees both its
  // curved part and its tails.
  const double input_range = 1.7 / std::sqrt(std::sqrt(double(p.gemm_k)));
  const int64_t a_rows = p.transa == EPIGEMM_OP_N ? p.gemm_m : p.gemm_k;
  const int64_t a_cols = p.transa == EPIGEMM_OP_N ? p.gemm_k : p.gemm_m;
  const int64_t b_rows = p.transb == EPIGEMM_OP_N ? p.gemm_k : p.gemm_n;
  const int64_t b_cols = p.transb == EPIGEMM_OP_N ? p.gemm_n : p.gemm_k;
  p.a = random_matrix(random, ab, a_rows, a_cols, ld(a_rows), -input_range, input_range);
  p.b = random_matrix(random, ab, b_rows, b_cols, ld(b_rows), -input_range, input_range);
  // D_old is read when accumulating; otherwise D starts as NaN poison.
  p.d = random_matrix(random, d, p.gemm_m, p.gemm_n, ld(p.gemm_m), accumulate ? -1.0 : NAN,
                      accumulate ? 1.0 : NAN);
  const EpilogueUse use = p.use();
  if (use.reads_bias) {
    p.bias = HostVector(epilogue_dtype(), p.gemm_m);
    for (int64_t i = 0; i < p.gemm_m; ++i) p.bias.set(i, float(random.uniform(-1.0, 1.0)));
  }
  if (use.reads_aux) {
    p.aux = random_matrix(random, epilogue_dtype(), p.gemm_m, p.gemm_n, ld(p.gemm_m), -4.0, 4.0);
  } else if (use.writes_aux) {
    p.aux = random_matrix(random, epilogue_dtype(), p.gemm_m, p.gemm_n, ld(p.gemm_m), NAN, NAN);
  }
  if (use.writes_bias_grad) {
    p.bias_grad = HostVector(epilogue_dtype(), use.bias_grad_along_n ? p.gemm_n : p.gemm_m);
    for (int64_t i = 0; i < p.bias_grad.length; ++i) p.bias_grad.set(i, NAN);
  }
  return p;
}

// Runs one problem through epigemm_gemm on `backend`, its operands in `device`'s memory.
// Returns the status; `out` holds what the call wrote (and the untouched poison around it).
epigemm_status_t run_on_backend(epigemm::Handle& handle, ComputeDevice& device,
                                epigemm_backend_t backend, const GemmProblem& p, GemmOutputs* out,
                                std::string* message) {
  const epigemm_memory_t memory = device.memory();
  struct Upload {
    ComputeDevice& device;
    std::vector<void*> owned;
    ~Upload() {
      for (void* q : owned) device.release(q);
    }
    void* put(const std::vector<unsigned char>& bytes) {
      void* q = device.allocate(std::max<size_t>(bytes.size(), 1));
      owned.push_back(q);
      if (!bytes.empty()) device.copy_from_host(q, bytes.data(), bytes.size());
      return q;
    }
  } upload{device, {}};
  const auto matrix = [&](const HostMatrix& m) {
    return epigemm_matrix_t{upload.put(m.bytes), m.dtype, m.rows, m.cols, m.ld, memory};
  };
  const auto vector = [&](const HostVector& v) {
    return epigemm_vector_t{upload.put(v.bytes), v.dtype, v.length, memory};
  };
  const epigemm_matrix_t A = matrix(p.a), B = matrix(p.b), D = matrix(p.d);
  epigemm::GemmDesc desc;
  desc.transpose(p.transa, p.transb).scalars(p.alpha, p.beta).epilogue(p.epilogue).activation(p.activation);
  desc.backend(backend);
  const EpilogueUse use = p.use();
  epigemm_vector_t bias{}, bias_grad{};
  epigemm_matrix_t aux{};
  if (use.reads_bias) desc.bias(&(bias = vector(p.bias)));
  if (use.reads_aux || use.writes_aux) desc.aux(&(aux = matrix(p.aux)));
  if (use.writes_bias_grad) desc.bias_grad(&(bias_grad = vector(p.bias_grad)));

  size_t workspace_bytes = 0;
  epigemm_status_t status = epigemm_gemm_workspace_size(handle.get(), desc.get(), &A, &B, &D, &workspace_bytes);
  if (status == EPIGEMM_STATUS_SUCCESS) {
    void* workspace = workspace_bytes > 0 ? upload.put(std::vector<unsigned char>(workspace_bytes)) : nullptr;
    status = epigemm_gemm(handle.get(), desc.get(), &A, &B, &D, workspace, workspace_bytes, device.stream());
  }
  if (status != EPIGEMM_STATUS_SUCCESS) {
    *message = epigemm_context_last_error(handle.get());
    return status;
  }
  device.synchronize();
  out->d = p.d;
  device.copy_to_host(out->d.bytes.data(), D.data, out->d.bytes.size());
  if (use.writes_aux) {
    out->aux = p.aux;
    device.copy_to_host(out->aux.bytes.data(), aux.data, out->aux.bytes.size());
  }
  if (use.writes_bias_grad) {
    out->bias_grad = p.bias_grad;
    device.copy_to_host(out->bias_grad.bytes.data(), bias_grad.data, out->bias_grad.bytes.size());
  }
  return status;
}

const char* short_dtype(epigemm_dtype_t t) {
  return t == EPIGEMM_DTYPE_F32 ? "f32" : t == EPIGEMM_DTYPE_F16 ? "f16" : "bf16";
}

// "bf16/f32 bias f16" : A,B / D, then the dtype of each epilogue operand present.
std::string dtype_text(const GemmProblem& p) {
  const EpilogueUse use = p.use();
  std::string text = std::string(short_dtype(p.a.dtype)) + "/" + short_dtype(p.d.dtype);
  if (use.reads_bias) text += " bias " + std::string(short_dtype(p.bias.dtype));
  if (use.reads_aux || use.writes_aux) text += " aux " + std::string(short_dtype(p.aux.dtype));
  if (use.writes_bias_grad) text += " bgrad " + std::string(short_dtype(p.bias_grad.dtype));
  return text;
}

std::string error_text(const Comparison& c) {
  if (c.unwritten) return "NaN/unwritten";
  if (c.padding_touched) return "ld pad written";
  char text[32];
  std::snprintf(text, sizeof text, "%.1e/%.1e", c.error, c.norm_error);
  return text;
}

}  // namespace

int run_check(int argc, char** argv, int first) {
  Options options("check",
                  "Runs a seeded random sample of the test matrix (every epilogue x transpose x dtype, odd\n"
                  "shapes, padded leading dimensions) on every usable backend and compares each result\n"
                  "with the reference backend; prints a pass/fail table. When the\n"
                  "reference is the only usable backend, compares it with an independent naive computation.");
  options.add("cases", "N", "cases in the sample", "64");
  options.add("seed", "N", "seed of the sample (printed, so a failure can be replayed)", "time of day");
  options.add("backend", "NAME", "all|reference|cpu|cuda|cublaslt|cutlass: the backend(s) to check", "all");
  options.add_flag("failures-only", "print only the rows that fail");
  options.set_epilog("Exit code: 0 when every case passes, 1 when one fails, 2 for a usage error.");
  if (!options.parse(argc, argv, first)) return 0;
  const int64_t cases = options.integer("cases", 1, 100000);
  const uint64_t seed = options.given("seed")
                            ? uint64_t(options.integer("seed", 0, INT64_MAX))
                            : uint64_t(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  const size_t choice = options.choice("backend", {"all", "reference", "cpu", "cuda", "cublaslt", "cutlass"});
  const bool failures_only = options.flag("failures-only");

  epigemm::Handle handle;
  const epigemm_backend_t candidates[] = {EPIGEMM_BACKEND_CPU, EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT,
                                          EPIGEMM_BACKEND_CUTLASS};
  std::vector<epigemm_backend_t> tested;
  if (choice == 0) {
    for (const epigemm_backend_t b : candidates) {
      if (handle.usable(b)) tested.push_back(b);
    }
  } else if (choice >= 2) {
    const epigemm_backend_t b = candidates[choice - 2];
    if (!handle.usable(b)) {
      throw UsageError(std::string("--backend ") + epigemm_backend_name(b) + ": not usable here; see `epigemm info`");
    }
    tested.push_back(b);
  }
  const bool against_naive = tested.empty();
  if (against_naive) tested.push_back(EPIGEMM_BACKEND_REFERENCE);

  std::printf("epigemm check: %lld random cases of the test matrix, seed %llu\n", (long long)cases,
              (unsigned long long)seed);
  if (against_naive) {
    std::printf("only the reference backend is %s: checking it against the independent naive\n"
                "computation of tools/naive_gemm.cpp (long double, the formulas of docs/conventions.md)\n",
                choice == 1 ? "selected" : "usable here");
  } else {
    std::printf("comparing with the reference backend:");
    for (const epigemm_backend_t b : tested) std::printf(" %s", epigemm_backend_name(b));
    std::printf("\n");
  }
  std::printf("err = max |out - ref| / (|ref| + max(max |ref|, terms)) <= 1e-5 when A,B and the output are\n"
              "f32, else <= 1e-2; norm = ||out - ref|| / ||max(|ref|, terms)|| <= 3e-6 (f32), 2e-3 (f16), 5e-3\n"
              "(bf16), keyed by the coarser of A,B and the output; terms = the sum of the absolute values of\n"
              "an element's terms: the rule of the test harness\n\n");
  std::printf("%4s  %-10s %-23s %-2s %-28s %4s %4s %4s %-3s %5s %4s  %-15s %-15s %s\n", "case", "backend",
              "epilogue(activation)", "op", "dtypes: A,B/D, epilogue's", "m", "n", "k", "ld", "alpha", "beta",
              "err/norm D", "aux or bgrad", "result");

  std::unique_ptr<ComputeDevice> host = make_host_device();
  std::unique_ptr<ComputeDevice> gpu;
  epigemm::Handle reference_handle;
  reference_handle.set_backend(EPIGEMM_BACKEND_REFERENCE);
  Random random(seed);
  int64_t passed = 0, failed = 0, declined = 0;
  for (int64_t index = 0; index < cases; ++index) {
    const bool aligned = random.below(2) == 1;
    const bool padded = !aligned && random.below(2) == 1;
    const GemmProblem problem = random_problem(random, index, aligned, padded);
    GemmOutputs expected;
    std::string message;
    if (against_naive) {
      expected = naive_gemm(problem);
    } else if (run_on_backend(reference_handle, *host, EPIGEMM_BACKEND_REFERENCE, problem, &expected,
                              &message) != EPIGEMM_STATUS_SUCCESS) {
      std::printf("%4lld  reference failed: %s\n", (long long)index, message.c_str());
      ++failed;
      continue;
    }
    for (const epigemm_backend_t backend : tested) {
      const bool on_gpu = backend == EPIGEMM_BACKEND_CUDA || backend == EPIGEMM_BACKEND_CUBLASLT ||
                          backend == EPIGEMM_BACKEND_CUTLASS;
      if (on_gpu && !gpu) gpu = make_cuda_device();
      ComputeDevice& device = on_gpu ? *gpu : *host;
      GemmOutputs out;
      const epigemm_status_t status = run_on_backend(handle, device, backend, problem, &out, &message);
      std::string d_error = "-", extra_error = "-", result;
      bool row_failed = false;
      if (status == EPIGEMM_STATUS_NOT_SUPPORTED) {
        // A forced backend may decline a call (the dispatcher then routes it elsewhere).
        result = "declined: " + message;
        ++declined;
      } else if (status != EPIGEMM_STATUS_SUCCESS) {
        result = std::string("FAIL: ") + epigemm_status_name(status) + ": " + message;
        row_failed = true;
      } else {
        const TermMagnitudes terms = term_magnitudes(problem);
        const Comparison d = compare(out.d, expected.d, terms.d);
        bool ok = d.ok(tolerance(problem.a.dtype, problem.d.dtype));
        d_error = error_text(d);
        if (problem.use().writes_aux) {
          const Comparison a = compare(out.aux, expected.aux, terms.d);
          ok = ok && a.ok(tolerance(problem.a.dtype, problem.aux.dtype));
          extra_error = error_text(a);
        }
        if (problem.use().writes_bias_grad) {
          const Comparison g = compare(out.bias_grad, expected.bias_grad, terms.bias_grad);
          ok = ok && g.ok(tolerance(problem.a.dtype, problem.bias_grad.dtype));
          extra_error = error_text(g);
        }
        result = ok ? "pass" : "FAIL";
        row_failed = !ok;
      }
      if (row_failed) {
        ++failed;
      } else if (status == EPIGEMM_STATUS_SUCCESS) {
        ++passed;
      }
      if (failures_only && !row_failed) continue;
      const char op[3] = {problem.transa == EPIGEMM_OP_T ? 'T' : 'N', problem.transb == EPIGEMM_OP_T ? 'T' : 'N', 0};
      std::printf("%4lld  %-10s %-23s %-2s %-28s %4lld %4lld %4lld %-3s %5g %4g  %-15s %-15s %s\n",
                  (long long)index, epigemm_backend_name(backend),
                  epilogue_label(problem.epilogue, problem.activation).c_str(),
                  op, dtype_text(problem).c_str(), (long long)problem.gemm_m, (long long)problem.gemm_n,
                  (long long)problem.gemm_k, padded ? "pad" : "-", double(problem.alpha),
                  double(problem.beta), d_error.c_str(), extra_error.c_str(), result.c_str());
    }
  }
  std::printf("\n%lld passed, %lld failed, %lld declined by a forced backend; seed %llu: %s\n",
              (long long)passed, (long long)failed, (long long)declined, (unsigned long long)seed,
              failed == 0 ? "PASS" : "FAIL");
  if (failed > 0) std::printf("replay: epigemm check --cases %lld --seed %llu\n", (long long)cases, (unsigned long long)seed);
  return failed == 0 ? 0 : 1;
}

}  // namespace epigemm_cli
