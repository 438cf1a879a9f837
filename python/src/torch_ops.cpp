// torch.ops.epigemm_cpp.linear and torch.ops.epigemm_cpp.mlp: the computations and backward
// formulas of python/epigemm/torch.py's eager path as PyTorch operators written in C++, so that a
// training step runs no Python in its backward and dispatches once per layer (or per MLP) in its
// forward (docs/dev/python-package.md, "The MLP step's host time"). Built into the package beside
// the nanobind module when torch's headers are found at configure time (pip install
// --no-build-isolation with torch installed); epigemm.torch uses it for eager calls on plain
// tensors when it is there, and the Python autograd Functions otherwise.
//
// Shapes (row-major, as the layer-level C API takes them):
//   linear(x [tokens, in], weight [out, in], bias [out]?) -> y [tokens, out]
//   mlp(x [tokens, in], w1 [hidden, in], b1 [hidden]?, w2 [out, hidden], b2 [out]?, activation)
//       -> y [tokens, out]; pre = x w1^T + b1 and h = act(pre) are saved for the backward.
// The callers (epigemm/torch.py) pass 2-D contiguous tensors of one dtype (fp32, fp16, bf16) on one
// device; anything else is refused here with the reason, as a RuntimeError.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <cstddef>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "epigemm/epigemm.h"
#include "linear_workspace_query.hpp"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

epigemm_dtype_t dtype_of(const at::Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return EPIGEMM_DTYPE_F32;
    case at::kHalf: return EPIGEMM_DTYPE_F16;
    case at::kBFloat16: return EPIGEMM_DTYPE_BF16;
    default: break;
  }
  TORCH_CHECK(false, "epigemm: ", name, " has dtype ", t.scalar_type(), "; expected float32, float16 or bfloat16");
}

epigemm_memory_t memory_of(const at::Tensor& t) {
  return t.is_cuda() ? EPIGEMM_MEMORY_DEVICE : EPIGEMM_MEMORY_HOST;
}

// Whether a 2-d tensor is a row-major matrix as the C API reads it: unit column stride, and
// rows that follow each other at least a row apart. A stride of a dimension of extent 1 is
// meaningless (PyTorch calls a [1, n] tensor with row stride 0 contiguous), so it is not looked at;
// a [n, 1] column of a wider matrix (strides (m, 1)) or a gradient expanded to [n, 1] (strides
// (0, 1), from y.sum(0) of a one-output layer) keeps its real row stride.
// A tensor without elements has no rows to read, whatever its strides (autograd hands the backward
// of a layer over zero tokens a [0, n] gradient with strides (0, 0)).
bool has_rows_as_the_c_api_reads_them(const at::Tensor& t) {
  if (t.dim() != 2) return false;
  if (t.numel() == 0) return true;
  const int64_t rows = t.size(0), cols = t.size(1);
  return (cols <= 1 || t.stride(1) == 1) && (rows <= 1 || t.stride(0) >= std::max<int64_t>(cols, 1));
}

// A 2-D tensor with rows as above as the C API's row-major tensor [rows, cols] with leading
// dimension ld: its row stride, or cols where it has at most one row (or no columns).
epigemm_tensor_t rows_of(const at::Tensor& t, const char* name) {
  TORCH_CHECK(has_rows_as_the_c_api_reads_them(t), "epigemm: ", name, " has shape ", t.sizes(), " and strides ",
              t.strides(), "; expected a 2-d tensor with contiguous rows, each at least a row after the last");
  const int64_t rows = t.size(0), cols = t.size(1);
  const int64_t ld = rows <= 1 || cols == 0 ? std::max<int64_t>(cols, 1) : t.stride(0);
  return epigemm_tensor_t{t.data_ptr(), dtype_of(t, name), rows, cols, ld, memory_of(t)};
}

// An optional vector (a bias, a bias gradient) as the C API takes it: nullptr when undefined, else
// `storage` filled in.
const epigemm_vector_t* vector_or_null(const at::Tensor& t, const char* name, epigemm_vector_t* storage) {
  if (!t.defined()) return nullptr;
  TORCH_CHECK(t.dim() == 1 && (t.stride(0) == 1 || t.size(0) <= 1), "epigemm: ", name, " has shape ", t.sizes(),
              "; expected a contiguous vector");
  *storage = epigemm_vector_t{t.data_ptr(), dtype_of(t, name), t.size(0), memory_of(t)};
  return storage;
}

