// One GEMM case: its description, its operands (random inputs, poisoned outputs), the call
// through the public C API, and the check that the backend which ran is the one requested.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "harness/harness.hpp"

namespace epigemm_test {

namespace {

int64_t default_ld(int64_t rows) { return std::max<int64_t>(1, rows); }
int64_t ld_or_default(int64_t ld, int64_t rows) { return ld > 0 ? ld : default_ld(rows); }

// What each epilogue uses besides A, B and D, from the table of docs/conventions.md, written here
// (the harness does not ask the library what its epilogues mean). bias_grad_along_n: BGRADB's
// length gemm_n (the others' gemm_m).
struct EpilogueUse {
  bool bias = false, aux_in = false, aux_out = false, bias_grad = false, activation = false;
  bool bias_grad_along_n = false;
  const char* name = "";  // the structural name (ACT_AUX for the value GELU_AUX also has)
};

EpilogueUse use_of(epigemm_epilogue_t e) {
  EpilogueUse u;
  switch (e) {
    case EPIGEMM_EPILOGUE_DEFAULT: u.name = "DEFAULT"; break;
    case EPIGEMM_EPILOGUE_BIAS: u.name = "BIAS"; u.bias = true; break;
    case EPIGEMM_EPILOGUE_ACT: u.name = "ACT"; u.activation = true; break;
    case EPIGEMM_EPILOGUE_ACT_BIAS: u.name = "ACT_BIAS"; u.activation = u.bias = true; break;
    case EPIGEMM_EPILOGUE_ACT_AUX: u.name = "ACT_AUX"; u.activation = u.aux_out = true; break;
    case EPIGEMM_EPILOGUE_ACT_AUX_BIAS:
      u.name = "ACT_AUX_BIAS";
      u.activation = u.aux_out = u.bias = true;
      break;
    case EPIGEMM_EPILOGUE_DACT: u.name = "DACT"; u.activation = u.aux_in = true; break;
    case EPIGEMM_EPILOGUE_DACT_BGRAD:
      u.name = "DACT_BGRAD";
      u.activation = u.aux_in = u.bias_grad = true;
      break;
    case EPIGEMM_EPILOGUE_BGRADB: u.name = "BGRADB"; u.bias_grad = u.bias_grad_along_n = true; break;
    case EPIGEMM_EPILOGUE_BGRADA: u.name = "BGRADA"; u.bias_grad = true; break;
  }
  return u;
}

}  // namespace

// ---- GemmCase --------------------------------------------------------------------------------

int64_t GemmCase::bias_grad_length() const {
  return use_of(epilogue).bias_grad_along_n ? gemm_n : gemm_m;
}

GemmCase& GemmCase::padded(int64_t pad) {
  lda = default_ld(a_rows()) + pad;
  ldb = default_ld(b_rows()) + pad + 2;
  ldd = default_ld(gemm_m) + pad + 4;
  ldaux = default_ld(gemm_m) + pad + 6;
  return *this;
}

bool GemmCase::has_bias() const { return use_of(epilogue).bias; }
bool GemmCase::has_aux() const { return use_of(epilogue).aux_in || use_of(epilogue).aux_out; }
bool GemmCase::aux_is_output() const { return use_of(epilogue).aux_out; }
bool GemmCase::has_bias_grad() const { return use_of(epilogue).bias_grad; }
bool GemmCase::has_activation() const { return use_of(epilogue).activation; }

std::string dtype_str(epigemm_dtype_t dtype) { return epigemm_dtype_name(dtype); }
std::string epilogue_str(epigemm_epilogue_t epilogue) { return use_of(epilogue).name; }
std::string activation_str(epigemm_activation_t activation) { return epigemm_activation_name(activation); }

std::string epilogue_with_activation_str(epigemm_epilogue_t epilogue, epigemm_activation_t activation) {
  if (!use_of(epilogue).activation) return epilogue_str(epilogue);
  return epilogue_str(epilogue) + "(" + activation_str(activation) + ")";
}

std::string trans_str(epigemm_op_t transa, epigemm_op_t transb) {
  return std::string(transa == EPIGEMM_OP_T ? "T" : "N") + (transb == EPIGEMM_OP_T ? "T" : "N");
}

std::string GemmCase::describe() const {
  std::ostringstream os;
  os << "case: target=" << target.name() << " epilogue=" << epilogue_with_activation_str(epilogue, activation)
     << " trans=" << trans_str(transa, transb) << " A/B=" << dtype_str(ab_dtype)
     << " D=" << dtype_str(d_dtype);
  if (has_bias()) os << " bias=" << dtype_str(bias_dtype);
  if (has_aux()) os << " aux=" << dtype_str(aux_dtype) << (aux_is_output() ? "(out)" : "(in)");
  if (has_bias_grad()) os << " bias_grad=" << dtype_str(bias_grad_dtype) << "[" << bias_grad_length() << "]";
  if (allow_tf32) os << " tf32";
  os << " alpha=" << alpha << " beta=" << beta << " gemm_m=" << gemm_m << " gemm_n=" << gemm_n
     << " gemm_k=" << gemm_k << " lda=" << ld_or_default(lda, a_rows())
     << " ldb=" << ld_or_default(ldb, b_rows()) << " ldd=" << ld_or_default(ldd, gemm_m);
  if (has_aux()) os << " ldaux=" << ld_or_default(ldaux, gemm_m);
  if (misaligned) os << " misaligned";
  if (stale_outputs) os << " stale_outputs";
  os << " seed=" << seed << " (" << replay_hint() << ")";
  return os.str();
}

// ---- Operands --------------------------------------------------------------------------------

Operands Operands::make(const GemmCase& c) {
  Rng rng(c.seed);
  Operands ops;
  // acc = alpha * sum_p a b has standard deviation sigma = 1.5 when a, b ~ U(-s, s) with
  // k s^4 / 9 = sigma^2: the activations' curved range, whatever gemm_k.
  const double sigma = 1.5;
  const double s = std::sqrt(3.0 * sigma / std::sqrt(double(std::max<int64_t>(c.gemm_k, 1))));
  ops.a = Tensor(c.ab_dtype, c.a_rows(), c.a_cols(), ld_or_default(c.lda, c.a_rows()), c.misaligned);
  ops.a.fill_uniform(rng, -s, s);
  ops.b = Tensor(c.ab_dtype, c.b_rows(), c.b_cols(), ld_or_default(c.ldb, c.b_rows()), c.misaligned);
  ops.b.fill_uniform(rng, -s, s);
  ops.d = Tensor(c.d_dtype, c.gemm_m, c.gemm_n, ld_or_default(c.ldd, c.gemm_m), c.misaligned);
  // beta = 0: D stays poisoned (NaN) to prove it is not read.
  if (c.beta != 0.0f) ops.d.fill_uniform(rng, -1.0, 1.0);
  if (c.has_bias()) {
    ops.bias = Tensor::vector(c.bias_dtype, c.gemm_m, c.misaligned);
    ops.bias.fill_uniform(rng, -1.0, 1.0);
  }
  if (c.has_aux()) {
    ops.aux = Tensor(c.aux_dtype, c.gemm_m, c.gemm_n, ld_or_default(c.ldaux, c.gemm_m), c.misaligned);
    // In: a saved pre-activation. Out: poison, or a previous step's values.
    if (!c.aux_is_output()) {
      ops.aux.fill_uniform(rng, -4.0, 4.0);
    } else if (c.stale_outputs) {
      ops.aux.fill_uniform(rng, -8.0, 8.0);
    }
  }
  if (c.has_bias_grad()) {
    ops.bias_grad = Tensor::vector(c.bias_grad_dtype, c.bias_grad_length(), c.misaligned);
    if (c.stale_outputs) ops.bias_grad.fill_uniform(rng, -8.0, 8.0);
  }
  return ops;
}

void Operands::upload(const GemmCase& c) {
  a.upload();
  b.upload();
  d.upload();
  if (c.has_bias()) bias.upload();
  if (c.has_aux()) aux.upload();
  if (c.has_bias_grad()) bias_grad.upload();
}

void Operands::download(const GemmCase& c, void* stream) {
  a.download(stream);
  b.download(stream);
  d.download(stream);
  if (c.has_bias()) bias.download(stream);
  if (c.has_aux()) aux.download(stream);
  if (c.has_bias_grad()) bias_grad.download(stream);
}

OperandViews OperandViews::of(const GemmCase& c, const Operands& ops, epigemm_memory_t memory) {
  OperandViews v{};
  v.a = ops.a.matrix(memory);
  v.b = ops.b.matrix(memory);
  v.d = ops.d.matrix(memory);
  if (c.has_aux()) v.aux = ops.aux.matrix(memory);
  if (c.has_bias()) v.bias = ops.bias.as_vector(memory);
  if (c.has_bias_grad()) v.bias_grad = ops.bias_grad.as_vector(memory);
  return v;
}

Desc make_desc(const GemmCase& c, const OperandViews& v, epigemm_backend_t backend) {
  epigemm_gemm_desc_t raw = nullptr;
  EXPECT_EQ(epigemm_gemm_desc_create(&raw), EPIGEMM_STATUS_SUCCESS);
  Desc desc(raw);
  EXPECT_EQ(epigemm_gemm_desc_set_transpose(raw, c.transa, c.transb), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_set_scalars(raw, c.alpha, c.beta), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_set_epilogue(raw, c.epilogue), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_set_activation(raw, c.activation), EPIGEMM_STATUS_SUCCESS);
  if (c.has_bias()) {
    EXPECT_EQ(epigemm_gemm_desc_set_bias(raw, &v.bias), EPIGEMM_STATUS_SUCCESS);
  }
  if (c.has_aux()) {
    EXPECT_EQ(epigemm_gemm_desc_set_aux(raw, &v.aux), EPIGEMM_STATUS_SUCCESS);
  }
  if (c.has_bias_grad()) {
    EXPECT_EQ(epigemm_gemm_desc_set_bias_grad(raw, &v.bias_grad), EPIGEMM_STATUS_SUCCESS);
  }
  EXPECT_EQ(epigemm_gemm_desc_set_allow_tf32(raw, c.allow_tf32 ? 1 : 0), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_set_backend(raw, backend), EPIGEMM_STATUS_SUCCESS);
  return desc;
}

epigemm_status_t invoke_description(epigemm_context_t ctx, const GemmCase& c,
                                    const OperandViews& v, void* workspace,
                                    size_t workspace_bytes, void* stream) {
  Desc desc = make_desc(c, v, c.target.backend);
  return epigemm_gemm(ctx, desc.get(), &v.a, &v.b, &v.d, workspace, workspace_bytes, stream);
}

// ---- running a case --------------------------------------------------------------------------

namespace {
struct CaseCounts {
  int64_t ran = 0, declined = 0;
};
// Per backend, over the test binary's run (tests run on one thread).
std::map<epigemm_backend_t, CaseCounts>& case_counts() {
  static std::map<epigemm_backend_t, CaseCounts> counts;
  return counts;
}
}  // namespace

CaseRun run_case(epigemm_context_t ctx, const GemmCase& c, const Invoke& invoke) {
  CaseRun run;
  run.before = Operands::make(c);
  run.after = run.before;
  const epigemm_memory_t memory = c.target.memory;
  if (memory == EPIGEMM_MEMORY_DEVICE) run.after.upload(c);
  const OperandViews v = OperandViews::of(c, run.after, memory);

  // The workspace the equivalent description needs, allocated where the operands live.
  size_t workspace_bytes = 0;
  {
    Desc desc = make_desc(c, v, c.target.backend);
    const epigemm_status_t status =
        epigemm_gemm_workspace_size(ctx, desc.get(), &v.a, &v.b, &v.d, &workspace_bytes);
    if (status == EPIGEMM_STATUS_NOT_SUPPORTED && c.target.backend != EPIGEMM_BACKEND_AUTO) {
      // A valid call the requested backend declines: under auto it must run elsewhere.
      ++case_counts()[c.target.backend].declined;
      GemmCase rerouted = c;
      rerouted.target.backend = EPIGEMM_BACKEND_AUTO;
      CaseRun run_auto = run_case(ctx, rerouted, invoke);
      EXPECT_NE(run_auto.ran, c.target.backend)
          << epigemm_backend_name(c.target.backend) << " declined the case, yet auto ran it";
      run_auto.declined = true;
      return run_auto;
    }
    EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS)
        << "epigemm_gemm_workspace_size: " << epigemm_status_name(status) << ": "
        << epigemm_context_last_error(ctx);
    if (status != EPIGEMM_STATUS_SUCCESS) return run;
  }
  Workspace workspace(workspace_bytes, memory);
  Stream stream(memory);

