// The test harness every backend is tested with, unchanged (SPEC §5): it calls the library only
// through the public C API (include/epigemm/epigemm.h).
//
//   Target      which backend a case is forced onto, and where its operands live (host/device)
//   GemmCase    one GEMM + epilogue: transposes, dtypes of every operand, alpha, beta, sizes,
//               leading dimensions, alignment, seed
//   Tensor      one operand's storage: a host buffer, and a device mirror for device targets;
//               guards before and after, every byte outside the matrix poisoned (quiet NaN)
//   run_case    random inputs from the case's seed, poisoned outputs, the call (through
//               epigemm_gemm with a description, or any other entry point via an Invoke), and
//               the check that the requested backend ran
//   check_case  the oracle and the comparison: for the reference backend an independent naive
//               computation written here (double, activations in long double, straight from
//               SPEC §2 and docs/conventions.md), for every other backend the reference
//               backend's outputs on copies of the same inputs; one tolerance table; every output
//               element written, nothing outside an output touched, no input changed, no NaN the
//               expected result does not have.
//
// Every failure message carries the case's description with its seed; EPIGEMM_TEST_SEED=<base>
// with the same --gtest_filter replays it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "epigemm/epigemm.h"
#include "harness/dtype.hpp"

namespace epigemm_test {

// ---- where a case runs ------------------------------------------------------------------------

struct Target {
  epigemm_backend_t backend;
  epigemm_memory_t memory;
  std::string name() const;  // "reference", "cuda", "auto_host", "auto_device"
};
// How gtest prints a Target parameter (and ctest shows it): its name.
void PrintTo(const Target& target, std::ostream* os);

// Where a backend's operands live: cuda, cublaslt and cutlass take device memory, the others host
// memory.
epigemm_memory_t backend_memory(epigemm_backend_t backend);
// reference, cpu, cuda, cublaslt, cutlass (each on its own memory), then auto on host and on device.
std::vector<Target> all_targets();
// "" when the target can run in this build on this machine; otherwise the reason, "SKIP: ...".
std::string unusable_reason(epigemm_context_t ctx, const Target& target);

#define EPIGEMM_SKIP_IF_UNUSABLE(ctx, target)                                  \
  do {                                                                         \
    const std::string epigemm_skip_why_ = ::epigemm_test::unusable_reason((ctx), (target)); \
    if (!epigemm_skip_why_.empty()) GTEST_SKIP() << epigemm_skip_why_;         \
  } while (0)

// A context for the duration of a test.
class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  epigemm_context_t get() const { return ctx_; }
  operator epigemm_context_t() const { return ctx_; }

 private:
  epigemm_context_t ctx_ = nullptr;
};

// ---- seeds and random numbers ----------------------------------------------------------------

// EPIGEMM_TEST_SEED (a number, or "random" for a fresh one) or a fixed default; printed once.
uint64_t base_seed();
// The seed of one case: the base seed mixed with a name and an index, so each case draws its own
// inputs and replays alone.
uint64_t case_seed(const std::string& name, uint64_t index);
// "EPIGEMM_TEST_SEED=<base>" and the current test's filter, for failure messages.
std::string replay_hint();

// splitmix64: the same sequence on every platform, so a seed replays anywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform(double lo, double hi);  // [lo, hi)

 private:
  uint64_t state_;
};

// ---- memory ----------------------------------------------------------------------------------

// One operand: a column-major rows x cols matrix with leading dimension ld (a vector is
// length x 1), in a buffer with a guard before and after; element (r, c) at data[r + c * ld].
// Copies `bytes` host -> device and waits until they are there. From pageable host memory
// cudaMemcpy may return before the DMA into device memory is done, and the calls under test run
// on non-blocking streams that do not wait for the legacy stream's copies: every upload of the
// tests goes through here. Returns false (with a test failure added) when CUDA refuses.
bool copy_to_device_and_wait(void* device, const void* host, size_t bytes);

