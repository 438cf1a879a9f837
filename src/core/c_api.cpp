// The C boundary: builds a GemmCall from the public structs, runs it through the context, and
// turns the internal Status into epigemm_status_t plus the context's last-error message.
// No exception crosses this file's functions.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/context.hpp"
#include "core/layer_mapping.hpp"
#include "core/names.hpp"
#include "core/validate.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {
namespace {

// What epigemm_gemm_desc_create makes: the settings of epigemm_gemm's description.
struct GemmDescription {
  epigemm_op_t transa = EPIGEMM_OP_N;
  epigemm_op_t transb = EPIGEMM_OP_N;
  float alpha = 1.0f;
  float beta = 0.0f;
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  bool has_bias = false;
  epigemm_vector_t bias{};
  bool has_aux = false;
  epigemm_matrix_t aux{};
  bool has_bias_grad = false;
  epigemm_vector_t bias_grad{};
  bool allow_tf32 = false;
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
};

// ---- handles -----------------------------------------------------------------------------------
// epigemm_context_t and epigemm_gemm_desc_t are serial numbers, not addresses: a registry maps
// each live handle to its object. Every entry point looks its handle up, so a handle that was
// never created, was destroyed already, or is of the other kind is refused with INVALID_VALUE
// without any memory behind it being touched (a double destroy, a description passed as a
// context). Serial numbers are never reused within a process, so a stale handle stays refused
// after its object's memory has gone to a new one. The lookup is a mutex and a hash lookup per
// call (docs/dev/robustness.md has its measured cost); a context is used by one thread at a time
// and so is never destroyed while it is in use, and a description is not destroyed while it is
// read (docs/conventions.md, "Threads").
enum class HandleKind { context, description };

class HandleRegistry {
 public:
  // A new handle for `object` (owned by the caller until remove() hands it back).
  uintptr_t add(HandleKind kind, void* object) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The serial number times an odd constant: a bijection, so never NULL or repeated, and spread
    // over the whole range, so that a stray value (a small integer, a heap or stack address) is
    // not a live handle but with a chance of about one in 2^64 per live handle.
    const uintptr_t handle = uintptr_t(++serials_) * uintptr_t(0x9e3779b97f4a7c15u);
    live_.emplace(handle, Entry{kind, object});
    return handle;
  }
  // The object of a live handle of this kind, or nullptr.
  void* find(HandleKind kind, uintptr_t handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto entry = live_.find(handle);
    return entry != live_.end() && entry->second.kind == kind ? entry->second.object : nullptr;
  }
  // Ends a live handle of this kind and returns its object for the caller to delete, or nullptr.
  void* remove(HandleKind kind, uintptr_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto entry = live_.find(handle);
    if (entry == live_.end() || entry->second.kind != kind) return nullptr;
    void* object = entry->second.object;
    live_.erase(entry);
    return object;
  }

 private:
  struct Entry {
    HandleKind kind;
    void* object;
  };
  mutable std::mutex mutex_;
  uint64_t serials_ = 0;
  std::unordered_map<uintptr_t, Entry> live_;
};

HandleRegistry& handles() {
  // Never destroyed: a handle may be destroyed from the destructor of a caller's static object,
  // after this function's statics would have been.
  static HandleRegistry* const registry = new HandleRegistry();
  return *registry;
}

Context* find_context(epigemm_context_t ctx) {
  return static_cast<Context*>(
      handles().find(HandleKind::context, reinterpret_cast<uintptr_t>(ctx)));
}

GemmDescription* find_description(epigemm_gemm_desc_t desc) {
  return static_cast<GemmDescription*>(
      handles().find(HandleKind::description, reinterpret_cast<uintptr_t>(desc)));
}

