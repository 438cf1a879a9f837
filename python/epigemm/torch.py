"""PyTorch modules whose forward and backward run on epigemm's fused epilogues.

- Linear: a drop-in nn.Linear (it is one: same parameters, state_dict, initialization). Its
  backward is one dgrad and one wgrad whose epilogue also gives the bias gradient (BGRADB).
- MLP(in_features, hidden_features, out_features=None, activation="gelu_tanh", bias=True):
  fc1 -> activation -> fc2, an nn.Sequential(Linear, GELU(approximate="tanh"), Linear) with the
  same state_dict keys ("0.weight", "0.bias", "2.weight", "2.bias"); the other activations
  (gelu_erf, relu, silu) replace the GELU module. The forward saves fc1's pre-activation from
  fc1's epilogue; the backward runs fc2's dgrad with the activation's gradient applied in its
  epilogue, which also gives fc1's bias gradient (DACT_BGRAD), and fc2's wgrad with its bias
  gradient (BGRADB).

Both are torch.library custom operators (epigemm::linear, epigemm::mlp, epigemm::linear_dgrad,
epigemm::linear_wgrad) with fake implementations and registered autograd formulas, so
torch.compile traces them without a graph break. In eager mode on plain tensors the same
computations and backward formulas run without the custom operators' Python dispatch: as
PyTorch operators written in C++ (torch.ops.epigemm_cpp.linear / .mlp, whose backward is a C++
autograd node) where the package was built against the installed torch, else in plain Python
autograd Functions (cpp_operators() says which). Inputs that are not contiguous are copied to
contiguous ones first. dtypes float32, float16 and bfloat16 on the CPU and on CUDA devices; the
input and weights of one call have one dtype, a bias that dtype or float32; under torch.autocast
the functions and modules convert them to the autocast dtype first, as nn.Linear does.
"""

from collections import OrderedDict
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import _arrays, _ops
from ._errors import invalid

__all__ = ["Linear", "MLP", "mlp", "linear", "cpp_operators"]

_arrays.torch_adapter()  # the extension reads torch tensors from here on

# MLP activations -> the nn module at index 1 of the Sequential (its state_dict has no entries).
_ACTIVATION_MODULES = {
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "gelu_erf": nn.GELU,
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    None: nn.Identity,
    "identity": nn.Identity,
}


# ---- the computations ---------------------------------------------------------------------------
# Plain functions on tensors; the custom operators below are these, and the eager path calls them
# directly.

def _linear_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """y [tokens, out] = x [tokens, in] weight [out, in]^T + bias [out]."""
    return _ops.linear_fprop(x.contiguous(), weight.contiguous(),
                             None if bias is None else bias.contiguous())


def _mlp_impl(x: Tensor, w1: Tensor, b1: Optional[Tensor], w2: Tensor, b2: Optional[Tensor],
              activation: str) -> Tuple[Tensor, Tensor, Tensor]:
    """(y, h, pre): pre = x w1^T + b1, h = act(pre), y = h w2^T + b2, for x [tokens, in],
    w1 [hidden, in], w2 [out, hidden]. h and pre are what the backward needs (pre is empty for
    the identity)."""
    act = _activation_arg(activation)
    x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
    b1 = None if b1 is None else b1.contiguous()
    b2 = None if b2 is None else b2.contiguous()
    if act is None:
        h = _ops.linear_fprop(x, w1, b1)
        pre = x.new_empty((0,))
    else:
        h, pre = _ops.linear_fprop(x, w1, b1, activation=act)
    y = _ops.linear_fprop(h, w2, b2)
    return y, h, pre


def _linear_dgrad_impl(dy: Tensor, weight: Tensor, preact: Optional[Tensor], activation: str,
                       bias_grad: bool) -> Tuple[Tensor, Tensor]:
    """(dx, db): dx [tokens, in] = (dy [tokens, out] weight [out, in]) * act'(preact), and db [in]
    the sum of dx over tokens when bias_grad (else an empty tensor)."""
    act = _activation_arg(activation)
    dy, weight = dy.contiguous(), weight.contiguous()
    if preact is not None:
        preact = preact.contiguous()
    if bias_grad:
        return _ops.linear_dgrad(dy, weight, preact=preact, activation=act, bias_grad=True)
    return _ops.linear_dgrad(dy, weight, preact=preact, activation=act), dy.new_empty((0,))