// The host buffer is the truth; for device targets upload()/download() move the whole buffer
// (guards and padding included) to and from a cudaMalloc'ed mirror.
class Tensor {
 public:
  Tensor() = default;
  // misaligned: the data pointer is one element past a 256-byte boundary.
  Tensor(epigemm_dtype_t dtype, int64_t rows, int64_t cols, int64_t ld, bool misaligned);
  static Tensor vector(epigemm_dtype_t dtype, int64_t length, bool misaligned);
  Tensor(const Tensor& other);             // copies the host buffer only (no device mirror)
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept;
  Tensor& operator=(Tensor&&) noexcept;
  ~Tensor();

  epigemm_dtype_t dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t ld() const { return ld_; }
  bool empty() const { return rows_ == 0 || cols_ == 0; }

  double get(int64_t r, int64_t c) const;
  void set(int64_t r, int64_t c, double v);  // rounded to fp32, then to the dtype
  bool is_poison(int64_t r, int64_t c) const;
  // Uniform values in [lo, hi), rounded to the dtype, into the matrix; outside stays poison.
  void fill_uniform(Rng& rng, double lo, double hi);
  void fill_poison();  // the whole buffer, guards and padding included

  // Views for the C API. memory = device needs upload() first.
  epigemm_matrix_t matrix(epigemm_memory_t memory) const;
  epigemm_vector_t as_vector(epigemm_memory_t memory) const;
  // The same bytes as a row-major [cols, rows] tensor with row stride ld (layer level).
  epigemm_tensor_t row_major(epigemm_memory_t memory) const;

  void upload();                // allocates the device mirror (once) and copies host -> device
  void download(void* stream);  // device -> host on the stream, then waits for the stream

  // Whole-buffer access for bitwise comparisons.
  const unsigned char* buffer() const { return host_.get(); }
  size_t buffer_bytes() const { return bytes_; }
  int64_t buffer_elements() const { return int64_t(bytes_ / dtype_bytes(dtype_)); }
  // Buffer index (in elements) of element (r, c), and whether a buffer index is in the matrix.
  int64_t index_of(int64_t r, int64_t c) const { return front_ + r + c * ld_; }
  bool inside(int64_t index) const;

 private:
  struct Free {
    void operator()(unsigned char* p) const;
  };
  void* host_data() const { return host_.get() + front_ * dtype_bytes(dtype_); }
  void* device_data() const;
  void release_device();

  epigemm_dtype_t dtype_ = EPIGEMM_DTYPE_F32;
  int64_t rows_ = 0, cols_ = 0, ld_ = 1;
  int64_t front_ = 0;  // elements before (0, 0): a 256-byte guard, plus one when misaligned
  std::unique_ptr<unsigned char, Free> host_;  // 256-byte aligned: guard, ld * cols, guard
  size_t bytes_ = 0;
  void* device_ = nullptr;  // the mirror, same layout
};

// A workspace of the size epigemm_gemm_workspace_size reports, on the host or the device.
class Workspace {
 public:
  Workspace(size_t bytes, epigemm_memory_t memory);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  epigemm_memory_t memory_;
};

// A non-blocking CUDA stream for device targets (NULL for host ones): a backend that enqueues
// work on another stream than the caller's is caught, because only this one is waited for.
class Stream {
 public:
  explicit Stream(epigemm_memory_t memory);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return stream_; }
  void synchronize() const;

 private:
  void* stream_ = nullptr;
};

// ---- one GEMM case ---------------------------------------------------------------------------