// Creates an Object, registers it, and writes its new handle to *out.
template <typename Object, typename Handle>
epigemm_status_t create_handle(HandleKind kind, Handle* out) {
  if (out == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  *out = nullptr;
  try {
    auto object = std::make_unique<Object>();
    *out = reinterpret_cast<Handle>(handles().add(kind, object.get()));
    object.release();  // owned through the registry until destroy_handle
  } catch (const std::bad_alloc&) {
    return EPIGEMM_STATUS_OUT_OF_MEMORY;
  } catch (...) {
    return EPIGEMM_STATUS_INTERNAL_ERROR;
  }
  return EPIGEMM_STATUS_SUCCESS;
}

// Ends a live handle of this kind and deletes its object (whose destructor does not throw: the
// backends release their own handles there). NULL does nothing, as free(NULL).
template <typename Object, typename Handle>
epigemm_status_t destroy_handle(HandleKind kind, Handle handle) {
  if (handle == nullptr) return EPIGEMM_STATUS_SUCCESS;
  void* object = handles().remove(kind, reinterpret_cast<uintptr_t>(handle));
  if (object == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;  // destroyed already, or another kind
  delete static_cast<Object*>(object);
  return EPIGEMM_STATUS_SUCCESS;
}

std::string address(const void* handle) {
  std::ostringstream out;
  out << handle;
  return out.str();
}

Matrix to_matrix(const epigemm_matrix_t& m) {
  Matrix out;
  out.data = m.data;
  out.dtype = m.dtype;
  out.rows = m.rows;
  out.cols = m.cols;
  out.ld = m.ld;
  out.memory = m.memory;
  return out;
}

// Runs `body` (returning Status), records the outcome in the context, converts exceptions.
template <typename Body>
epigemm_status_t guarded(epigemm_context_t ctx, Body&& body) {
  Context* const context = find_context(ctx);
  if (context == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;  // no context to keep a message in
  Status status;
  try {
    status = body(*context);
  } catch (const std::bad_alloc&) {
    status = Status(EPIGEMM_STATUS_OUT_OF_MEMORY, "host memory allocation failed");
  } catch (const std::exception& e) {
    status = Status(EPIGEMM_STATUS_INTERNAL_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    status = Status(EPIGEMM_STATUS_INTERNAL_ERROR, "internal error: unknown exception");
  }
  try {
    context->last_error = status.ok() ? std::string() : status.message();
  } catch (...) {
    // Keeping the message needs memory; the status code still tells the caller.
  }
  return status.code();
}

Status require(const void* pointer, const char* name) {
  if (pointer == nullptr) return invalid(name, " is NULL; expected a descriptor");
  return Status();
}

// The GEMM-level description call: the description's settings plus A, B, D.
Status call_from_desc(epigemm_gemm_desc_t handle, const epigemm_matrix_t* A,
                      const epigemm_matrix_t* B, const epigemm_matrix_t* D, GemmCall* call) {
  if (handle == nullptr) return invalid("desc is NULL; expected a description from epigemm_gemm_desc_create");
  const GemmDescription* desc = find_description(handle);
  if (desc == nullptr) {
    return invalid("desc is ", address(handle), ", not a live description (never created, already "
                   "destroyed, or a context); expected one from epigemm_gemm_desc_create");
  }
  EPIGEMM_RETURN_IF_ERROR(require(A, "A"));
  EPIGEMM_RETURN_IF_ERROR(require(B, "B"));
  EPIGEMM_RETURN_IF_ERROR(require(D, "D"));
  call->transa = desc->transa;
  call->transb = desc->transb;
  call->alpha = desc->alpha;
  call->beta = desc->beta;
  call->epilogue = desc->epilogue;
  call->activation = desc->activation;
  call->has_bias = desc->has_bias;
  call->bias = to_vector(desc->bias);
  call->has_aux = desc->has_aux;
  call->aux = to_matrix(desc->aux);
  call->has_bias_grad = desc->has_bias_grad;
  call->bias_grad = to_vector(desc->bias_grad);
  call->allow_tf32 = desc->allow_tf32;
  call->backend = desc->backend;
  call->a = to_matrix(*A);
  call->b = to_matrix(*B);
  call->d = to_matrix(*D);
  EPIGEMM_RETURN_IF_ERROR(validate_enums(*call));
  gemm_dims_from_operands(call);
  return Status();
}

// The classic decision table (docs/conventions.md, "Classic call").
epigemm_epilogue_t classic_epilogue(bool bias, bool pre_gelu, bool grad) {
  if (!bias && !pre_gelu) return EPIGEMM_EPILOGUE_DEFAULT;
  if (bias && !pre_gelu) return grad ? EPIGEMM_EPILOGUE_BGRADB : EPIGEMM_EPILOGUE_BIAS;
  if (!bias && pre_gelu) return grad ? EPIGEMM_EPILOGUE_DGELU : EPIGEMM_EPILOGUE_GELU_AUX;
  return grad ? EPIGEMM_EPILOGUE_DGELU_BGRAD : EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
}

void apply_context_defaults(const Context& context, GemmCall* call) {
  call->backend = context.default_backend;
  call->allow_tf32 = context.default_allow_tf32;
}

void attach_workspace(void* workspace, size_t workspace_bytes, void* stream, GemmCall* call) {
  call->workspace = workspace;
  call->workspace_bytes = workspace_bytes;
  call->stream = stream;
}

// The GemmCall that the classic call's arguments mean (the decision table above), without
// workspace and stream.
Status classic_call(const Context& context, const epigemm_matrix_t* A, const epigemm_matrix_t* B,
                    const epigemm_matrix_t* D, const epigemm_vector_t* bias,
                    const epigemm_matrix_t* pre_gelu_out, epigemm_op_t transa, epigemm_op_t transb,
                    int grad, int accumulate, GemmCall* call) {
  EPIGEMM_RETURN_IF_ERROR(require(A, "A"));
  EPIGEMM_RETURN_IF_ERROR(require(B, "B"));
  EPIGEMM_RETURN_IF_ERROR(require(D, "D"));
  const bool has_bias = bias != nullptr && bias->data != nullptr;
  const bool has_pre_gelu = pre_gelu_out != nullptr && pre_gelu_out->data != nullptr;
  // A pre_gelu_out with NULL data counts as not given (the table): an empty one, as a framework
  // hands it for tokens = 0, then picks the row without it, whose bias length differs. The bias's
  // messages say so.
  const bool pre_gelu_not_given = pre_gelu_out != nullptr && !has_pre_gelu;
  call->transa = transa;
  call->transb = transb;
  call->a = to_matrix(*A);
  call->b = to_matrix(*B);
  call->d = to_matrix(*D);
  call->beta = accumulate ? 1.0f : 0.0f;
  call->epilogue = classic_epilogue(has_bias, has_pre_gelu, grad != 0);
  call->names.workspace_query = "epigemm_classic_gemm_workspace_size";
  if (has_bias) {
    // With grad, the classic call's bias is the bias gradient it writes.
    if (epilogue_parts(call->epilogue, call->activation).writes_bias_grad()) {
      call->has_bias_grad = true;
      call->bias_grad = to_vector(*bias);
      call->names.bias_grad = pre_gelu_not_given
                                  ? "bias (the bias gradient, with grad; pre_gelu_out has NULL data: not given)"
                                  : "bias (the bias gradient, with grad)";
    } else {
      call->has_bias = true;
      call->bias = to_vector(*bias);
      if (pre_gelu_not_given) call->names.bias = "bias (pre_gelu_out has NULL data: not given)";
    }
  }
  if (has_pre_gelu) {
    call->has_aux = true;
    call->aux = to_matrix(*pre_gelu_out);
    call->names.aux = "pre_gelu_out";
  }
  apply_context_defaults(context, call);
  EPIGEMM_RETURN_IF_ERROR(validate_enums(*call));
  gemm_dims_from_operands(call);
  return Status();
}

}  // namespace
}  // namespace epigemm

using epigemm::Context;
using epigemm::GemmCall;
using epigemm::GemmDescription;
using epigemm::Status;

// "0.1.0" from the header's EPIGEMM_VERSION_* at compile time.
#define EPIGEMM_STRINGIFY_NUMBER(x) #x
#define EPIGEMM_VERSION_STRING(major, minor, patch) \
  EPIGEMM_STRINGIFY_NUMBER(major) "." EPIGEMM_STRINGIFY_NUMBER(minor) "." EPIGEMM_STRINGIFY_NUMBER(patch)

namespace epigemm {
namespace {

// The forward pass with an activation: ACT(_BIAS) without pre_act, ACT_AUX(_BIAS) with it; the
// identity without pre_act is BIAS / DEFAULT.
Status linear_fprop(Context& context, const epigemm_tensor_t* X, const epigemm_tensor_t* W,
                    const epigemm_vector_t* bias, epigemm_activation_t activation,
                    const epigemm_tensor_t* pre_act, const char* pre_act_name,
                    const epigemm_tensor_t* Y, void* workspace, size_t workspace_bytes,
                    void* stream) {
  EPIGEMM_RETURN_IF_ERROR(check_activation(activation));
  LayerTensors tensors;
  tensors.x = X;
  tensors.w = W;
  tensors.y = Y;
  tensors.pre_act = pre_act;
  tensors.pre_act_name = pre_act_name;
  tensors.bias = bias;
  GemmCall call;
  EPIGEMM_RETURN_IF_ERROR(map_layer_to_gemm(LayerPass::fprop, tensors, &call));
  const bool identity = activation == EPIGEMM_ACTIVATION_IDENTITY;
  if (pre_act != nullptr) {
    call.epilogue = bias ? EPIGEMM_EPILOGUE_ACT_AUX_BIAS : EPIGEMM_EPILOGUE_ACT_AUX;
  } else if (!identity) {
    call.epilogue = bias ? EPIGEMM_EPILOGUE_ACT_BIAS : EPIGEMM_EPILOGUE_ACT;
  } else {
    call.epilogue = bias ? EPIGEMM_EPILOGUE_BIAS : EPIGEMM_EPILOGUE_DEFAULT;
  }
  call.activation = activation;
  apply_context_defaults(context, &call);
  attach_workspace(workspace, workspace_bytes, stream, &call);
  return context.execute(call);
}

// The data gradient, through the previous layer's activation when pre_act is given (DACT, or
// DACT_BGRAD with bias_grad).
Status linear_dgrad(Context& context, const epigemm_tensor_t* dY, const epigemm_tensor_t* W,
                    epigemm_activation_t activation, const epigemm_tensor_t* pre_act,
                    const char* pre_act_name, const epigemm_vector_t* bias_grad,
                    const epigemm_tensor_t* dX, void* workspace, size_t workspace_bytes,
                    void* stream) {
  EPIGEMM_RETURN_IF_ERROR(check_activation(activation));
  LayerTensors tensors;
  tensors.dy = dY;
  tensors.w = W;
  tensors.dx = dX;
  tensors.pre_act = pre_act;
  tensors.pre_act_name = pre_act_name;
  tensors.bias_grad = bias_grad;
  GemmCall call;
  EPIGEMM_RETURN_IF_ERROR(map_layer_to_gemm(LayerPass::dgrad, tensors, &call));
  call.epilogue = pre_act ? (bias_grad ? EPIGEMM_EPILOGUE_DACT_BGRAD : EPIGEMM_EPILOGUE_DACT)
                          : EPIGEMM_EPILOGUE_DEFAULT;
  call.activation = activation;
  apply_context_defaults(context, &call);
  attach_workspace(workspace, workspace_bytes, stream, &call);
  return context.execute(call);
}

// Which calls a linear-layer workspace query covers: the passes, and for the weight gradient
// whether without and / or with accumulate (beta = 1).
struct LinearCallsAsked {
  bool fprop, dgrad, wgrad_plain, wgrad_accumulate;
};

// The workspace the largest of the asked linear-layer calls may need for tensors of these sizes:
// every epilogue each asked pass can carry, with every activation and the bias / bias gradient in
// each dtype a caller may declare for it.
Status linear_workspace_bytes(Context& context, const LinearCallsAsked& asked, int64_t tokens,
                              int64_t in_features, int64_t out_features, epigemm_dtype_t dtype,
                              epigemm_memory_t memory, size_t* bytes) {
  if (bytes == nullptr) return epigemm::invalid("bytes is NULL; expected a pointer to write to");
  if (tokens < 0 || in_features < 0 || out_features < 0) {
    return epigemm::invalid("tokens / in_features / out_features are ", tokens, " / ",
                            in_features, " / ", out_features, "; expected values >= 0");
  }
  // The arguments by their own names (the tensors below are this function's, not the caller's).
  if (!epigemm::dtype_valid(dtype)) {
    return epigemm::invalid("dtype is ", int(dtype), "; expected f32 (0), f16 (1) or bf16 (2)");
  }
  if (memory != EPIGEMM_MEMORY_HOST && memory != EPIGEMM_MEMORY_DEVICE) {
    return epigemm::invalid("memory is ", int(memory), "; expected host (0) or device (1)");
  }
  const struct {
    const char* name;
    int64_t rows, cols;
    const char* cols_name;
  } layer_tensors[] = {{"a [tokens, in_features] tensor", tokens, in_features, "in_features"},
                       {"a [tokens, out_features] tensor", tokens, out_features, "out_features"},
                       {"an [out_features, in_features] tensor", out_features, in_features, "in_features"}};
  for (const auto& t : layer_tensors) {
    EPIGEMM_RETURN_IF_ERROR(
        epigemm::check_span(t.name, t.cols, t.rows, std::max<int64_t>(t.cols, 1), t.cols_name, dtype));
  }
  // Distinct, aligned, never dereferenced addresses: only the sizes matter here.
  auto fake = [](int slot) { return reinterpret_cast<void*>(uintptr_t(slot + 1) << 44); };
  auto tensor = [&](int slot, int64_t rows, int64_t cols) {
    return epigemm_tensor_t{fake(slot), dtype, rows, cols, std::max<int64_t>(cols, 1), memory};
  };
  const epigemm_tensor_t x = tensor(0, tokens, in_features), w = tensor(1, out_features, in_features);
  const epigemm_tensor_t y = tensor(2, tokens, out_features), dy = tensor(3, tokens, out_features);
  const epigemm_tensor_t dx = tensor(4, tokens, in_features), dw = tensor(5, out_features, in_features);
  const epigemm_tensor_t pre_out = tensor(6, tokens, out_features), pre_in = tensor(7, tokens, in_features);
  // Every epilogue each pass can carry, with every activation and the bias / bias gradient in
  // each dtype a caller may declare for it (independent of the tensors' dtype, e.g. fp32 bias
  // gradients of a bf16 layer): which backend auto picks, and what it needs, can depend on all.
  struct Case {
    epigemm::LayerPass pass;
    epigemm::LayerTensors tensors;
    std::vector<epigemm_epilogue_t> epilogues;
  };
  const Case cases[] = {
      {epigemm::LayerPass::fprop, {&x, &w, nullptr, &y, nullptr, nullptr, &pre_out},
       {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS, EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS,
        EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_EPILOGUE_ACT_AUX_BIAS}},
      {epigemm::LayerPass::dgrad, {nullptr, &w, &dy, nullptr, &dx, nullptr, &pre_in},
       {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD}},
      {epigemm::LayerPass::wgrad, {&x, nullptr, &dy, nullptr, nullptr, &dw, nullptr},
       {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BGRADB}},
  };
  // The weight gradient also with accumulate (beta = 1), which a backend may serve otherwise (the
  // cuda backend rounds a 16-bit dW once through its fp32 intermediate: 4 x out x in bytes).
  auto is_asked = [&](epigemm::LayerPass pass, float beta) {
    switch (pass) {
      case epigemm::LayerPass::fprop: return asked.fprop && beta == 0.0f;
      case epigemm::LayerPass::dgrad: return asked.dgrad && beta == 0.0f;
      case epigemm::LayerPass::wgrad: return beta == 0.0f ? asked.wgrad_plain : asked.wgrad_accumulate;
    }
    return false;
  };
  size_t most = 0;
  for (const Case& c : cases) {
    for (const epigemm_epilogue_t epilogue : c.epilogues) {
      for (int activation = 0; epigemm::activation_value_valid(epigemm_activation_t(activation)); ++activation) {
        for (const epigemm_dtype_t vector_dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16}) {
          for (const float beta : {0.0f, 1.0f}) {
            if (!is_asked(c.pass, beta)) continue;
            GemmCall call;
            EPIGEMM_RETURN_IF_ERROR(epigemm::map_layer_to_gemm(c.pass, c.tensors, &call));
            epigemm::apply_context_defaults(context, &call);
            call.beta = beta;
            call.epilogue = epilogue;
            call.activation = epigemm_activation_t(activation);
            const epigemm::EpilogueParts parts = call.parts();
            call.has_aux = parts.uses_aux();
            call.has_bias = parts.reads_bias();
            call.has_bias_grad = parts.writes_bias_grad();
            const epigemm_vector_t vec{fake(8), vector_dtype, call.bias_grad_length(), memory};
            call.bias = call.bias_grad = epigemm::to_vector(vec);
            // A requested backend that declines one of these calls needs no workspace for it:
            // that call will itself answer NOT_SUPPORTED.
            size_t needed = 0;
            const Status sized = context.workspace_bytes(call, &needed);
            if (sized.code() == EPIGEMM_STATUS_NOT_SUPPORTED && call.backend != EPIGEMM_BACKEND_AUTO) continue;
            EPIGEMM_RETURN_IF_ERROR(sized);
            most = std::max(most, needed);
          }
        }
      }
    }
  }
  *bytes = most;
  return Status();
}

}  // namespace
}  // namespace epigemm

extern "C" {

const char* epigemm_get_version(void) {
  return EPIGEMM_VERSION_STRING(EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
}

epigemm_status_t epigemm_context_create(epigemm_context_t* ctx) {
  return epigemm::create_handle<Context>(epigemm::HandleKind::context, ctx);
}

epigemm_status_t epigemm_context_destroy(epigemm_context_t ctx) {
  return epigemm::destroy_handle<Context>(epigemm::HandleKind::context, ctx);
}

const char* epigemm_context_last_error(epigemm_context_t ctx) {
  if (ctx == nullptr) return "ctx is NULL; expected a context from epigemm_context_create";
  const Context* context = epigemm::find_context(ctx);
  if (context == nullptr) {
    return "ctx is not a live context (never created, already destroyed, or a description); "
           "expected one from epigemm_context_create";
  }
  return context->last_error.c_str();
}

epigemm_status_t epigemm_context_last_backend(epigemm_context_t ctx, epigemm_backend_t* backend,
                                              const char** reason) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (backend == nullptr) return epigemm::invalid("backend is NULL; expected a pointer to write to");
    *backend = context.last_selection.backend;
    if (reason != nullptr) {
      context.last_reason = context.last_selection.text();
      *reason = context.last_reason.c_str();
    }
    return Status();
  });
}