// This thread's context for a device (-1: the host), and the workspace it last needed, per
// (device, stream): the C API's contexts serve one thread at a time, and a workspace allocated
// on a stream by the caching allocator is reused only in that stream's order.
struct ThreadState {
  struct Context {
    epigemm_context_t handle = nullptr;
    // The backend and TF32 choice set on the handle: the operators run with the defaults (auto,
    // no TF32), epigemm.linear_fprop's, _dgrad's and _wgrad's path with the caller's (below).
    epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
    bool allow_tf32 = false;
    ~Context() { epigemm_context_destroy(handle); }
  };
  std::map<int, std::unique_ptr<Context>> contexts;
  std::map<std::pair<int, void*>, at::Tensor> workspaces;
  // The pass's workspace query's answers: (pass, device, tokens, in, out, dtype, backend, TF32) -> bytes.
  std::map<std::tuple<int, int, int64_t, int64_t, int64_t, int, int, bool>, size_t> workspace_sizes;
  // The device of this thread's last call through python_linear_fprop, _dgrad or _wgrad (-2: none yet).
  int last_python_device = -2;
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

// What one call needs: the context of the tensors' device, its current stream and a workspace of
// at least the bytes the call may use.
struct CallSite {
  epigemm_context_t ctx = nullptr;
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The operators never accumulate a weight gradient: their wgrad calls are sized by LinearQuery::wgrad.
using epigemm_python::LinearQuery;
using epigemm_python::linear_query_size;

CallSite call_site(LinearQuery pass, const at::Tensor& like, int64_t tokens, int64_t in_features,
                   int64_t out_features, epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO,
                   bool allow_tf32 = false) {
  ThreadState& state = thread_state();
  const int device = like.is_cuda() ? like.get_device() : -1;
  std::unique_ptr<ThreadState::Context>& context = state.contexts[device];
  if (!context) {
    // The C API creates a context's GPU state on the current device (once per thread and device:
    // not a device switch on every call).
    const c10::OptionalDeviceGuard guard(like.is_cuda() ? c10::optional<c10::Device>(like.device()) : c10::nullopt);
    auto created = std::make_unique<ThreadState::Context>();
    TORCH_CHECK(epigemm_context_create(&created->handle) == EPIGEMM_STATUS_SUCCESS,
                "epigemm: epigemm_context_create failed");
    context = std::move(created);
  }
  CallSite site;
  site.ctx = context->handle;
  if (context->backend != backend) {
    TORCH_CHECK(epigemm_context_set_backend(site.ctx, backend) == EPIGEMM_STATUS_SUCCESS,
                "epigemm: ", epigemm_context_last_error(site.ctx));
    context->backend = backend;
  }
  if (context->allow_tf32 != allow_tf32) {
    TORCH_CHECK(epigemm_context_set_allow_tf32(site.ctx, allow_tf32 ? 1 : 0) == EPIGEMM_STATUS_SUCCESS,
                "epigemm: ", epigemm_context_last_error(site.ctx));
    context->allow_tf32 = allow_tf32;
  }
  if (like.is_cuda()) {
    site.stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(like.device()).native_handle();
  }
  const epigemm_dtype_t dtype = dtype_of(like, "x");
  const auto size_key =
      std::make_tuple(int(pass), device, tokens, in_features, out_features, int(dtype), int(backend), allow_tf32);
  auto known = state.workspace_sizes.find(size_key);
  if (known == state.workspace_sizes.end()) {
    size_t asked = 0;
    TORCH_CHECK(linear_query_size(pass, site.ctx, tokens, in_features, out_features, dtype, memory_of(like),
                                    &asked) == EPIGEMM_STATUS_SUCCESS,
                "epigemm: ", epigemm_context_last_error(site.ctx));
    known = state.workspace_sizes.emplace(size_key, asked).first;
  }
  const size_t bytes = known->second;
  at::Tensor& workspace = state.workspaces[{device, site.stream}];
  if (bytes > 0 && (!workspace.defined() || size_t(workspace.numel()) < bytes)) {
    // Rounded up to a MiB so that nearby sizes reuse the buffer (as epigemm/_arrays.py does).
    const int64_t rounded = int64_t((bytes + (size_t(1) << 20) - 1) >> 20 << 20);
    workspace = at::empty({rounded}, like.options().dtype(at::kByte));
  }
  if (workspace.defined()) {
    site.workspace = workspace.data_ptr();
    site.workspace_bytes = size_t(workspace.numel());
  }
  return site;
}

void check_status(epigemm_status_t status, const CallSite& site) {
  TORCH_CHECK(status == EPIGEMM_STATUS_SUCCESS, "epigemm: ", epigemm_context_last_error(site.ctx));
}

epigemm_activation_t activation_of(const std::string& name) {
  if (name == "identity") return EPIGEMM_ACTIVATION_IDENTITY;
  if (name == "gelu_tanh") return EPIGEMM_ACTIVATION_GELU_TANH;
  if (name == "gelu_erf") return EPIGEMM_ACTIVATION_GELU_ERF;
  if (name == "relu") return EPIGEMM_ACTIVATION_RELU;
  if (name == "silu") return EPIGEMM_ACTIVATION_SILU;
  TORCH_CHECK(false, "epigemm: activation is '", name, "'; expected identity, gelu_tanh, gelu_erf, relu or silu");
}

// y [tokens, out] = act(x [tokens, in] w [out, in]^T + bias), and pre = x w^T + bias when `pre`
// is defined (the activation's input, for the backward). The operators run with auto and no TF32;
// epigemm.linear_fprop's path (python_linear_fprop) passes the caller's choice.
// `y_out`, where defined, is where y goes (a [tokens, out] tensor with contiguous rows).
at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, epigemm_activation_t act,
                   const at::Tensor& pre, epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO, bool allow_tf32 = false,
                   const at::Tensor& y_out = at::Tensor()) {
  const int64_t tokens = x.size(0), in_features = x.size(1), out_features = w.size(0);
  at::Tensor y = y_out.defined() ? y_out : at::empty({tokens, out_features}, x.options());
  const CallSite site = call_site(LinearQuery::fprop, x, tokens, in_features, out_features, backend, allow_tf32);
  const epigemm_tensor_t X = rows_of(x, "x"), W = rows_of(w, "weight"), Y = rows_of(y, "y");
  epigemm_vector_t B{};
  epigemm_tensor_t P{};
  if (pre.defined()) P = rows_of(pre, "pre-activation");
  check_status(epigemm_linear_fprop_act(site.ctx, &X, &W, vector_or_null(bias, "bias", &B), act,
                                        pre.defined() ? &P : nullptr, &Y, site.workspace, site.workspace_bytes,
                                        site.stream),
               site);
  return y;
}

// dx [tokens, in] = (dy [tokens, out] w [out, in]) * act'(pre [tokens, in]), and bias_grad [in],
// the sum of dx over tokens, when `bias_grad` is defined. Without an activation, pre is undefined.
// `dx_out`, where defined, is where dx goes (a [tokens, in] tensor with contiguous rows). The
// operators run with auto and no TF32; epigemm.linear_dgrad's path passes the caller's choice.
at::Tensor data_gradient(const at::Tensor& dy, const at::Tensor& w, const at::Tensor& pre, epigemm_activation_t act,
                         const at::Tensor& bias_grad, epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO,
                         bool allow_tf32 = false, const at::Tensor& dx_out = at::Tensor()) {
  const int64_t tokens = dy.size(0), in_features = w.size(1), out_features = w.size(0);
  at::Tensor dx = dx_out.defined() ? dx_out : at::empty({tokens, in_features}, dy.options());
  const CallSite site =
      call_site(LinearQuery::dgrad, dy, tokens, in_features, out_features, backend, allow_tf32);
  const epigemm_tensor_t DY = rows_of(dy, "dy"), W = rows_of(w, "weight"), DX = rows_of(dx, "dx");
  if (pre.defined()) {
    const epigemm_tensor_t P = rows_of(pre, "pre-activation");
    epigemm_vector_t BG{};
    check_status(epigemm_linear_dgrad_act(site.ctx, &DY, &W, act, &P, vector_or_null(bias_grad, "bias_grad", &BG),
                                          &DX, site.workspace, site.workspace_bytes, site.stream),
                 site);
  } else {
    check_status(epigemm_linear_dgrad(site.ctx, &DY, &W, nullptr, nullptr, &DX, site.workspace,
                                      site.workspace_bytes, site.stream),
                 site);
  }
  return dx;
}

// dw [out, in] = dy [tokens, out]^T x [tokens, in], and bias_grad [out], the sum of dy over
// tokens, when `bias_grad` is defined.
// `dw_out`, where defined, is where dw goes (an [out, in] tensor with contiguous rows); with
// `accumulate` dw is added to it. The operators never accumulate and run with auto and no TF32;
// epigemm.linear_wgrad's path passes the caller's choice.
at::Tensor weight_gradient(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& bias_grad,
                           const at::Tensor& dw_out = at::Tensor(), bool accumulate = false,
                           epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO, bool allow_tf32 = false) {
  const int64_t tokens = x.size(0), in_features = x.size(1), out_features = dy.size(1);
  at::Tensor dw = dw_out.defined() ? dw_out : at::empty({out_features, in_features}, x.options());
  const CallSite site = call_site(accumulate ? LinearQuery::wgrad_accumulate : LinearQuery::wgrad, x, tokens,
                                  in_features, out_features, backend, allow_tf32);
  const epigemm_tensor_t X = rows_of(x, "x"), DY = rows_of(dy, "dy"), DW = rows_of(dw, "dw");
  epigemm_vector_t BG{};
  check_status(epigemm_linear_wgrad(site.ctx, &X, &DY, &DW, accumulate ? 1 : 0,
                                    vector_or_null(bias_grad, "bias_grad", &BG),
                                    site.workspace, site.workspace_bytes, site.stream),
               site);
  return dw;
}

// Tensors of the given shapes (each contiguous, of `like`'s dtype and device) as views of one
// allocation, each starting on a 256-byte boundary (what TMA and cuBLASLt's fastest kernels ask
// of a pointer). An empty shape list entry ({}) gives an undefined tensor, and where every entry
// is one, nothing is allocated. One allocation instead of several: on the GPU machine's host an
// at::empty costs about 3.3 us, a tenth of the C call.
std::vector<at::Tensor> views_of_one_allocation(const at::Tensor& like,
                                                const std::vector<std::vector<int64_t>>& shapes) {
  const int64_t align = std::max<int64_t>(1, 256 / int64_t(like.element_size()));
  std::vector<int64_t> offsets;
  int64_t total = 0;
  bool any = false;
  for (const auto& shape : shapes) {
    int64_t elements = 1;
    for (const int64_t extent : shape) elements *= extent;
    offsets.push_back(total);
    if (!shape.empty()) total += (elements + align - 1) / align * align;
    any = any || !shape.empty();
  }
  if (!any) return std::vector<at::Tensor>(shapes.size());
  const at::Tensor buffer = at::empty({total}, like.options());
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<int64_t>& shape = shapes[i];
    if (shape.empty()) {
      views.emplace_back();
      continue;
    }
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
    views.push_back(buffer.as_strided(shape, strides, offsets[i]));
  }
  return views;
}