def _linear_wgrad_impl(x: Tensor, dy: Tensor, bias_grad: bool) -> Tuple[Tensor, Tensor]:
    """(dw, db): dw [out, in] = dy [tokens, out]^T x [tokens, in], and db [out] the sum of dy over
    tokens when bias_grad (else an empty tensor)."""
    x, dy = x.contiguous(), dy.contiguous()
    if bias_grad:
        return _ops.linear_wgrad(x, dy, bias_grad=True)
    return _ops.linear_wgrad(x, dy), dy.new_empty((0,))


def _activation_arg(activation: str) -> Optional[str]:
    """The operators carry the activation as a string ("identity" for None)."""
    return None if activation == "identity" else activation


# ---- the backward formulas, over a dgrad and a wgrad (the operators' or the computations') -----

def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)


def _linear_backward_with(dgrad, wgrad):
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        needs_x, needs_weight, needs_bias = ctx.needs_input_grad
        dx = dw = db = None
        if needs_x:
            dx, _ = dgrad(dy, weight, None, "identity", False)
        if needs_weight or needs_bias:
            # The wgrad's epilogue also sums dy over tokens (BGRADB).
            dw, db = wgrad(x, dy, bool(needs_bias))
        return dx, dw if needs_weight else None, db if needs_bias else None
    return backward


def _mlp_setup(ctx, inputs, output):
    x, w1, b1, w2, b2, activation = inputs
    _, h, pre = output
    ctx.save_for_backward(x, w1, w2, h, pre)
    ctx.activation = activation
    # h and pre are saved activations, not results: no gradient flows into them, and none is
    # materialized as zeros for them.
    ctx.mark_non_differentiable(h, pre)
    ctx.set_materialize_grads(False)


def _mlp_backward_with(dgrad, wgrad):
    def backward(ctx, dy, dh, dpre):
        x, w1, w2, h, pre = ctx.saved_tensors
        needs_x, needs_w1, needs_b1, needs_w2, needs_b2, _ = ctx.needs_input_grad
        dx = dw1 = db1 = dw2 = db2 = None
        if dy is None:
            return dx, dw1, db1, dw2, db2, None
        if needs_w2 or needs_b2:
            # fc2's wgrad; its epilogue also sums dy over tokens (BGRADB).
            dw2, db2 = wgrad(h, dy, bool(needs_b2))
        if needs_x or needs_w1 or needs_b1:
            if ctx.activation == "identity":
                dpre, _ = dgrad(dy, w2, None, "identity", False)
                if needs_w1 or needs_b1:
                    dw1, db1 = wgrad(x, dpre, bool(needs_b1))
            else:
                # fc2's dgrad through the activation's gradient on fc1's saved pre-activation;
                # its epilogue also gives fc1's bias gradient (DGELU_BGRAD).
                dpre, db1 = dgrad(dy, w2, pre, ctx.activation, bool(needs_b1))
                if needs_w1:
                    dw1, _ = wgrad(x, dpre, False)
            if needs_x:
                dx, _ = dgrad(dpre, w1, None, "identity", False)
        return (dx, dw1 if needs_w1 else None, db1 if needs_b1 else None,
                dw2 if needs_w2 else None, db2 if needs_b2 else None, None)
    return backward


# ---- the custom operators (what torch.compile, export and FX see) --------------------------------

_linear_op = torch.library.custom_op("epigemm::linear", _linear_impl, mutates_args=())
_mlp_op = torch.library.custom_op("epigemm::mlp", _mlp_impl, mutates_args=())
_linear_dgrad_op = torch.library.custom_op("epigemm::linear_dgrad", _linear_dgrad_impl, mutates_args=())
_linear_wgrad_op = torch.library.custom_op("epigemm::linear_wgrad", _linear_wgrad_impl, mutates_args=())


@_linear_op.register_fake
def _(x, weight, bias):
    return x.new_empty((x.shape[0], weight.shape[0]))


@_mlp_op.register_fake
def _(x, w1, b1, w2, b2, activation):
    tokens, hidden = x.shape[0], w1.shape[0]
    pre = x.new_empty((0,)) if _activation_arg(activation) is None else x.new_empty((tokens, hidden))
    return x.new_empty((tokens, w2.shape[0])), x.new_empty((tokens, hidden)), pre


@_linear_dgrad_op.register_fake
def _(dy, weight, preact, activation, bias_grad):
    in_features = weight.shape[1]
    return (dy.new_empty((dy.shape[0], in_features)),
            dy.new_empty((in_features,) if bias_grad else (0,)))


@_linear_wgrad_op.register_fake
def _(x, dy, bias_grad):
    out_features = dy.shape[1]
    return (x.new_empty((out_features, x.shape[1])),
            x.new_empty((out_features,)) if bias_grad else dy.new_empty((0,)))