epigemm_status_t epigemm_context_set_backend(epigemm_context_t ctx, epigemm_backend_t backend) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (int(backend) < EPIGEMM_BACKEND_AUTO || int(backend) > EPIGEMM_BACKEND_CUTLASS) {
      return epigemm::invalid("backend has value ", int(backend), "; expected 0 (auto) .. 5 (cutlass)");
    }
    context.default_backend = backend;
    return Status();
  });
}

epigemm_status_t epigemm_context_set_allow_tf32(epigemm_context_t ctx, int allow_tf32) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    context.default_allow_tf32 = allow_tf32 != 0;
    return Status();
  });
}

int epigemm_backend_usable(epigemm_context_t ctx, epigemm_backend_t backend) {
  const Context* context = epigemm::find_context(ctx);
  if (context == nullptr) return 0;
  if (backend == EPIGEMM_BACKEND_AUTO) return 1;
  return context->usable(backend) ? 1 : 0;
}

int epigemm_backend_compiled(epigemm_context_t ctx, epigemm_backend_t backend) {
  const Context* context = epigemm::find_context(ctx);
  if (context == nullptr) return 0;
  if (backend == EPIGEMM_BACKEND_AUTO) return 1;
  return context->find(backend) != nullptr ? 1 : 0;
}

const char* epigemm_backend_name(epigemm_backend_t backend) { return epigemm::backend_name(backend); }
const char* epigemm_epilogue_name(epigemm_epilogue_t epilogue) { return epigemm::epilogue_name(epilogue); }
const char* epigemm_activation_name(epigemm_activation_t activation) {
  return epigemm::activation_name(activation);
}
const char* epigemm_dtype_name(epigemm_dtype_t dtype) { return epigemm::dtype_name(dtype); }
const char* epigemm_status_name(epigemm_status_t status) { return epigemm::status_name(status); }