// Inputs as the C API reads them (a tensor that is contiguous already is returned as it is).
at::Tensor contiguous_or_undefined(const at::Tensor& t) { return t.defined() ? t.contiguous() : t; }

// A gradient as the backward receives it: contiguous rows (autograd may hand over an expanded or
// transposed tensor).
at::Tensor rows_contiguous(const at::Tensor& t) { return has_rows_as_the_c_api_reads_them(t) ? t : t.contiguous(); }

// The tensors the forward saved, contiguous: a saved_tensors_hooks unpack may hand the same values
// back in another layout (a transposed copy, say); one that is contiguous already is returned as it is.
variable_list saved_contiguous(AutogradContext* ctx) {
  variable_list saved = ctx->get_saved_variables();
  for (at::Tensor& t : saved) {
    if (t.defined()) t = t.contiguous();
  }
  return saved;
}

// With create_graph=True autograd runs a backward with gradient recording on, to differentiate the
// gradients again (a gradient penalty, a Hessian-vector product). These backward formulas are
// library calls that record nothing, so a gradient that depends on a tensor requiring a gradient
// would silently lack that dependence: the backward refuses such a pass instead. Which gradients
// depend on what is each layer's (below); a gradient that depends on nothing that varies is right
// as a constant. The Python Functions (epigemm/torch.py) refuse the same passes.
void refuse_a_recorded_backward(const char* layer, bool a_gradient_depends_on_a_varying_tensor) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && a_gradient_depends_on_a_varying_tensor), "epigemm: ", layer,
              "'s backward ran with create_graph=True; expected create_graph=False: epigemm.torch's gradients are "
              "computed once and cannot be differentiated again (use torch.nn's layers for a second derivative)");
}