_linear_op.register_autograd(_linear_backward_with(_linear_dgrad_op, _linear_wgrad_op),
                             setup_context=_linear_setup)
_mlp_op.register_autograd(_mlp_backward_with(_linear_dgrad_op, _linear_wgrad_op),
                          setup_context=_mlp_setup)


# ---- the eager path: the same computations and formulas in plain autograd Functions -------------
# A custom operator's dispatch and autograd wrapper cost tens of microseconds per call in eager
# mode (python/bench/bench_overhead.py); a plain Function around the same code costs a fraction.

def _computed_once(layer, backward, depends_on_a_varying_tensor):
    """backward, refusing create_graph=True where a gradient depends on a tensor that requires a
    gradient (depends_on_a_varying_tensor(ctx, grads)). The formulas are library calls that
    autograd does not record, so such a gradient, meant to be differentiated again, would silently
    lack that dependence; one that depends on nothing that varies is right as a constant. The C++
    operators refuse the same passes. ctx.needs_input_grad is which inputs require a gradient
    (these Functions compute all of their gradients)."""
    def checked(ctx, *grads):
        if torch.is_grad_enabled() and depends_on_a_varying_tensor(ctx, grads):
            raise invalid(f"{layer}'s backward ran with create_graph=True; expected create_graph=False: "
                          "epigemm.torch's gradients are computed once and cannot be differentiated "
                          "again (use torch.nn's layers for a second derivative)")
        return backward(ctx, *grads)
    return checked


def _linear_gradients_vary(ctx, grads):
    """dx = dy weight, dw = dy^T x, db = the sum of dy."""
    needs_x, needs_weight, _ = ctx.needs_input_grad
    return grads[0].requires_grad or (needs_x and needs_weight)


# The activations whose derivative varies with the pre-activation (the identity's and relu's are
# constant almost everywhere, so gradients through them do not depend on it).
_DERIVATIVE_VARIES = {"gelu_tanh": True, "gelu_erf": True, "silu": True, "relu": False, "identity": False}


def _mlp_gradients_vary(ctx, grads):
    """dW2 = dy^T h with h = act(pre), pre = x W1^T + b1; db2 = the sum of dy. dpre = (dy W2)
    act'(pre) gives dx = dpre W1, dW1 = dpre^T x and db1 = the sum of dpre."""
    x, w1, b1, w2, _, _ = ctx.needs_input_grad
    pre = x or w1 or b1
    dy = grads[0]
    return ((dy is not None and dy.requires_grad)
            or ((x or w1 or b1) and (w2 or (_DERIVATIVE_VARIES[ctx.activation] and pre)))
            or (x and w1) or (w2 and pre))


class _LinearFunction(torch.autograd.Function):
    # forward takes ctx (no separate setup_context): Function.apply binds the arguments of a
    # setup_context-style forward through inspect.signature, which costs more than the operators.
    @staticmethod
    def forward(ctx, x, weight, bias):
        y = _linear_impl(x, weight, bias)
        _linear_setup(ctx, (x, weight, bias), y)
        return y

    backward = staticmethod(
        _computed_once("Linear", _linear_backward_with(_linear_dgrad_impl, _linear_wgrad_impl),
                       _linear_gradients_vary))


class _MLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, activation):
        output = _mlp_impl(x, w1, b1, w2, b2, activation)
        _mlp_setup(ctx, (x, w1, b1, w2, b2, activation), output)
        return output

    backward = staticmethod(
        _computed_once("MLP", _mlp_backward_with(_linear_dgrad_impl, _linear_wgrad_impl),
                       _mlp_gradients_vary))


_PLAIN_TENSORS = (torch.Tensor, nn.Parameter)


_CPP_OPERATORS_ABSENT = _arrays.load_torch_operators()[1]


def cpp_operators():
    """(True, "") when eager calls run epigemm's C++ operators (torch.ops.epigemm_cpp), else
    (False, why not)."""
    return (not _CPP_OPERATORS_ABSENT, _CPP_OPERATORS_ABSENT)