struct GemmCase {
  Target target{EPIGEMM_BACKEND_REFERENCE, EPIGEMM_MEMORY_HOST};
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  // The description's activation (set on every description, also for the epilogues that apply
  // none and must ignore it). gelu_tanh, the library's default, keeps the GELU epilogues' meaning.
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  epigemm_op_t transa = EPIGEMM_OP_N, transb = EPIGEMM_OP_N;
  epigemm_dtype_t ab_dtype = EPIGEMM_DTYPE_F32;  // A and B
  epigemm_dtype_t d_dtype = EPIGEMM_DTYPE_F32;
  epigemm_dtype_t bias_dtype = EPIGEMM_DTYPE_F32;
  epigemm_dtype_t aux_dtype = EPIGEMM_DTYPE_F32;
  epigemm_dtype_t bias_grad_dtype = EPIGEMM_DTYPE_F32;
  bool allow_tf32 = false;
  float alpha = 1.0f;
  float beta = 0.0f;  // != 0: D is read (accumulate)
  int64_t gemm_m = 1, gemm_n = 1, gemm_k = 1;
  // Leading dimensions; 0 means the default max(1, rows) of the stored matrix.
  int64_t lda = 0, ldb = 0, ldd = 0, ldaux = 0;
  bool misaligned = false;  // every data pointer one element off a 256-byte boundary
  // aux (when written) and bias_grad start with finite values (a previous step's) instead of
  // the poison: they must be overwritten, never accumulated into.
  bool stale_outputs = false;
  uint64_t seed = 1;

  // Stored shapes: A is gemm_m x gemm_k (transa N) or gemm_k x gemm_m (T); B likewise.
  int64_t a_rows() const { return transa == EPIGEMM_OP_N ? gemm_m : gemm_k; }
  int64_t a_cols() const { return transa == EPIGEMM_OP_N ? gemm_k : gemm_m; }
  int64_t b_rows() const { return transb == EPIGEMM_OP_N ? gemm_k : gemm_n; }
  int64_t b_cols() const { return transb == EPIGEMM_OP_N ? gemm_n : gemm_k; }
  // DACT_BGRAD reduces over gemm_n and BGRADA over gemm_k (length gemm_m), BGRADB over gemm_k
  // (length gemm_n).
  int64_t bias_grad_length() const;
  // Sets every leading dimension to its default plus `pad` (a different odd amount for each).
  GemmCase& padded(int64_t pad);

  // What the epilogue reads and writes besides A, B and D (docs/conventions.md, "Epilogues"),
  // from the harness's own table (gemm_case.cpp), not the library's.
  bool has_bias() const;
  bool has_aux() const;
  bool aux_is_output() const;
  bool has_bias_grad() const;
  bool has_activation() const;  // ACT, ACT_BIAS, ACT_AUX(_BIAS), DACT(_BGRAD)

  std::string describe() const;  // every field, the seed and the replay hint
};

// The buffers of one case. Inputs are random (values of a scale that keeps the activations in
// their curved range: acc and aux mostly within [-4, 4]); outputs poisoned.
struct Operands {
  Tensor a, b, d, bias, aux, bias_grad;

  static Operands make(const GemmCase& c);
  void upload(const GemmCase& c);
  void download(const GemmCase& c, void* stream);
};

// The C-API views of the operands for one call (host or device pointers).
struct OperandViews {
  epigemm_matrix_t a, b, d, aux;
  epigemm_vector_t bias, bias_grad;
  static OperandViews of(const GemmCase& c, const Operands& ops, epigemm_memory_t memory);
};

// A description object set up for the case (backend forced to c.target.backend unless
// `backend` overrides it).
struct DescDeleter {
  void operator()(epigemm_gemm_desc_s* desc) const { epigemm_gemm_desc_destroy(desc); }
};
using Desc = std::unique_ptr<epigemm_gemm_desc_s, DescDeleter>;
Desc make_desc(const GemmCase& c, const OperandViews& v, epigemm_backend_t backend);

// The call under test. The default is epigemm_gemm with make_desc's description.
using Invoke = std::function<epigemm_status_t(epigemm_context_t ctx, const GemmCase& c,
                                              const OperandViews& v, void* workspace,
                                              size_t workspace_bytes, void* stream)>;
epigemm_status_t invoke_description(epigemm_context_t ctx, const GemmCase& c,
                                    const OperandViews& v, void* workspace,
                                    size_t workspace_bytes, void* stream);