// Whether an activation's derivative varies with its input: the identity's and relu's are constant
// (almost everywhere), so gradients through them do not depend on the pre-activation.
bool derivative_varies(epigemm_activation_t activation) {
  switch (activation) {
    case EPIGEMM_ACTIVATION_IDENTITY:
    case EPIGEMM_ACTIVATION_RELU: return false;
    case EPIGEMM_ACTIVATION_GELU_TANH:
    case EPIGEMM_ACTIVATION_GELU_ERF:
    case EPIGEMM_ACTIVATION_SILU: return true;
  }
  return true;  // not reached: activation_of() gives only the values above
}

// Which inputs require a gradient, as forward sees them (bit i for input i). The backward's
// needs_input_grad says which gradients this pass computes: torch.autograd.grad(y, x) leaves out a
// weight that requires a gradient all the same, and on which dx depends.
int64_t inputs_requiring_grad(std::initializer_list<const at::Tensor*> inputs) {
  int64_t bits = 0, bit = 1;
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad()) bits |= bit;
    bit <<= 1;
  }
  return bits;
}

// An absent bias is an empty optional: Function::apply registers only the tensors present as
// inputs of the graph, so ctx->needs_input_grad counts those (an absent bias has no index), while
// backward returns one entry per argument of forward.
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight_in,
                            const std::optional<at::Tensor>& bias_in) {
    const at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
    const at::Tensor bias = bias_in ? bias_in->contiguous() : at::Tensor();
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.defined();
    ctx->saved_data["varying"] = inputs_requiring_grad({&x_in, &weight_in});
    return ::forward(x, weight, bias, EPIGEMM_ACTIVATION_IDENTITY, at::Tensor());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = saved_contiguous(ctx);
    const at::Tensor &x = saved[0], &weight = saved[1];
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool needs_x = ctx->needs_input_grad(0), needs_weight = ctx->needs_input_grad(1),
               needs_bias = has_bias && ctx->needs_input_grad(2);
    // dx = dy weight, dw = dy^T x, db = the sum of dy.
    const int64_t varying = ctx->saved_data["varying"].toInt();
    const bool x_varies = (varying & 1) != 0, weight_varies = (varying & 2) != 0;
    refuse_a_recorded_backward("Linear", grads[0].requires_grad() || (needs_x && weight_varies) ||
                                             (needs_weight && x_varies));
    const at::Tensor dy = rows_contiguous(grads[0]);
    at::Tensor dx, dw, db;
    if (needs_x) dx = data_gradient(dy, weight, at::Tensor(), EPIGEMM_ACTIVATION_IDENTITY, at::Tensor());
    if (needs_weight || needs_bias) {
      // The wgrad's epilogue also sums dy over tokens (BGRADB). The returned gradients share one
      // allocation; dw computed for db alone gets its own (weight_gradient's), freed here.
      const std::vector<at::Tensor> views = views_of_one_allocation(
          dy, {needs_weight ? std::vector<int64_t>{weight.size(0), weight.size(1)} : std::vector<int64_t>{},
               needs_bias ? std::vector<int64_t>{dy.size(1)} : std::vector<int64_t>{}});
      db = views[1];
      dw = weight_gradient(x, dy, db, views[0]);
    }
    return {dx, needs_weight ? dw : at::Tensor(), db};
  }
};