def _eager(*tensors) -> bool:
    """Whether this call runs eagerly on plain tensors: not under torch.compile / export (which
    must see the custom operators), not traced, no tensor subclass (fake, functional, DTensor)."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN_TENSORS or t.is_meta):
            return False  # (meta tensors: the operators' fake implementations give the shapes)
    return True


# ---- functions and modules ----------------------------------------------------------------------

def _check_activation(activation):
    if activation not in _ACTIVATION_MODULES:
        raise invalid(f"activation is {activation!r}; expected one of "
                      f"{', '.join(map(repr, _ACTIVATION_MODULES))}")


def _rows(x: Tensor, features: int, name: str) -> Tensor:
    """x [..., features] as [tokens, features] (a view where the strides allow it)."""
    if x.dim() == 0 or x.shape[-1] != features:
        raise invalid(f"{name} has shape {tuple(x.shape)}; expected [..., {features}]")
    return x if x.dim() == 2 else x.reshape(-1, features)


def _unrows(y: Tensor, x: Tensor, features: int) -> Tensor:
    """y [tokens, features] back to x's leading dimensions."""
    return y if x.dim() == 2 else y.reshape(x.shape[:-1] + (features,))


def _check_matrix(weight: Tensor, name: str, expected: str):
    if weight.dim() != 2:
        raise invalid(f"{name} has shape {tuple(weight.shape)}; expected {expected}")


# The dtypes torch.autocast casts (float64 and integer tensors stay as they are).
_AUTOCAST_CASTS = (torch.float32, torch.float16, torch.bfloat16)


def _as_autocast_casts(x: Tensor, *tensors):
    """x and the tensors as F.linear sees them under torch.autocast for x's device type: each
    float32, float16 or bfloat16 tensor converted to the autocast dtype (a differentiable copy, so
    gradients reach the originals in their own dtypes); outside autocast, as they are."""
    device_type = x.device.type
    # (The library computes on the CPU and on CUDA devices; autocast knows no "meta".)
    if device_type not in ("cpu", "cuda") or not torch.is_autocast_enabled(device_type):
        return (x,) + tensors
    dtype = torch.get_autocast_dtype(device_type)
    return tuple(t.to(dtype) if t is not None and t.dtype in _AUTOCAST_CASTS else t
                 for t in (x,) + tensors)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """F.linear on epigemm: x [..., in], weight [out, in], bias [out] -> [..., out]. Under
    torch.autocast, x, weight and bias are converted to the autocast dtype first, as F.linear's."""
    _check_matrix(weight, "weight", "[out_features, in_features]")
    x, weight, bias = _as_autocast_casts(x, weight, bias)
    rows = _rows(x, weight.shape[1], "x")
    if _eager(rows, weight, bias):
        y = None
        if not _CPP_OPERATORS_ABSENT:
            try:
                y = torch.ops.epigemm_cpp.linear(rows, weight, bias)
            except RuntimeError:
                pass  # the Python Function below refuses it with epigemm's exception and message
        if y is None:
            y = _LinearFunction.apply(rows, weight, bias)
    else:
        y = torch.ops.epigemm.linear(rows, weight, bias)
    return _unrows(y, x, weight.shape[0])


def mlp(x: Tensor, w1: Tensor, b1: Optional[Tensor], w2: Tensor, b2: Optional[Tensor],
        activation: Optional[str] = "gelu_tanh") -> Tensor:
    """fc2(act(fc1(x))) on epigemm: x [..., in], w1 [hidden, in], w2 [out, hidden] -> [..., out].
    Under torch.autocast, the tensors are converted to the autocast dtype first, as by F.linear."""
    _check_activation(activation)
    _check_matrix(w1, "w1", "[hidden_features, in_features]")
    _check_matrix(w2, "w2", "[out_features, hidden_features]")
    x, w1, b1, w2, b2 = _as_autocast_casts(x, w1, b1, w2, b2)
    if w2.shape[1] != w1.shape[0]:
        raise invalid(f"w2 has shape {tuple(w2.shape)}; expected [out_features, {w1.shape[0]}] "
                      f"(hidden_features = w1.shape[0])")
    rows = _rows(x, w1.shape[1], "x")
    act = "identity" if activation is None else activation
    if _eager(rows, w1, b1, w2, b2):
        y = None
        if not _CPP_OPERATORS_ABSENT:
            try:
                y = torch.ops.epigemm_cpp.mlp(rows, w1, b1, w2, b2, act)
            except RuntimeError:
                pass  # the Python Function below refuses it with epigemm's exception and message
        if y is None:
            y, _, _ = _MLPFunction.apply(rows, w1, b1, w2, b2, act)
    else:
        y, _, _ = torch.ops.epigemm.mlp(rows, w1, b1, w2, b2, act)
    return _unrows(y, x, w2.shape[0])


class Linear(nn.Linear):
    """nn.Linear computed by epigemm (same parameters, state_dict and initialization; any leading
    batch dimensions; bias optional)."""

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)