epigemm_status_t epigemm_gemm_desc_create(epigemm_gemm_desc_t* desc) {
  return epigemm::create_handle<GemmDescription>(epigemm::HandleKind::description, desc);
}

epigemm_status_t epigemm_gemm_desc_destroy(epigemm_gemm_desc_t desc) {
  return epigemm::destroy_handle<GemmDescription>(epigemm::HandleKind::description, desc);
}

// Setters store what they are given; epigemm_gemm validates it (with a message) before use.
epigemm_status_t epigemm_gemm_desc_set_transpose(epigemm_gemm_desc_t desc, epigemm_op_t transa,
                                                 epigemm_op_t transb) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->transa = transa;
  description->transb = transb;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_scalars(epigemm_gemm_desc_t desc, float alpha, float beta) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->alpha = alpha;
  description->beta = beta;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_epilogue(epigemm_gemm_desc_t desc,
                                                epigemm_epilogue_t epilogue) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->epilogue = epilogue;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_activation(epigemm_gemm_desc_t desc,
                                                  epigemm_activation_t activation) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->activation = activation;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_bias(epigemm_gemm_desc_t desc, const epigemm_vector_t* bias) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->has_bias = bias != nullptr;
  description->bias = bias ? *bias : epigemm_vector_t{};
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_aux(epigemm_gemm_desc_t desc, const epigemm_matrix_t* aux) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->has_aux = aux != nullptr;
  description->aux = aux ? *aux : epigemm_matrix_t{};
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_bias_grad(epigemm_gemm_desc_t desc,
                                                 const epigemm_vector_t* bias_grad) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->has_bias_grad = bias_grad != nullptr;
  description->bias_grad = bias_grad ? *bias_grad : epigemm_vector_t{};
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_allow_tf32(epigemm_gemm_desc_t desc, int allow_tf32) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->allow_tf32 = allow_tf32 != 0;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_desc_set_backend(epigemm_gemm_desc_t desc, epigemm_backend_t backend) {
  GemmDescription* description = epigemm::find_description(desc);
  if (description == nullptr) return EPIGEMM_STATUS_INVALID_VALUE;
  description->backend = backend;
  return EPIGEMM_STATUS_SUCCESS;
}