struct CaseRun {
  bool ok = false;  // the call succeeded and the requested backend ran
  epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
  // The requested backend declined the call (NOT_SUPPORTED, e.g. cublaslt on an unaligned
  // leading dimension); the case was then run under auto, which must route it to another
  // backend, and that result is what gets checked.
  bool declined = false;
  Operands before;  // the host buffers as they were handed to the call
  Operands after;   // the host buffers after it (downloaded for device targets)
};

// Draws the inputs, runs the call on c.target, checks the status and that the backend which ran
// is the one requested (for auto: one that works on the target's memory). When a requested
// backend declines the case, runs it under auto instead (see CaseRun::declined) and counts it.
int64_t declined_case_count(epigemm_backend_t backend);
int64_t ran_case_count(epigemm_backend_t backend);
CaseRun run_case(epigemm_context_t ctx, const GemmCase& c, const Invoke& invoke = invoke_description);

// ---- expected values -------------------------------------------------------------------------

// The activations and their derivatives, written here from docs/conventions.md ("Activations")
// in long double (tanhl, erfcl, expl), independent of the library's functors.
long double golden_activation(epigemm_activation_t activation, long double x);
long double golden_activation_grad(epigemm_activation_t activation, long double x);

// The terms of act'(x) in absolute value (gelu_tanh: 0.5 (1 + tanh(u)) + |0.5 x (1 - tanh(u)^2)
// ...|): the scale of the rounding error of any evaluation of act'(x), also where act'(x) is ~0.
long double golden_activation_grad_terms(epigemm_activation_t activation, long double x);

// How far act moves for a small error of its argument near x: |act'(x)|, except for relu, whose
// derivative jumps at 0 (an argument within rounding of 0 may fall on either side): 1, its
// Lipschitz constant.
long double golden_activation_sensitivity(epigemm_activation_t activation, long double x);

// An expected value with its magnitude (see Expected).
struct ValueAndMagnitude {
  double value, magnitude;
};
// act(z), where z is known within rounding relative to z_magnitude: the error of z scaled by the
// activation's sensitivity, plus the evaluation's own, relative to act(z).
ValueAndMagnitude expected_activation(epigemm_activation_t activation, double z, double z_magnitude);
// acc * act'(x) for an exact x (a saved pre-activation): the error of acc scaled by |act'(x)|,
// plus |acc| times the evaluation's own error scale (golden_activation_grad_terms).
ValueAndMagnitude expected_times_activation_grad(epigemm_activation_t activation, double acc,
                                                 double acc_magnitude, double x);

// Expected outputs, column-major dense (ld = gemm_m), before rounding to their storage dtypes,
// each with its magnitude: the sum of the absolute values of the terms the element is made of
// (|alpha| sum_p |op(A)[i,p] op(B)[p,j]| + |beta D_old| (+ |bias|), carried through the epilogue).
// Rounding errors of any evaluation order are relative to it, not to the element, which may be
// ~0 by cancellation. The tolerance's floor (check.cpp).
struct Expected {
  std::vector<double> d, aux, bias_grad;
  std::vector<double> d_magnitude, aux_magnitude, bias_grad_magnitude;
};
// The naive computation of SPEC §2 in double on the case's inputs (beta = 0 never reads D), with
// the magnitudes.
Expected naive_expected(const GemmCase& c, const Operands& in);
// The reference backend's outputs on host copies of `in` (SPEC §5: the oracle of every other
// backend); no magnitudes.
Expected reference_expected(epigemm_context_t ctx, const GemmCase& c, const Operands& in);

// ---- tolerances and comparisons --------------------------------------------------------------

// From finest to coarsest. inputs_16bit: fp16/bf16 A and B, exact products summed in fp32.
enum class Precision { f32, inputs_16bit, tf32, f16, bf16 };
struct Tolerance {
  double elementwise;  // |out - ref| <= elementwise * (|ref| + floor), floor: check.cpp
  double norm;         // ||out - ref|| <= norm * ||max(|ref|, magnitude)||
  const char* name;
};
// The one table (check.cpp, with the reasoning), by the coarser of the computation's precision
// (fp32, fp16/bf16 inputs, or TF32 when allowed for fp32) and the output's storage dtype.
Tolerance tolerance_for(Precision compute, epigemm_dtype_t storage);
Precision compute_precision(epigemm_dtype_t ab_dtype, bool allow_tf32);