  const epigemm_status_t status =
      invoke(ctx, c, v, workspace.data(), workspace.bytes(), stream.get());
  if (memory == EPIGEMM_MEMORY_DEVICE) {
    stream.synchronize();
    run.after.download(c, stream.get());
  }
  EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS)
      << "the call returned " << epigemm_status_name(status) << ": "
      << epigemm_context_last_error(ctx);
  if (status != EPIGEMM_STATUS_SUCCESS) return run;

  run.ran = expect_target_ran(ctx, c.target);
  run.ok = run.ran != EPIGEMM_BACKEND_AUTO;
  if (run.ok) ++case_counts()[run.ran].ran;
  return run;
}

int64_t declined_case_count(epigemm_backend_t backend) { return case_counts()[backend].declined; }
int64_t ran_case_count(epigemm_backend_t backend) { return case_counts()[backend].ran; }

epigemm_backend_t expect_target_ran(epigemm_context_t ctx, const Target& target) {
  epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
  const char* reason = nullptr;
  EXPECT_EQ(epigemm_context_last_backend(ctx, &ran, &reason), EPIGEMM_STATUS_SUCCESS);
  const std::string why = reason ? reason : "(no reason)";
  if (target.backend != EPIGEMM_BACKEND_AUTO) {
    EXPECT_EQ(ran, target.backend) << "requested " << epigemm_backend_name(target.backend)
                                   << " but " << epigemm_backend_name(ran) << " ran: " << why;
    return ran == target.backend ? ran : EPIGEMM_BACKEND_AUTO;
  }
  EXPECT_NE(ran, EPIGEMM_BACKEND_AUTO) << "auto: no backend reported: " << why;
  EXPECT_EQ(backend_memory(ran), target.memory)
      << "auto chose " << epigemm_backend_name(ran) << ", which does not work on "
      << (target.memory == EPIGEMM_MEMORY_DEVICE ? "device" : "host") << " memory: " << why;
  return backend_memory(ran) == target.memory ? ran : EPIGEMM_BACKEND_AUTO;
}