class MLP(nn.Sequential):
    """fc1 -> activation -> fc2, with the backward fused into the epilogues.

    An nn.Sequential(Linear(in, hidden), activation module, Linear(hidden, out)): its state_dict
    keys are those of nn.Sequential(nn.Linear, nn.GELU(approximate="tanh"), nn.Linear), i.e.
    "0.weight", "0.bias", "2.weight", "2.bias", so either loads the other's state_dict. fc1 and
    fc2 name the two layers. activation: "gelu_tanh" (default), "gelu_erf" (nn.GELU()), "relu",
    "silu" or None ("identity"); fc2's dgrad applies its derivative in the epilogue (DACT_BGRAD).

    The forward reads the modules it holds at each call: the activation is the module at index 1
    (nn.GELU in either form, nn.ReLU, nn.SiLU or nn.Identity), and the two layers' parameters are
    fc1's and fc2's. Where the modules are anything else (another activation, a layer that is not
    an nn.Linear, more or fewer modules) or carry hooks, they run one after another as in
    nn.Sequential, so that what the model holds is what it computes. A slice (model[:2]) is an
    nn.Sequential of the modules it takes."""

    def __init__(self, in_features: int, hidden_features: int, out_features: Optional[int] = None,
                 activation: Optional[str] = "gelu_tanh", bias: bool = True, device=None, dtype=None):
        _check_activation(activation)
        out_features = in_features if out_features is None else out_features
        factory = {"device": device, "dtype": dtype}
        super().__init__(Linear(in_features, hidden_features, bias, **factory),
                         _ACTIVATION_MODULES[activation](),
                         Linear(hidden_features, out_features, bias, **factory))

    def __getitem__(self, index):
        """A module, or for a slice an nn.Sequential of those modules (unfused), as
        nn.Sequential's slices are of the modules they hold."""
        if isinstance(index, slice):
            return nn.Sequential(OrderedDict(list(self._modules.items())[index]))
        return super().__getitem__(index)

    @property
    def fc1(self) -> Linear:
        return self[0]

    @property
    def fc2(self) -> Linear:
        return self[2]

    @property
    def activation(self):
        """The activation the forward applies, by name ("gelu_tanh", "gelu_erf", "relu", "silu",
        or None for nn.Identity), or the module at index 1 where it is none of these."""
        module = self[1] if len(self) > 1 else None
        name = _fused_activation_of(module)
        return module if name is _NOT_FUSED else name

    def _fused_activation(self):
        """The activation's name where the forward runs fused, else _NOT_FUSED."""
        modules = self._modules  # (self[i] costs a microsecond each)
        if len(modules) != 3:
            return _NOT_FUSED
        fc1, activation, fc2 = modules.values()
        if type(fc1) not in _LINEARS or type(fc2) not in _LINEARS:
            return _NOT_FUSED
        for hooks in _GLOBAL_MODULE_HOOKS:  # nn.modules.module.register_module_forward_hook & co.
            if hooks:
                return _NOT_FUSED
        for m in (fc1, activation, fc2):
            if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                    or getattr(m, "_backward_pre_hooks", None)):
                return _NOT_FUSED
        return _fused_activation_of(activation)

    def forward(self, input: Tensor) -> Tensor:
        activation = self._fused_activation()
        if activation is _NOT_FUSED:
            return super().forward(input)
        fc1, _, fc2 = self._modules.values()
        return mlp(input, fc1.weight, fc1.bias, fc2.weight, fc2.bias, activation)

    def extra_repr(self) -> str:
        activation = self._fused_activation()
        if activation is _NOT_FUSED:
            return "not fused: the modules run one after another"
        return f"activation={activation!r}"


_NOT_FUSED = object()
_LINEARS = (Linear, nn.Linear)
# The hooks registered for every module (dicts that PyTorch fills in place).
_GLOBAL_MODULE_HOOKS = tuple(
    getattr(nn.modules.module, name) for name in
    ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
     "_global_backward_pre_hooks") if isinstance(getattr(nn.modules.module, name, None), dict))


def _activation_key(module):
    """What tells the activation modules of _ACTIVATION_MODULES apart (nn.GELU's two forms)."""
    return type(module), getattr(module, "approximate", None)


# _ACTIVATION_MODULES read backwards: the module MLP holds -> the activation it fuses.
_FUSED_ACTIVATIONS = {_activation_key(make()): name
                      for name, make in _ACTIVATION_MODULES.items() if name != "identity"}


def _fused_activation_of(module):
    """The activation name of an activation module MLP fuses, else _NOT_FUSED."""
    return _FUSED_ACTIVATIONS.get(_activation_key(module), _NOT_FUSED)