// An output after a call: every element of the matrix is finite unless expected NaN, written
// (not poison), within tolerance of `expected` rounded to the storage dtype; every buffer element
// outside the matrix (guards, padding between columns) is bitwise what it was in `before`.
// expected and magnitude (see Expected; empty: none) are column-major dense with ld = rows.
void expect_output(const std::string& name, const Tensor& before, const Tensor& after,
                   const std::vector<double>& expected, const std::vector<double>& magnitude,
                   const Tolerance& tolerance);
// An input after a call: bitwise unchanged, guards and padding included.
void expect_unchanged(const std::string& name, const Tensor& before, const Tensor& after);
// Two buffers bitwise identical (determinism, equivalent calls).
void expect_bitwise_equal(const std::string& name, const Tensor& x, const Tensor& y);

// The oracle for the backend that ran (naive for reference, reference for the others) and every
// check of expect_output / expect_unchanged on the case's operands.
void check_case(epigemm_context_t ctx, const GemmCase& c, const CaseRun& run);
// Checks the case's outputs against given expected values (and its inputs unchanged).
void check_outputs(const GemmCase& c, const CaseRun& run, const Expected& expected);

// After a successful call: the backend that ran (epigemm_context_last_backend) is the one the
// target requests, or for auto one that works on the target's memory. Returns it, or AUTO (and
// a failure) when it is not.
epigemm_backend_t expect_target_ran(epigemm_context_t ctx, const Target& target);

// run_case + check_case under a SCOPED_TRACE of the case.
void run_and_check(epigemm_context_t ctx, const GemmCase& c, const Invoke& invoke = invoke_description);

// ---- layer level -----------------------------------------------------------------------------

// A row-major [rows, cols] tensor with row stride `row_stride` (layer level) is, byte for byte, a
// column-major cols x rows matrix with ld = row_stride: that is how the harness stores it.
// Element (r, c) is rm_get(t, r, c); its expected values are dense row-major (index r * cols + c);
// t.row_major(memory) is its epigemm_tensor_t.
Tensor row_major_tensor(epigemm_dtype_t dtype, int64_t rows, int64_t cols, int64_t row_stride,
                        bool misaligned);
inline double rm_get(const Tensor& t, int64_t r, int64_t c) { return t.get(c, r); }

// Runs one layer-level call (epigemm_linear_*) on the target: sets the context's backend to the
// target's, uploads `tensors` for device targets, sizes the workspace with
// epigemm_linear_workspace_size, calls, downloads, and checks the status and the backend that
// ran. Returns whether all of that succeeded.
using LayerCall = std::function<epigemm_status_t(epigemm_memory_t memory, void* workspace,
                                                 size_t workspace_bytes, void* stream)>;
bool run_layer_call(epigemm_context_t ctx, const Target& target, const std::vector<Tensor*>& tensors,
                    int64_t tokens, int64_t in_features, int64_t out_features,
                    epigemm_dtype_t dtype, const LayerCall& call);

// Short names for test names: "f32", "NT", "ACT_AUX_BIAS" (the structural name: values 2-5 are
// the GELU epilogues' under their ACT / DACT names), "relu".
std::string dtype_str(epigemm_dtype_t dtype);
std::string trans_str(epigemm_op_t transa, epigemm_op_t transb);
std::string epilogue_str(epigemm_epilogue_t epilogue);
std::string activation_str(epigemm_activation_t activation);
// "ACT_AUX_BIAS(relu)" for an epilogue with an activation, "BGRADB" for one without.
std::string epilogue_with_activation_str(epigemm_epilogue_t epilogue, epigemm_activation_t activation);

}  // namespace epigemm_test