epigemm_status_t epigemm_gemm_workspace_size(epigemm_context_t ctx, epigemm_gemm_desc_t desc,
                                             const epigemm_matrix_t* A, const epigemm_matrix_t* B,
                                             const epigemm_matrix_t* D, size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (bytes == nullptr) return epigemm::invalid("bytes is NULL; expected a pointer to write to");
    GemmCall call;
    EPIGEMM_RETURN_IF_ERROR(epigemm::call_from_desc(desc, A, B, D, &call));
    EPIGEMM_RETURN_IF_ERROR(epigemm::validate_gemm_call(call));
    return context.workspace_bytes(call, bytes);
  });
}

epigemm_status_t epigemm_gemm(epigemm_context_t ctx, epigemm_gemm_desc_t desc,
                              const epigemm_matrix_t* A, const epigemm_matrix_t* B,
                              const epigemm_matrix_t* D, void* workspace, size_t workspace_bytes,
                              void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    GemmCall call;
    EPIGEMM_RETURN_IF_ERROR(epigemm::call_from_desc(desc, A, B, D, &call));
    epigemm::attach_workspace(workspace, workspace_bytes, stream, &call);
    return context.execute(call);
  });
}

epigemm_status_t epigemm_classic_gemm_workspace_size(
    epigemm_context_t ctx, const epigemm_matrix_t* A, const epigemm_matrix_t* B,
    const epigemm_matrix_t* D, const epigemm_vector_t* bias, const epigemm_matrix_t* pre_gelu_out,
    epigemm_op_t transa, epigemm_op_t transb, int grad, int accumulate, size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (bytes == nullptr) return epigemm::invalid("bytes is NULL; expected a pointer to write to");
    GemmCall call;
    EPIGEMM_RETURN_IF_ERROR(epigemm::classic_call(context, A, B, D, bias, pre_gelu_out, transa,
                                                  transb, grad, accumulate, &call));
    EPIGEMM_RETURN_IF_ERROR(epigemm::validate_gemm_call(call));
    return context.workspace_bytes(call, bytes);
  });
}