// ---- layer level -----------------------------------------------------------------------------

Tensor row_major_tensor(epigemm_dtype_t dtype, int64_t rows, int64_t cols, int64_t row_stride,
                        bool misaligned) {
  return Tensor(dtype, cols, rows, row_stride, misaligned);
}

bool run_layer_call(epigemm_context_t ctx, const Target& target, const std::vector<Tensor*>& tensors,
                    int64_t tokens, int64_t in_features, int64_t out_features,
                    epigemm_dtype_t dtype, const LayerCall& call) {
  EXPECT_EQ(epigemm_context_set_backend(ctx, target.backend), EPIGEMM_STATUS_SUCCESS);
  const epigemm_memory_t memory = target.memory;
  if (memory == EPIGEMM_MEMORY_DEVICE) {
    for (Tensor* t : tensors) t->upload();
  }
  size_t bytes = 0;
  const epigemm_status_t sized = epigemm_linear_workspace_size(ctx, tokens, in_features,
                                                               out_features, dtype, memory, &bytes);
  EXPECT_EQ(sized, EPIGEMM_STATUS_SUCCESS)
      << "epigemm_linear_workspace_size: " << epigemm_context_last_error(ctx);
  if (sized != EPIGEMM_STATUS_SUCCESS) return false;
  Workspace workspace(bytes, memory);
  Stream stream(memory);
  const epigemm_status_t status = call(memory, workspace.data(), workspace.bytes(), stream.get());
  if (memory == EPIGEMM_MEMORY_DEVICE) {
    stream.synchronize();
    for (Tensor* t : tensors) t->download(stream.get());
  }
  if (status == EPIGEMM_STATUS_NOT_SUPPORTED && target.backend != EPIGEMM_BACKEND_AUTO) {
    // Declined by the requested backend: under auto the same call must run elsewhere.
    ++case_counts()[target.backend].declined;
    const Target rerouted{EPIGEMM_BACKEND_AUTO, target.memory};
    const bool ok = run_layer_call(ctx, rerouted, tensors, tokens, in_features, out_features, dtype, call);
    epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
    epigemm_context_last_backend(ctx, &ran, nullptr);
    EXPECT_NE(ran, target.backend) << epigemm_backend_name(target.backend) << " declined, yet auto ran it";
    return ok;
  }
  EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS)
      << "the call returned " << epigemm_status_name(status) << ": "
      << epigemm_context_last_error(ctx);
  if (status != EPIGEMM_STATUS_SUCCESS) return false;
  return expect_target_ran(ctx, target) != EPIGEMM_BACKEND_AUTO;
}

void run_and_check(epigemm_context_t ctx, const GemmCase& c, const Invoke& invoke) {
  SCOPED_TRACE(c.describe());
  const CaseRun run = run_case(ctx, c, invoke);
  check_case(ctx, c, run);
}

}  // namespace epigemm_test