class MLPFunction : public torch::autograd::Function<MLPFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w1_in,
                            const std::optional<at::Tensor>& b1_in, const at::Tensor& w2_in,
                            const std::optional<at::Tensor>& b2_in, const std::string& activation) {
    const at::Tensor x = x_in.contiguous(), w1 = w1_in.contiguous(), w2 = w2_in.contiguous();
    const at::Tensor b1 = b1_in ? b1_in->contiguous() : at::Tensor(), b2 = b2_in ? b2_in->contiguous() : at::Tensor();
    const epigemm_activation_t act = activation_of(activation);
    // With an activation, fc1's epilogue also writes its input (pre) for the backward; pre and
    // h [tokens, hidden] share one allocation (both are saved, and freed together).
    at::Tensor pre, h_out;
    if (act != EPIGEMM_ACTIVATION_IDENTITY) {
      const std::vector<at::Tensor> views = views_of_one_allocation(x, {{x.size(0), w1.size(0)}, {x.size(0), w1.size(0)}});
      pre = views[0];
      h_out = views[1];
    }
    const at::Tensor h = ::forward(x, w1, b1, act, pre, EPIGEMM_BACKEND_AUTO, false, h_out);
    at::Tensor y = ::forward(h, w2, b2, EPIGEMM_ACTIVATION_IDENTITY, at::Tensor());
    ctx->save_for_backward({x, w1, w2, h, pre});
    ctx->saved_data["activation"] = int64_t(act);
    ctx->saved_data["has_b1"] = b1.defined();
    ctx->saved_data["has_b2"] = b2.defined();
    ctx->saved_data["varying"] =
        inputs_requiring_grad({&x_in, &w1_in, b1_in ? &*b1_in : nullptr, &w2_in});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = saved_contiguous(ctx);
    const at::Tensor &x = saved[0], &w1 = saved[1], &w2 = saved[2], &h = saved[3], &pre = saved[4];
    const auto act = static_cast<epigemm_activation_t>(ctx->saved_data["activation"].toInt());
    // The graph's inputs: x, w1, b1 (if given), w2, b2 (if given).
    const bool has_b1 = ctx->saved_data["has_b1"].toBool(), has_b2 = ctx->saved_data["has_b2"].toBool();
    const size_t w2_input = has_b1 ? 3 : 2;
    const bool needs_x = ctx->needs_input_grad(0), needs_w1 = ctx->needs_input_grad(1),
               needs_b1 = has_b1 && ctx->needs_input_grad(2), needs_w2 = ctx->needs_input_grad(w2_input),
               needs_b2 = has_b2 && ctx->needs_input_grad(w2_input + 1);
    // dW2 = dy^T h and h = act(pre), pre = x W1^T + b1; db2 = the sum of dy. dpre = (dy W2) act'(pre)
    // gives dx = dpre W1, dW1 = dpre^T x and db1 = the sum of dpre, where act'(pre) depends on x, W1
    // and b1 unless it is constant (derivative_varies).
    const int64_t varying = ctx->saved_data["varying"].toInt();
    const bool x_varies = (varying & 1) != 0, w1_varies = (varying & 2) != 0, b1_varies = (varying & 4) != 0,
               w2_varies = (varying & 8) != 0;
    const bool pre_varies = x_varies || w1_varies || b1_varies;
    refuse_a_recorded_backward("MLP", grads[0].requires_grad() ||
                                          ((needs_x || needs_w1 || needs_b1) &&
                                           (w2_varies || (derivative_varies(act) && pre_varies))) ||
                                          (needs_x && w1_varies) || (needs_w1 && x_varies) || (needs_w2 && pre_varies));
    const at::Tensor dy = rows_contiguous(grads[0]);
    // The parameters' gradients that are returned, as views of one allocation: autograd hands
    // each to its parameter's .grad as it is (a contiguous tensor of the parameter's shape).
    const std::vector<at::Tensor> param_grads = views_of_one_allocation(
        dy, {needs_w1 ? std::vector<int64_t>{w1.size(0), w1.size(1)} : std::vector<int64_t>{},
             needs_b1 ? std::vector<int64_t>{w1.size(0)} : std::vector<int64_t>{},
             needs_w2 ? std::vector<int64_t>{w2.size(0), w2.size(1)} : std::vector<int64_t>{},
             needs_b2 ? std::vector<int64_t>{w2.size(0)} : std::vector<int64_t>{}});
    at::Tensor dx, dw1, db1 = param_grads[1], dw2, db2 = param_grads[3];
    if (needs_w2 || needs_b2) {
      // fc2's wgrad; its epilogue also sums dy over tokens (BGRADB). Without needs_w2, dw2 is
      // computed for db2 alone in an allocation of its own, freed here.
      dw2 = weight_gradient(h, dy, db2, param_grads[2]);
    }
    if (needs_x || needs_w1 || needs_b1) {
      at::Tensor dpre;
      if (act == EPIGEMM_ACTIVATION_IDENTITY) {
        dpre = data_gradient(dy, w2, at::Tensor(), act, at::Tensor());
        // Without needs_w1, dw1 is computed for db1 alone (BGRADB gives both) in an allocation
        // of its own, freed here.
        if (needs_w1 || needs_b1) dw1 = weight_gradient(x, dpre, db1, param_grads[0]);
      } else {
        // fc2's dgrad through the activation's gradient on fc1's saved pre-activation; its
        // epilogue also gives fc1's bias gradient (DACT_BGRAD).
        dpre = data_gradient(dy, w2, pre, act, db1);
        if (needs_w1) dw1 = weight_gradient(x, dpre, at::Tensor(), param_grads[0]);
      }
      if (needs_x) dx = data_gradient(dpre, w1, at::Tensor(), EPIGEMM_ACTIVATION_IDENTITY, at::Tensor());
    }
    return {dx, needs_w1 ? dw1 : at::Tensor(), db1, needs_w2 ? dw2 : at::Tensor(), db2, at::Tensor()};
  }
};