epigemm_status_t epigemm_classic_gemm(epigemm_context_t ctx, const epigemm_matrix_t* A,
                                      const epigemm_matrix_t* B, const epigemm_matrix_t* D,
                                      const epigemm_vector_t* bias,
                                      const epigemm_matrix_t* pre_gelu_out, epigemm_op_t transa,
                                      epigemm_op_t transb, int grad, void* workspace,
                                      size_t workspace_bytes, int accumulate, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    GemmCall call;
    EPIGEMM_RETURN_IF_ERROR(epigemm::classic_call(context, A, B, D, bias, pre_gelu_out, transa,
                                                  transb, grad, accumulate, &call));
    epigemm::attach_workspace(workspace, workspace_bytes, stream, &call);
    return context.execute(call);
  });
}

epigemm_status_t epigemm_linear_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                               int64_t in_features, int64_t out_features,
                                               epigemm_dtype_t dtype, epigemm_memory_t memory,
                                               size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_workspace_bytes(context, {true, true, true, true}, tokens, in_features,
                                           out_features, dtype, memory, bytes);
  });
}

epigemm_status_t epigemm_linear_fprop_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_workspace_bytes(context, {true, false, false, false}, tokens, in_features,
                                           out_features, dtype, memory, bytes);
  });
}

epigemm_status_t epigemm_linear_dgrad_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_workspace_bytes(context, {false, true, false, false}, tokens, in_features,
                                           out_features, dtype, memory, bytes);
  });
}

epigemm_status_t epigemm_linear_wgrad_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     int accumulate, size_t* bytes) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_workspace_bytes(context, {false, false, accumulate == 0, accumulate != 0}, tokens,
                                           in_features, out_features, dtype, memory, bytes);
  });
}

epigemm_status_t epigemm_linear_fprop(epigemm_context_t ctx, const epigemm_tensor_t* X,
                                      const epigemm_tensor_t* W, const epigemm_vector_t* bias,
                                      const epigemm_tensor_t* pre_gelu, const epigemm_tensor_t* Y,
                                      void* workspace, size_t workspace_bytes, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    const epigemm_activation_t activation =
        pre_gelu ? EPIGEMM_ACTIVATION_GELU_TANH : EPIGEMM_ACTIVATION_IDENTITY;
    return epigemm::linear_fprop(context, X, W, bias, activation, pre_gelu, "pre_gelu", Y,
                                 workspace, workspace_bytes, stream);
  });
}

epigemm_status_t epigemm_linear_fprop_act(epigemm_context_t ctx, const epigemm_tensor_t* X,
                                          const epigemm_tensor_t* W, const epigemm_vector_t* bias,
                                          epigemm_activation_t activation,
                                          const epigemm_tensor_t* pre_act, const epigemm_tensor_t* Y,
                                          void* workspace, size_t workspace_bytes, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_fprop(context, X, W, bias, activation, pre_act, "pre_act", Y, workspace,
                                 workspace_bytes, stream);
  });
}