at::Tensor bias_or_undefined(const std::optional<at::Tensor>& bias) { return bias ? *bias : at::Tensor(); }

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  return LinearFunction::apply(x, weight, bias);
}

at::Tensor mlp_autograd(const at::Tensor& x, const at::Tensor& w1, const std::optional<at::Tensor>& b1,
                        const at::Tensor& w2, const std::optional<at::Tensor>& b2, c10::string_view activation) {
  return MLPFunction::apply(x, w1, b1, w2, b2, std::string(activation));
}

// Without autograd (inference mode): the forward alone, nothing saved.
at::Tensor linear_forward_only(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  return ::forward(x.contiguous(), weight.contiguous(), contiguous_or_undefined(bias_or_undefined(bias)),
                   EPIGEMM_ACTIVATION_IDENTITY, at::Tensor());
}

at::Tensor mlp_forward_only(const at::Tensor& x, const at::Tensor& w1, const std::optional<at::Tensor>& b1,
                            const at::Tensor& w2, const std::optional<at::Tensor>& b2, c10::string_view activation) {
  const epigemm_activation_t act = activation_of(std::string(activation));
  const at::Tensor h =
      ::forward(x.contiguous(), w1.contiguous(), contiguous_or_undefined(bias_or_undefined(b1)), act, at::Tensor());
  return ::forward(h, w2.contiguous(), contiguous_or_undefined(bias_or_undefined(b2)), EPIGEMM_ACTIVATION_IDENTITY,
                   at::Tensor());
}

// ---- epigemm.linear_fprop, _dgrad and _wgrad on torch tensors, without the generic operand reader -
// The low-level operations read any array through Python attributes and allocate their outputs
// from Python (epigemm/_ops.py): 10-13 µs over the C call for a small forward on an H200
// machine. For the common case, plain 2-d torch tensors (host or CUDA), the current stream,
// outputs to allocate or given as plain tensors of the right shape, this reads the tensors in C++
// (THPVariable_Unpack), allocates what is missing with at::empty and calls the C API on this
// thread's context. It never raises: anything it does not take (another tensor type, a layout, a
// shape or a dtype the call refuses, a failed call) returns None, and _ops.py runs the generic
// path, which gives the library's message (a refused call has written nothing, so an out= given
// is untouched).

// The plain tensors this path reads: torch.Tensor and nn.Parameter, strided (not sparse, not
// nested: their sizes and strides would throw outside the calls' try blocks), in host memory or
// on a CUDA device (the calls check that a call's tensors share one).
bool plain_tensor(PyObject* o) {
  if (!THPVariable_CheckExact(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  return (t.is_cuda() || t.is_cpu()) && t.layout() == at::kStrided && !t.is_nested();
}

// The device of a call's tensors current (as the generic path makes it: the C API runs on the
// current device), and, for tensors in host memory, the GIL released while the call runs: a host
// call computes the whole GEMM before it returns, and other Python threads run meanwhile (as on
// the generic path). Nothing in the scope touches Python objects.
class CallScope {
 public:
  explicit CallScope(const at::Tensor& like)
      : device_guard_(like.is_cuda() ? c10::optional<c10::Device>(like.device()) : c10::nullopt),
        thread_state_(like.is_cuda() ? nullptr : PyEval_SaveThread()) {}
  ~CallScope() {
    if (thread_state_ != nullptr) PyEval_RestoreThread(thread_state_);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  c10::OptionalDeviceGuard device_guard_;
  PyThreadState* thread_state_;
};

// An optional matrix argument (an output, a saved pre-activation) this path takes: None, or a
// plain tensor [rows, cols] on `device` with rows as the C API reads them (its dtype is the C
// API's to check).
bool matrix_or_none(PyObject* o, int64_t rows, int64_t cols, const at::Device& device) {
  if (o == Py_None) return true;
  if (!plain_tensor(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  return t.dim() == 2 && t.size(0) == rows && t.size(1) == cols && t.device() == device &&
         has_rows_as_the_c_api_reads_them(t);
}

// The caller's output (a new reference to the same object) or a new one from `made`.
PyObject* output_object(PyObject* given, at::Tensor made) {
  if (given != Py_None) {
    Py_INCREF(given);
    return given;
  }
  return THPVariable_Wrap(std::move(made));
}

// What a call returns: `first`, or (first, second) with `pair`; each the object given for it
// (Py_None: none given) or a new one.
PyObject* call_result(PyObject* given_first, at::Tensor first, bool pair, PyObject* given_second, at::Tensor second) {
  PyObject* py_first = output_object(given_first, std::move(first));
  if (!pair || py_first == nullptr) return py_first;
  PyObject* py_second = output_object(given_second, std::move(second));
  if (py_second == nullptr) {
    Py_DECREF(py_first);
    return nullptr;
  }
  PyObject* result = PyTuple_Pack(2, py_first, py_second);  // its own references (nullptr on failure)
  Py_DECREF(py_first);
  Py_DECREF(py_second);
  return result;
}

// The tensor given for an optional output (undefined for None).
at::Tensor given_tensor(PyObject* o) { return o == Py_None ? at::Tensor() : THPVariable_Unpack(o); }

// Two operands of one call as this path takes them: rows as the C API reads them, one floating
// dtype the library has, one device.
bool operand_pair(const at::Tensor& a, const at::Tensor& b) {
  if (!has_rows_as_the_c_api_reads_them(a) || !has_rows_as_the_c_api_reads_them(b) ||
      a.scalar_type() != b.scalar_type() || a.device() != b.device()) {
    return false;
  }
  switch (a.scalar_type()) {
    case at::kFloat:
    case at::kHalf:
    case at::kBFloat16: return true;
    default: return false;
  }
}

// The integer and yes/no arguments of a call, read without raising (false: not taken).
bool read_long(PyObject* o, long* value) {
  if (!PyLong_Check(o)) return false;
  *value = PyLong_AsLong(o);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}
bool read_bool(PyObject* o, bool* value) {
  const int truth = PyObject_IsTrue(o);
  if (truth < 0) {
    PyErr_Clear();
    return false;
  }
  *value = truth == 1;
  return true;
}

// A bias gradient argument this path takes: None (none), True (allocate one of `extent`), or a
// plain contiguous vector [extent] on `device`. Sets *wanted.
bool bias_grad_or_flag(PyObject* o, int64_t extent, const at::Device& device, bool* wanted) {
  *wanted = o != Py_None;
  if (o == Py_None || o == Py_True) return true;
  if (!plain_tensor(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  return t.dim() == 1 && t.size(0) == extent && t.device() == device && (t.stride(0) == 1 || extent <= 1);
}

// linear_fprop(X [tokens, in], W [out, in], bias [out] or None, activation code, save_preact,
// backend code, allow_tf32, out [tokens, out] or None, preact_out [tokens, out] or None)
// -> Y [tokens, out], (Y, pre) with an activation that writes its pre-activation (save_preact or
// preact_out given), or None (see above). Y and pre are the objects given as out= and preact_out=.
PyObject* python_linear_fprop(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  long act = 0, backend = 0;
  bool save_preact = false, allow_tf32 = false;
  if (nargs != 9 || !plain_tensor(args[0]) || !plain_tensor(args[1]) ||
      (args[2] != Py_None && !plain_tensor(args[2])) || !read_long(args[3], &act) ||
      !read_bool(args[4], &save_preact) || !read_long(args[5], &backend) || !read_bool(args[6], &allow_tf32)) {
    Py_RETURN_NONE;
  }
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  const at::Tensor& w = THPVariable_Unpack(args[1]);
  const at::Tensor bias = given_tensor(args[2]);
  PyObject* const given_y = args[7];
  PyObject* const given_pre = args[8];
  if (!operand_pair(x, w) || x.size(1) != w.size(1) ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != w.size(0) || bias.scalar_type() != x.scalar_type() ||
                          bias.device() != x.device())) ||
      !matrix_or_none(given_y, x.size(0), w.size(0), x.device()) ||
      !matrix_or_none(given_pre, x.size(0), w.size(0), x.device()) ||
      (given_pre != Py_None && act == EPIGEMM_ACTIVATION_IDENTITY)) {
    Py_RETURN_NONE;  // the generic path checks these and says what is wrong
  }
  // forward() and the gradient functions raise on a refused or failed call (caught below: None).
  try {
    // As the generic path: a preact_out given is written even without save_preact.
    const bool write_pre = act != EPIGEMM_ACTIVATION_IDENTITY && (save_preact || given_pre != Py_None);
    at::Tensor pre = given_tensor(given_pre), y = given_tensor(given_y);
    {
      const CallScope scope(x);
      if (write_pre && !pre.defined()) pre = at::empty({x.size(0), w.size(0)}, x.options());
      y = forward(x, w, bias, static_cast<epigemm_activation_t>(act), pre, static_cast<epigemm_backend_t>(backend),
                  allow_tf32, y);
    }
    thread_state().last_python_device = int(x.get_device());
    return call_result(given_y, std::move(y), write_pre, given_pre, std::move(pre));
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
}

// linear_dgrad(dY [tokens, out], W [out, in], preact [tokens, in] or None, activation code,
// bias_grad (None, True or a vector [in]), out [tokens, in] or None, backend code, allow_tf32)
// -> dX [tokens, in], (dX, bias_grad) when a bias gradient is asked, or None (see above).
PyObject* python_linear_dgrad(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  long act = 0, backend = 0;
  bool allow_tf32 = false;
  if (nargs != 8 || !plain_tensor(args[0]) || !plain_tensor(args[1]) ||
      (args[2] != Py_None && !plain_tensor(args[2])) || !read_long(args[3], &act) ||
      !read_long(args[6], &backend) || !read_bool(args[7], &allow_tf32)) {
    Py_RETURN_NONE;
  }
  const at::Tensor& dy = THPVariable_Unpack(args[0]);
  const at::Tensor& w = THPVariable_Unpack(args[1]);
  const at::Tensor pre = given_tensor(args[2]);
  PyObject* const given_grad = args[4];
  PyObject* const given_dx = args[5];
  bool wants_grad = false;
  if (!operand_pair(dy, w) || dy.size(1) != w.size(0) ||
      !matrix_or_none(args[2], dy.size(0), w.size(1), dy.device()) ||
      !bias_grad_or_flag(given_grad, w.size(1), dy.device(), &wants_grad) ||
      !matrix_or_none(given_dx, dy.size(0), w.size(1), dy.device()) ||
      // Through an activation, or for the bias gradient, the pre-activation is needed: the
      // generic path says so.
      ((act != EPIGEMM_ACTIVATION_IDENTITY || wants_grad) && !pre.defined())) {
    Py_RETURN_NONE;
  }
  try {
    at::Tensor grad = given_grad == Py_True ? at::Tensor() : given_tensor(given_grad), dx = given_tensor(given_dx);
    {
      const CallScope scope(dy);
      if (given_grad == Py_True) grad = at::empty({w.size(1)}, dy.options());
      // As the generic path: a pre-activation given is read (the identity's DACT without one).
      dx = data_gradient(dy, w, pre, static_cast<epigemm_activation_t>(act), grad,
                         static_cast<epigemm_backend_t>(backend), allow_tf32, dx);
    }
    thread_state().last_python_device = int(dy.get_device());
    return call_result(given_dx, std::move(dx), wants_grad, given_grad == Py_True ? Py_None : given_grad,
                       std::move(grad));
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
}

// linear_wgrad(X [tokens, in], dY [tokens, out], out [out, in] or None, accumulate, bias_grad
// (None, True or a vector [out]), backend code, allow_tf32) -> dW [out, in], (dW, bias_grad) when a
// bias gradient is asked, or None (see above).
PyObject* python_linear_wgrad(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  long backend = 0;
  bool accumulate = false, allow_tf32 = false;
  if (nargs != 7 || !plain_tensor(args[0]) || !plain_tensor(args[1]) || !read_bool(args[3], &accumulate) ||
      !read_long(args[5], &backend) || !read_bool(args[6], &allow_tf32)) {
    Py_RETURN_NONE;
  }
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  const at::Tensor& dy = THPVariable_Unpack(args[1]);
  PyObject* const given_dw = args[2];
  PyObject* const given_grad = args[4];
  bool wants_grad = false;
  if (!operand_pair(x, dy) || x.size(0) != dy.size(0) ||
      !matrix_or_none(given_dw, dy.size(1), x.size(1), x.device()) ||
      !bias_grad_or_flag(given_grad, dy.size(1), x.device(), &wants_grad) ||
      (accumulate && given_dw == Py_None)) {  // the generic path says what is missing
    Py_RETURN_NONE;
  }
  try {
    at::Tensor grad = given_grad == Py_True ? at::Tensor() : given_tensor(given_grad), dw = given_tensor(given_dw);
    {
      const CallScope scope(x);
      if (given_grad == Py_True) grad = at::empty({dy.size(1)}, x.options());
      dw = weight_gradient(x, dy, grad, dw, accumulate, static_cast<epigemm_backend_t>(backend), allow_tf32);
    }
    thread_state().last_python_device = int(x.get_device());
    return call_result(given_dw, std::move(dw), wants_grad, given_grad == Py_True ? Py_None : given_grad,
                       std::move(grad));
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
}

// last_backend() -> (name, reason) of this thread's last call through python_linear_fprop,
// _dgrad or _wgrad, as epigemm.last_backend() reports it.
PyObject* python_last_backend(PyObject*, PyObject*) {
  ThreadState& state = thread_state();
  const auto found = state.contexts.find(state.last_python_device);
  if (found == state.contexts.end() || !found->second) {
    return Py_BuildValue("(ss)", "", "no call has run on this thread");
  }
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
  const char* reason = nullptr;
  epigemm_context_last_backend(found->second->handle, &backend, &reason);
  return Py_BuildValue("(ss)", epigemm_backend_name(backend), reason == nullptr ? "" : reason);
}

PyMethodDef python_methods[] = {
    {"linear_fprop", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(python_linear_fprop)), METH_FASTCALL,
     "linear_fprop(X, W, bias, activation, save_preact, backend, allow_tf32, out, preact_out) -> Y, (Y, pre) or None"},
    {"linear_dgrad", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(python_linear_dgrad)), METH_FASTCALL,
     "linear_dgrad(dY, W, preact, activation, bias_grad, out, backend, allow_tf32) -> dX, (dX, bias_grad) or None"},
    {"linear_wgrad", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(python_linear_wgrad)), METH_FASTCALL,
     "linear_wgrad(X, dY, out, accumulate, bias_grad, backend, allow_tf32) -> dW, (dW, bias_grad) or None"},
    {"last_backend", python_last_backend, METH_NOARGS, "last_backend() -> (name, reason) of this thread's last call"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef python_module = {PyModuleDef_HEAD_INIT, "_epigemm_torch_ops",
                             "epigemm.linear_fprop, _dgrad and _wgrad's path for plain torch tensors (epigemm/_ops.py)", -1,
                             python_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

// Imported by epigemm/_ops.py after torch.ops.load_library has loaded the same file (one copy).
PyMODINIT_FUNC PyInit__epigemm_torch_ops() { return PyModule_Create(&python_module); }

TORCH_LIBRARY(epigemm_cpp, m) {
  m.def("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  m.def("mlp(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2, str activation) -> Tensor");
}

TORCH_LIBRARY_IMPL(epigemm_cpp, Autograd, m) {
  m.impl("linear", linear_autograd);
  m.impl("mlp", mlp_autograd);
}

TORCH_LIBRARY_IMPL(epigemm_cpp, CPU, m) {
  m.impl("linear", linear_forward_only);
  m.impl("mlp", mlp_forward_only);
}

TORCH_LIBRARY_IMPL(epigemm_cpp, CUDA, m) {
  m.impl("linear", linear_forward_only);
  m.impl("mlp", mlp_forward_only);
}