epigemm_status_t epigemm_linear_dgrad(epigemm_context_t ctx, const epigemm_tensor_t* dY,
                                      const epigemm_tensor_t* W, const epigemm_tensor_t* pre_gelu,
                                      const epigemm_vector_t* bias_grad, const epigemm_tensor_t* dX,
                                      void* workspace, size_t workspace_bytes, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    return epigemm::linear_dgrad(context, dY, W, EPIGEMM_ACTIVATION_GELU_TANH, pre_gelu, "pre_gelu",
                                 bias_grad, dX, workspace, workspace_bytes, stream);
  });
}

epigemm_status_t epigemm_linear_dgrad_act(epigemm_context_t ctx, const epigemm_tensor_t* dY,
                                          const epigemm_tensor_t* W, epigemm_activation_t activation,
                                          const epigemm_tensor_t* pre_act,
                                          const epigemm_vector_t* bias_grad,
                                          const epigemm_tensor_t* dX, void* workspace,
                                          size_t workspace_bytes, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (pre_act == nullptr) {
      return epigemm::invalid("pre_act is NULL; expected the previous layer's saved pre-activation ",
                              "[tokens, in_features] (epigemm_linear_dgrad computes dX without one)");
    }
    return epigemm::linear_dgrad(context, dY, W, activation, pre_act, "pre_act", bias_grad, dX,
                                 workspace, workspace_bytes, stream);
  });
}

epigemm_status_t epigemm_linear_wgrad(epigemm_context_t ctx, const epigemm_tensor_t* X,
                                      const epigemm_tensor_t* dY, const epigemm_tensor_t* dW,
                                      int accumulate, const epigemm_vector_t* bias_grad,
                                      void* workspace, size_t workspace_bytes, void* stream) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    epigemm::LayerTensors tensors;
    tensors.x = X;
    tensors.dy = dY;
    tensors.dw = dW;
    tensors.bias_grad = bias_grad;
    GemmCall call;
    EPIGEMM_RETURN_IF_ERROR(epigemm::map_layer_to_gemm(epigemm::LayerPass::wgrad, tensors, &call));
    call.beta = accumulate ? 1.0f : 0.0f;
    call.epilogue = bias_grad ? EPIGEMM_EPILOGUE_BGRADB : EPIGEMM_EPILOGUE_DEFAULT;
    epigemm::apply_context_defaults(context, &call);
    epigemm::attach_workspace(workspace, workspace_bytes, stream, &call);
    return context.execute(call);
  });
}

// ---- backend descriptions ------------------------------------------------------------------

epigemm_status_t epigemm_backend_description(epigemm_context_t ctx, epigemm_backend_t backend,
                                             const char** description) {
  return epigemm::guarded(ctx, [&](Context& context) -> Status {
    if (description == nullptr) {
      return epigemm::invalid("description is NULL; expected a pointer to write to");
    }
    if (int(backend) < EPIGEMM_BACKEND_AUTO || int(backend) > EPIGEMM_BACKEND_CUTLASS) {
      return epigemm::invalid("backend has value ", int(backend), "; expected 0 (auto) .. 5 (cutlass)");
    }
    if (backend == EPIGEMM_BACKEND_AUTO) {
      context.last_description =
          "the dispatcher: each call runs on the usable backend of highest priority that supports "
          "it, and epigemm_context_last_backend says which and why";
    } else {
      const epigemm::Backend* found = context.find(backend);
      if (found == nullptr) {
        return epigemm::error(EPIGEMM_STATUS_NOT_SUPPORTED, "backend ", epigemm_backend_name(backend),
                              " is not compiled into this build");
      }
      context.last_description = found->description();
    }
    *description = context.last_description.c_str();
    return Status();
  });
}

}  // extern "C"
