"""epigemm.torch (Linear, MLP, the custom operators) and the operations on PyTorch tensors, on the
CPU and, where there is one, a CUDA GPU. Each result and gradient is compared with a float64
computation, and epigemm's error with PyTorch's own in the same dtype."""

import copy
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")

import epigemm  # noqa: E402
import epigemm.torch as et  # noqa: E402
import reference as ref  # noqa: E402
from concurrent_calls import failures_in_threads  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and epigemm.with_cuda
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA GPU (or epigemm built without CUDA)"))]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
UNIT = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def cuda_only():
    if not HAS_CUDA:
        pytest.skip("no CUDA GPU (or epigemm built without CUDA)")


def errors(results, reference):
    return [(r.double().cpu() - want).abs().max().item() for r, want in zip(results, reference)]


def assert_no_worse(name, ours, theirs, reference, dtype):
    """epigemm's error against float64 at most twice PyTorch's in the same dtype (the two round
    at different points), plus one rounding of the largest value."""
    for what, e_ours, e_theirs, want in zip(name, errors(ours, reference), errors(theirs, reference), reference):
        floor = UNIT[dtype] * want.abs().max().item()
        assert e_ours <= 2.0 * e_theirs + floor, (
            f"{what}: epigemm's error {e_ours:.3g} vs PyTorch's {e_theirs:.3g} (floor {floor:.3g})")


def forward_backward(module, x, grad):
    x = x.detach().clone().requires_grad_()
    y = module(x)
    y.backward(grad)
    return [y.detach(), x.grad] + [p.grad for p in module.parameters()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead,in_f,out_f", [((3, 5), 17, 33), ((64,), 64, 48), ((), 9, 7)])
def test_linear_matches_nn_linear(device, dtype, bias, lead, in_f, out_f):
    torch.manual_seed(0)
    ours = et.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype)
    theirs = torch.nn.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype)
    theirs.load_state_dict(ours.state_dict())
    exact = torch.nn.Linear(in_f, out_f, bias=bias, dtype=torch.float64)
    exact.load_state_dict({k: v.double().cpu() for k, v in ours.state_dict().items()})
    x = torch.randn(*lead, in_f, device=device).to(dtype)
    grad = torch.randn(*lead, out_f, device=device).to(dtype)
    got = forward_backward(ours, x, grad)
    want = forward_backward(exact, x.double().cpu(), grad.double().cpu())
    names = ["y", "dx", "dW"] + (["db"] if bias else [])
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
    assert all(g.dtype == dtype and g.device.type == device for g in got)
    assert_no_worse(names, got, forward_backward(theirs, x, grad), want, dtype)


# The PyTorch module of each activation (nn.GELU() is the erf form).
TORCH_ACTIVATIONS = {
    "gelu_tanh": lambda: torch.nn.GELU(approximate="tanh"),
    "gelu_erf": torch.nn.GELU,
    "relu": torch.nn.ReLU,
    "silu": torch.nn.SiLU,
}


def reference_mlp(in_f, hidden, out_f, bias, dtype, device, activation="gelu_tanh"):
    return torch.nn.Sequential(torch.nn.Linear(in_f, hidden, bias=bias), TORCH_ACTIVATIONS[activation](),
                               torch.nn.Linear(hidden, out_f, bias=bias)).to(device=device, dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead,in_f,hidden,out_f", [((2, 7), 24, 40, None), ((33,), 17, 65, 9)])
@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu_erf", "relu", "silu"])
def test_mlp_matches_nn_sequential(device, dtype, bias, lead, in_f, hidden, out_f, activation):
    torch.manual_seed(1)
    ours = et.MLP(in_f, hidden, out_f, activation=activation, bias=bias, device=device, dtype=dtype)
    out_f = in_f if out_f is None else out_f
    theirs = reference_mlp(in_f, hidden, out_f, bias, dtype, device, activation)
    theirs.load_state_dict(ours.state_dict())  # the same keys: 0.weight, 0.bias, 2.weight, 2.bias
    exact = reference_mlp(in_f, hidden, out_f, bias, torch.float64, "cpu", activation)
    exact.load_state_dict(ours.state_dict())
    # Inputs large enough that the GELU's curved part matters.
    x = (2 * torch.randn(*lead, in_f, device=device)).to(dtype)
    grad = torch.randn(*lead, out_f, device=device).to(dtype)
    got = forward_backward(ours, x, grad)
    want = forward_backward(exact, x.double().cpu(), grad.double().cpu())
    names = ["y", "dx"] + (["dW1", "db1", "dW2", "db2"] if bias else ["dW1", "dW2"])
    assert_no_worse(names, got, forward_backward(theirs, x, grad), want, dtype)


def test_state_dicts_load_both_ways():
    ours = et.MLP(8, 16)
    theirs = reference_mlp(8, 16, 8, True, torch.float32, "cpu")
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    ours.load_state_dict(theirs.state_dict())
    assert torch.equal(ours.fc1.weight, theirs[0].weight) and torch.equal(ours.fc2.bias, theirs[2].bias)
    theirs.load_state_dict(et.MLP(8, 16).state_dict())
    assert isinstance(ours.fc1, torch.nn.Linear) and isinstance(ours[1], torch.nn.GELU)
    linear = et.Linear(5, 3)
    assert list(linear.state_dict()) == ["weight", "bias"]


def test_mlp_without_activation_and_inputs_without_grad():
    torch.manual_seed(2)
    ours = et.MLP(6, 10, 4, activation=None)
    exact = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.Identity(), torch.nn.Linear(10, 4)).double()
    exact.load_state_dict(ours.state_dict())
    x, grad = torch.randn(5, 6), torch.randn(5, 4)
    got, want = forward_backward(ours, x, grad), forward_backward(exact, x.double(), grad.double())
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-5)
    # Only the second layer trains: no gradient for the rest, and none computed for x.
    ours = et.MLP(6, 10, 4)
    ours.fc1.requires_grad_(False)
    ours(torch.randn(5, 6)).sum().backward()
    assert ours.fc1.weight.grad is None and ours.fc2.weight.grad is not None


def test_non_contiguous_inputs_are_made_contiguous():
    torch.manual_seed(3)
    ours = et.MLP(8, 12)
    x = torch.randn(8, 5).t()  # [5, 8], strides (1, 5)
    torch.testing.assert_close(ours(x), ours(x.contiguous()))
    weight_t = torch.randn(8, 12).t()  # a transposed (tied) weight
    torch.testing.assert_close(et.linear(x, weight_t), et.linear(x.contiguous(), weight_t.contiguous()))


@pytest.mark.parametrize("device", DEVICES)
def test_one_column_and_one_row_tensors_keep_their_real_strides(device):
    """Tensors whose extent-1 dimension has a stride that says nothing: the gradient of a
    one-output layer expanded to [tokens, 1] (strides (0, 1), as y.sum(0)'s backward makes it), a
    [tokens, 1] column of a wider matrix (strides (m, 1)), a [1, in] row expanded from a vector
    (strides (0, 1)). Each result equals the one from contiguous copies (the gradients: float64's)."""
    torch.manual_seed(5)
    layer = et.Linear(24, 1, device=device)
    plain = torch.nn.Linear(24, 1, device=device, dtype=torch.float64)
    plain.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    x = torch.randn(40, 24, device=device)
    dy = torch.full((1, 1), 0.5, device=device).expand(40, 1)  # strides (0, 1)
    layer(x).backward(dy)
    plain(x.double()).backward(dy.double())
    torch.testing.assert_close(layer.weight.grad, plain.weight.grad.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer.bias.grad, plain.bias.grad.float(), rtol=1e-5, atol=1e-5)

    wide = torch.randn(40, 9, device=device)
    column = wide[:, 2:3]  # [40, 1], strides (9, 1)
    w = torch.randn(6, 1, device=device)
    torch.testing.assert_close(et.linear(column, w), et.linear(column.contiguous(), w), rtol=0, atol=0)
    torch.testing.assert_close(epigemm.linear_fprop(column, w), epigemm.linear_fprop(column.contiguous(), w),
                               rtol=0, atol=0)

    row = torch.randn(24, device=device).expand(1, 24)  # [1, 24], strides (0, 1): "contiguous" to PyTorch
    row_copy = torch.empty(1, 24, device=device).copy_(row)  # strides (24, 1)
    with torch.no_grad():
        torch.testing.assert_close(layer(row), layer(row_copy), rtol=0, atol=0)
    torch.testing.assert_close(epigemm.linear_fprop(row, layer.weight.detach()),
                               epigemm.linear_fprop(row_copy, layer.weight.detach()), rtol=0, atol=0)


def test_activation_modules_and_unknown_activation():
    for name, module in (("relu", torch.nn.ReLU), ("silu", torch.nn.SiLU), ("gelu_erf", torch.nn.GELU)):
        m = et.MLP(4, 8, activation=name)
        assert isinstance(m[1], module)
        assert m(torch.randn(2, 4)).shape == (2, 4)
    assert et.MLP(4, 8, activation="gelu_erf")[1].approximate == "none"
    with pytest.raises(epigemm.InvalidValueError, match="activation is 'tanh'"):
        et.MLP(4, 8, activation="tanh")


def test_float64_is_refused_with_the_dtype():
    with pytest.raises(epigemm.InvalidValueError, match="has dtype torch.float64; expected float32"):
        et.Linear(4, 3).double()(torch.randn(2, 4, dtype=torch.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_ops_on_torch_tensors(device):
    torch.manual_seed(4)
    X = torch.randn(7, 12, device=device)
    W = torch.randn(5, 12, device=device)
    b = torch.randn(5, device=device)
    Y, pre = epigemm.linear_fprop(X, W, b, activation="gelu_tanh")
    assert isinstance(Y, torch.Tensor) and Y.device == X.device and Y.dtype == X.dtype
    y_want, pre_want = ref.fprop(X.double().cpu().numpy(), W.double().cpu().numpy(), b.double().cpu().numpy(),
                                 "gelu_tanh")
    np.testing.assert_allclose(pre.cpu().numpy(), pre_want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Y.cpu().numpy(), y_want, rtol=1e-5, atol=1e-5)
    name, reason = epigemm.last_backend()
    assert name in (("cpu", "reference") if device == "cpu" else ("cuda", "cublaslt", "cutlass")) and reason
    out = torch.full((7, 5), 3.0, device=device)
    with pytest.raises(epigemm.InvalidValueError, match="W has 11 columns"):
        epigemm.linear_fprop(X, W[:, :11], out=out)
    assert torch.all(out == 3.0)


def test_operands_on_two_devices_are_refused():
    cuda_only()
    X = torch.randn(4, 8, device="cuda")
    with pytest.raises(epigemm.InvalidValueError, match="W is in host memory; expected CUDA device 0"):
        epigemm.linear_fprop(X, torch.randn(3, 8))


def test_device_call_runs_on_the_current_stream():
    cuda_only()
    torch.manual_seed(5)
    X = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    want = epigemm.linear_fprop(X, W)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = epigemm.linear_fprop(X, W)
        got2 = epigemm.linear_fprop(X, W, stream=side)
    torch.cuda.current_stream().wait_stream(side)
    # A stream passed explicitly while another one is current (its workspace allocated on it).
    other = torch.cuda.Stream()
    other.wait_stream(torch.cuda.current_stream())
    got3 = epigemm.linear_fprop(X, W, stream=other)
    torch.cuda.current_stream().wait_stream(other)
    torch.cuda.synchronize()
    assert torch.equal(got, want) and torch.equal(got2, want) and torch.equal(got3, want)


def compile_backend():
    # Inductor compiles C++ on the CPU (tens of seconds); aot_eager traces the same forward and
    # backward graphs through the operators' fake implementations.
    return "inductor" if HAS_CUDA else "aot_eager"


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_has_no_graph_break_and_matches(device):
    torch.manual_seed(6)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = torch.nn.Sequential(et.MLP(32, 64), torch.nn.LayerNorm(32), et.Linear(32, 16)).to(device, dtype)
    x = torch.randn(4, 9, 32, device=device, dtype=dtype)

    def loss_of(x):
        return model(x).float().square().mean()

    explanation = torch._dynamo.explain(loss_of)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(loss_of, backend=compile_backend())
    loss = compiled(x)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    eager = loss_of(x)
    eager.backward()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(loss, eager, rtol=tol, atol=tol)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=tol, atol=tol)


def test_one_token_calls_reserve_no_copy_of_the_weight_gradient():
    """On a GPU each call's workspace is what its pass needs, not the fp32 copy of a 16-bit dW
    (4 x out x in bytes: 256 MiB for this 8192 x 8192 layer) that only an accumulating weight
    gradient uses, which the layer's workspace query covers whatever the pass."""
    cuda_only()
    n = 8192
    copy_of_dw = 4 * n * n
    layer = et.Linear(n, n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def peak_growth(call):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        kept = call()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, kept

    # The forward pass first (the PyTorch operators' workspace of this stream has not met this shape
    # yet, and a call reuses it once grown), then a data gradient, then a training step: there dW
    # itself (2 x n x n bytes) is allocated, its fp32 copy must not be.
    grown, _ = peak_growth(lambda: epigemm.linear_fprop(x.detach(), layer.weight.detach()))
    assert grown < copy_of_dw // 2, grown
    grown, _ = peak_growth(lambda: epigemm.linear_dgrad(torch.ones_like(x), layer.weight.detach()))
    assert grown < copy_of_dw // 2, grown
    grown, _ = peak_growth(lambda: layer(x).sum().backward())
    assert grown < 2 * n * n + copy_of_dw // 2, grown


def test_cuda_graph_captures_a_training_step():
    cuda_only()
    torch.manual_seed(7)
    model = et.MLP(256, 1024).cuda().to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    static_x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)

    def step():
        loss = model(static_x).float().square().mean()
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up: contexts, workspaces, cuBLAS plans
            optimizer.zero_grad(set_to_none=False)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        static_loss = step()
    static_x.copy_(torch.randn_like(static_x))
    before = copy.deepcopy(model)
    optimizer.zero_grad(set_to_none=False)
    graph.replay()
    torch.cuda.synchronize()
    # The same step run eagerly from the same parameters gives the same loss and gradients.
    loss = before(static_x).float().square().mean()
    loss.backward()
    torch.testing.assert_close(static_loss, loss, rtol=0, atol=0)
    for p_graph, p_eager in zip(model.parameters(), before.parameters()):
        torch.testing.assert_close(p_graph.grad, p_eager.grad, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_custom_operators_pass_opcheck(device):
    """Schema, fake implementations and autograd registration, checked by torch.library.opcheck."""
    torch.manual_seed(8)

    def t(*shape, grad=True):
        return torch.randn(*shape, device=device).requires_grad_(grad)

    cases = [
        (torch.ops.epigemm.linear.default, (t(6, 5), t(4, 5), t(4))),
        (torch.ops.epigemm.linear.default, (t(6, 5), t(4, 5), None)),
        (torch.ops.epigemm.mlp.default, (t(6, 5), t(8, 5), t(8), t(3, 8), t(3), "gelu_tanh")),
        (torch.ops.epigemm.mlp.default, (t(6, 5), t(8, 5), None, t(3, 8), None, "identity")),
        (torch.ops.epigemm.linear_dgrad.default, (t(6, 4, grad=False), t(4, 5, grad=False),
                                                  t(6, 5, grad=False), "gelu_tanh", True)),
        (torch.ops.epigemm.linear_wgrad.default, (t(6, 5, grad=False), t(6, 4, grad=False), True)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("device", DEVICES)
def test_eager_functions_and_operators_agree_bitwise(device):
    """Eager calls on plain tensors take the autograd Functions; the operators (what compile sees)
    run the same computations and formulas."""
    torch.manual_seed(9)
    model = et.MLP(12, 20, 7, device=device)
    x = torch.randn(9, 12, device=device)
    grad = torch.randn(9, 7, device=device)
    eager = forward_backward(model, x, grad)
    model.zero_grad()
    xo = x.clone().requires_grad_()
    fc1, fc2 = model.fc1, model.fc2
    y, _, _ = torch.ops.epigemm.mlp(xo, fc1.weight, fc1.bias, fc2.weight, fc2.bias, "gelu_tanh")
    y.backward(grad)
    through_operators = [y.detach(), xo.grad] + [p.grad for p in model.parameters()]
    for a, b in zip(eager, through_operators):
        assert torch.equal(a, b)


def producer(y):
    """The autograd node that computed y, through the view that restores leading dimensions."""
    node = y.grad_fn
    while type(node).__name__ in ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0"):
        node = node.next_functions[0][0]
    return type(node).__name__


def cpp_operators_only():
    built, why_not = et.cpp_operators()
    if not built:
        pytest.skip(f"epigemm's C++ PyTorch operators are not used here: {why_not}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["gelu_tanh", "relu", None])
@pytest.mark.parametrize("bias", [True, False])
def test_cpp_operators_and_python_functions_agree_bitwise(device, activation, bias):
    """Where the package was built against this torch, eager Linear and MLP calls run the C++
    operators (a C++ autograd node, no Python in the backward); they call the same C functions in
    the same order as the Python autograd Functions, so both give bitwise the same results."""
    cpp_operators_only()
    torch.manual_seed(10)
    model = et.MLP(12, 20, 7, activation=activation, bias=bias, device=device)
    x = torch.randn(3, 9, 12, device=device)  # leading dimensions flattened into rows
    grad = torch.randn(3, 9, 7, device=device)
    x1 = x.clone().requires_grad_()
    y = model(x1)
    assert producer(y) == "CppFunction"
    y.backward(grad)
    cpp = [y.detach(), x1.grad] + [p.grad for p in model.parameters()]
    model.zero_grad()
    x2 = x.reshape(-1, 12).clone().requires_grad_()
    act = "identity" if activation is None else activation
    fc1, fc2 = model.fc1, model.fc2
    y2, _, _ = et._MLPFunction.apply(x2, fc1.weight, fc1.bias, fc2.weight, fc2.bias, act)
    assert producer(y2) == "_MLPFunctionBackward"
    y2.backward(grad.reshape(-1, 7))
    python = [y2.detach().reshape(3, 9, 7), x2.grad.reshape(3, 9, 12)] + [p.grad for p in model.parameters()]
    for a, b in zip(cpp, python):
        assert torch.equal(a, b)

    linear = et.Linear(12, 5, bias=bias, device=device)
    x3 = x.clone().requires_grad_()
    z = linear(x3)
    assert producer(z) == "CppFunction"
    z.sum().backward()
    cpp = [z.detach(), x3.grad] + [p.grad for p in linear.parameters()]
    linear.zero_grad()
    x4 = x.reshape(-1, 12).clone().requires_grad_()
    z2 = et._LinearFunction.apply(x4, linear.weight, linear.bias)
    z2.sum().backward()
    python = [z2.detach().reshape(3, 9, 5), x4.grad.reshape(3, 9, 12)] + [p.grad for p in linear.parameters()]
    for a, b in zip(cpp, python):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["gelu_tanh", None])
def test_cpp_operators_parameter_gradients_are_separate_tensors(device, activation):
    """The C++ backward hands out the parameters' gradients as views of one allocation: each must
    behave as a tensor of its own (its parameter's shape, contiguous, 256 bytes from the previous
    one's start or more, touching none of the others), and a second backward must add to them in
    place. (On CUDA the allocation itself starts on 512 bytes, so each view on 256; the CPU
    allocator gives 64.)"""
    cpp_operators_only()
    torch.manual_seed(11)
    for module in (et.MLP(12, 20, 7, activation=activation, device=device), et.Linear(12, 5, device=device)):
        params = list(module.parameters())
        x = torch.randn(9, 12, device=device)
        module(x).sum().backward()
        grads = [p.grad for p in params]
        assert producer(module(x)) == "CppFunction"
        first = [g.clone() for g in grads]
        for p, g in zip(params, grads):
            assert g.shape == p.shape and g.is_contiguous()
            assert g.data_ptr() % (256 if device == "cuda" else 64) == 0
        # Writing one gradient leaves the others as they were.
        for i, g in enumerate(grads):
            g.fill_(float(i + 1))
        for i, g in enumerate(grads):
            assert torch.equal(g, torch.full_like(g, float(i + 1)))
        # Accumulation into the existing .grad tensors (no zero_grad in between).
        for g, f in zip(grads, first):
            g.copy_(f)
        module(x).sum().backward()
        for p, f in zip(params, first):
            torch.testing.assert_close(p.grad, 2 * f)


def compare_frozen_subsets(module, params, names, x, grad, run_cpp, run_python):
    """For every subset of `params` trainable, with the input needing a gradient or not: the
    gradients of the C++ operator's backward (run_cpp(x)) against the Python Function's
    (run_python(x)), bitwise, the same ones present. Every parameter trains again afterwards."""
    for trainable in itertools.product([False, True], repeat=len(params)):
        for x_needs_grad in (False, True):
            if not any(trainable) and not x_needs_grad:
                continue
            for p, t in zip(params, trainable):
                p.requires_grad_(t)
            results = []
            for use_cpp in (True, False):
                module.zero_grad(set_to_none=True)
                xi = x.clone().requires_grad_(x_needs_grad)
                y = run_cpp(xi) if use_cpp else run_python(xi)
                y.backward(grad)
                results.append([xi.grad] + [p.grad for p in params])
            for name, a, b in zip(names, *results):
                what = f"{name} with trainable {trainable}, x {x_needs_grad}"
                assert (a is None) == (b is None), what
                if a is not None:
                    assert a.shape == b.shape and torch.equal(a, b), what
    for p in params:
        p.requires_grad_(True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["gelu_tanh", None])
def test_cpp_operators_with_frozen_parameters_match_the_python_functions(device, activation):
    """Every subset of the MLP's parameters trainable, the input too or not: the C++ backward
    computes and hands out only the gradients asked for (those of the parameters share one
    allocation), bitwise the Python Functions' gradients."""
    cpp_operators_only()
    torch.manual_seed(12)
    model = et.MLP(12, 20, 7, activation=activation, device=device)
    act = "identity" if activation is None else activation

    def run_cpp(xi):
        y = model(xi)
        assert producer(y) == "CppFunction"
        return y

    def run_python(xi):
        fc1, fc2 = model.fc1, model.fc2
        return et._MLPFunction.apply(xi, fc1.weight, fc1.bias, fc2.weight, fc2.bias, act)[0]

    compare_frozen_subsets(model, list(model.parameters()), ["x", "w1", "b1", "w2", "b2"],
                           torch.randn(9, 12, device=device), torch.randn(9, 7, device=device), run_cpp, run_python)


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_linear_with_frozen_parameters_matches_the_python_function(device):
    """Linear's C++ backward with the weight, the bias or both trainable, the input too or not:
    the gradients asked for, bitwise the Python Function's."""
    cpp_operators_only()
    torch.manual_seed(13)
    linear = et.Linear(12, 5, device=device)

    def run_cpp(xi):
        y = linear(xi)
        assert producer(y) == "CppFunction"
        return y

    def run_python(xi):
        y = et._LinearFunction.apply(xi, linear.weight, linear.bias)
        assert producer(y) == "_LinearFunctionBackward"
        return y

    compare_frozen_subsets(linear, [linear.weight, linear.bias], ["x", "weight", "bias"],
                           torch.randn(9, 12, device=device), torch.randn(9, 5, device=device), run_cpp, run_python)


def test_cpp_operators_refuse_what_the_python_path_refuses():
    """A call the C++ operators cannot run (here float64) goes to the Python Function, which
    raises epigemm's exception with the library's message, and nothing is left half done."""
    cpp_operators_only()
    with pytest.raises(epigemm.InvalidValueError, match="has dtype torch.float64; expected float32"):
        et.MLP(4, 8).double()(torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="has dtype Double; expected float32"):
        torch.ops.epigemm_cpp.mlp(torch.randn(2, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64),
                                  None, torch.randn(4, 8, dtype=torch.float64), None, "gelu_tanh")


def _generic_path_stream(device):
    """A stream= argument that makes epigemm's operations take their generic path (not the C++
    path of plain torch tensors, which runs on the current stream only)."""
    return torch.cuda.current_stream() if device == "cuda" else 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_calls_on_plain_tensors_take_the_cpp_path(device, dtype):
    """epigemm.linear_fprop on plain 2-d torch tensors, outputs allocated or given (out=,
    preact_out=), is read in C++ (python/src/torch_ops.cpp): bitwise the results of the generic
    path (which an explicit stream= runs), the objects given are the ones returned, and
    last_backend() tells what ran. A call that path does not take runs the generic path, which
    raises the library's message and leaves the outputs given untouched."""
    cpp_operators_only()
    from epigemm import _arrays, _ops

    fast = _arrays.adapter(torch.empty(0)).fast
    assert fast is not None
    stream = _generic_path_stream(device)
    backends = ("cuda", "cublaslt", "cutlass") if device == "cuda" else ("cpu", "reference")
    torch.manual_seed(11)
    X = torch.randn(24, 40, device=device).to(dtype)
    W = torch.nn.Parameter(torch.randn(56, 40, device=device).to(dtype))
    b = torch.randn(56, device=device).to(dtype)

    def filled(value):
        return torch.full((24, 56), value, device=device, dtype=dtype)

    for activation, bias, save_preact in ((None, b, True), ("gelu_tanh", b, True), ("gelu_erf", None, True),
                                          ("relu", b, False)):
        code = _ops.ACTIVATIONS[activation]
        assert fast.linear_fprop(X, W, bias, code, save_preact, 0, False, None, None) is not None  # taken
        got = epigemm.linear_fprop(X, W, bias, activation=activation, save_preact=save_preact)
        assert _ops._STATE.last is fast  # set by that path only
        name, reason = epigemm.last_backend()
        assert name in backends and reason
        want = epigemm.linear_fprop(X, W, bias, activation=activation, save_preact=save_preact, stream=stream)
        assert _ops._STATE.last is not fast
        writes_pre = activation is not None and save_preact
        assert isinstance(got, tuple) == writes_pre
        for got_part, want_part in zip(got if writes_pre else (got,), want if writes_pre else (want,)):
            assert torch.equal(got_part, want_part)
        # Given outputs: written in place and returned as the same objects, preact_out even
        # without save_preact.
        Y = filled(7.0)
        assert fast.linear_fprop(X, W, bias, code, save_preact, 0, False, Y, None) is not None
        Y = filled(7.0)
        result = epigemm.linear_fprop(X, W, bias, activation=activation, save_preact=save_preact, out=Y)
        assert _ops._STATE.last is fast
        if writes_pre:
            assert result[0] is Y and torch.equal(Y, want[0]) and torch.equal(result[1], want[1])
        else:
            assert result is Y and torch.equal(Y, want)
        if activation is not None:
            Y, pre = filled(7.0), filled(7.0)
            assert fast.linear_fprop(X, W, bias, code, False, 0, False, Y, pre) is not None
            Y, pre = filled(7.0), filled(7.0)
            result = epigemm.linear_fprop(X, W, bias, activation=activation, save_preact=False, out=Y, preact_out=pre)
            assert _ops._STATE.last is fast
            assert result[0] is Y and result[1] is pre
            Y_want, pre_want = filled(5.0), filled(5.0)
            epigemm.linear_fprop(X, W, bias, activation=activation, out=Y_want, preact_out=pre_want, stream=stream)
            assert torch.equal(Y, Y_want) and torch.equal(pre, pre_want)
    # A backend asked by name runs there, with out= too.
    named = "cuda" if device == "cuda" else "reference"
    epigemm.linear_fprop(X, W, b, backend=named)
    assert epigemm.last_backend()[0] == named
    epigemm.linear_fprop(X, W, b, backend=named, out=filled(0.0))
    assert _ops._STATE.last is fast and epigemm.last_backend()[0] == named
    # Not taken: mismatched columns (a view of W), a transposed X, an out= of the wrong shape or
    # a view without contiguous rows, a preact_out without an activation; the generic path decides.
    assert fast.linear_fprop(X, W[:, :39], None, 0, True, 0, False, None, None) is None
    with pytest.raises(epigemm.InvalidValueError, match="W has 39 columns"):
        epigemm.linear_fprop(X, W[:, :39])
    Xt = X.t().contiguous().t()
    assert fast.linear_fprop(Xt, W, b, 0, True, 0, False, None, None) is None
    torch.testing.assert_close(epigemm.linear_fprop(Xt.contiguous(), W, b), epigemm.linear_fprop(X, W, b))
    wide = torch.full((24, 57), 3.0, device=device, dtype=dtype)
    assert fast.linear_fprop(X, W, b, 0, True, 0, False, wide, None) is None
    with pytest.raises(epigemm.InvalidValueError):
        epigemm.linear_fprop(X, W, b, out=wide)
    assert torch.all(wide == 3.0)
    Y_cols = torch.full((56, 24), 3.0, device=device, dtype=dtype).t()
    assert fast.linear_fprop(X, W, b, 0, True, 0, False, Y_cols, None) is None
    pre = filled(3.0)
    assert fast.linear_fprop(X, W, b, 0, True, 0, False, None, pre) is None
    with pytest.raises(epigemm.InvalidValueError, match="preact_out is given with activation None"):
        epigemm.linear_fprop(X, W, b, preact_out=pre)
    assert torch.all(pre == 3.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_calls_on_plain_tensors_take_the_cpp_path(device, dtype):
    """epigemm.linear_dgrad and linear_wgrad on plain 2-d torch tensors take the C++ path as
    linear_fprop does: bitwise the generic path's results (stream= runs it), the outputs given
    (out=, a bias_grad vector) returned as the same objects, accumulate adding to out. What that
    path does not take runs the generic path, which raises the library's message."""
    cpp_operators_only()
    from epigemm import _arrays, _ops

    fast = _arrays.adapter(torch.empty(0)).fast
    stream = _generic_path_stream(device)
    backends = ("cuda", "cublaslt", "cutlass") if device == "cuda" else ("cpu", "reference")
    torch.manual_seed(12)
    X = torch.randn(24, 40, device=device).to(dtype)
    W = torch.nn.Parameter(torch.randn(56, 40, device=device).to(dtype))
    dY = torch.randn(24, 56, device=device).to(dtype)
    pre = torch.randn(24, 40, device=device).to(dtype)

    def same(got, want):
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        return len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))

    for activation, preact, bias_grad in ((None, None, False), ("gelu_tanh", pre, True), ("relu", pre, False),
                                          (None, pre, True), ("silu", pre, True)):
        code = _ops.ACTIVATIONS[activation]
        flag = True if bias_grad else None
        assert fast.linear_dgrad(dY, W, preact, code, flag, None, 0, False) is not None  # taken
        got = epigemm.linear_dgrad(dY, W, preact=preact, activation=activation, bias_grad=bias_grad)
        assert _ops._STATE.last is fast and epigemm.last_backend()[0] in backends
        want = epigemm.linear_dgrad(dY, W, preact=preact, activation=activation, bias_grad=bias_grad, stream=stream)
        assert isinstance(got, tuple) == bias_grad and same(got, want)
        dX = torch.full((24, 40), 7.0, device=device, dtype=dtype)
        grad = torch.full((40,), 7.0, device=device, dtype=dtype) if bias_grad else False
        assert fast.linear_dgrad(dY, W, preact, code, grad if bias_grad else None, dX, 0, False) is not None
        dX.fill_(7.0)
        if bias_grad:
            grad.fill_(7.0)
        result = epigemm.linear_dgrad(dY, W, preact=preact, activation=activation, bias_grad=grad, out=dX)
        assert _ops._STATE.last is fast
        if bias_grad:
            assert result[0] is dX and result[1] is grad and same(result, want)
        else:
            assert result is dX and same(result, want)
    for bias_grad in (False, True):
        flag = True if bias_grad else None
        assert fast.linear_wgrad(X, dY, None, False, flag, 0, False) is not None
        got = epigemm.linear_wgrad(X, dY, bias_grad=bias_grad)
        assert _ops._STATE.last is fast and epigemm.last_backend()[0] in backends
        want = epigemm.linear_wgrad(X, dY, bias_grad=bias_grad, stream=stream)
        assert isinstance(got, tuple) == bias_grad and same(got, want)
        start = torch.randn(56, 40, device=device).to(dtype)
        dW, dW_want = start.clone(), start.clone()
        grad = torch.full((56,), 7.0, device=device, dtype=dtype) if bias_grad else False
        assert fast.linear_wgrad(X, dY, start.clone(), True, grad if bias_grad else None, 0, False) is not None
        result = epigemm.linear_wgrad(X, dY, out=dW, accumulate=True, bias_grad=grad)
        assert _ops._STATE.last is fast
        want = epigemm.linear_wgrad(X, dY, out=dW_want, accumulate=True, bias_grad=bias_grad, stream=stream)
        if bias_grad:
            assert result[0] is dW and result[1] is grad and same(result, want)
        else:
            assert result is dW and same(result, want)
        assert not torch.equal(dW, start)
    # A backend asked by name runs there.
    named = "cuda" if device == "cuda" else "reference"
    epigemm.linear_wgrad(X, dY, backend=named)
    assert _ops._STATE.last is fast and epigemm.last_backend()[0] == named
    # Not taken: an activation without the pre-activation, a bias gradient of the wrong extent,
    # accumulate without out, mismatched tokens; the generic path raises and writes nothing.
    assert fast.linear_dgrad(dY, W, None, _ops.ACTIVATIONS["gelu_tanh"], None, None, 0, False) is None
    with pytest.raises(epigemm.InvalidValueError, match="preact is missing with activation gelu_tanh"):
        epigemm.linear_dgrad(dY, W, activation="gelu_tanh")
    short = torch.full((39,), 3.0, device=device, dtype=dtype)
    assert fast.linear_dgrad(dY, W, pre, 0, short, None, 0, False) is None
    with pytest.raises(epigemm.InvalidValueError):
        epigemm.linear_dgrad(dY, W, preact=pre, bias_grad=short)
    assert torch.all(short == 3.0)
    assert fast.linear_wgrad(X, dY, None, True, None, 0, False) is None
    with pytest.raises(epigemm.InvalidValueError, match="accumulate=True without out"):
        epigemm.linear_wgrad(X, dY, accumulate=True)
    assert fast.linear_wgrad(X[:23], dY, None, False, None, 0, False) is None
    with pytest.raises(epigemm.InvalidValueError):
        epigemm.linear_wgrad(X[:23], dY)
    # Not taken either, and no crash: a sparse CUDA tensor (its strides throw in C++).
    sparse = torch.randn(56, device=device).to(dtype).to_sparse()
    assert fast.linear_wgrad(X, dY, None, False, sparse, 0, False) is None
    assert fast.linear_fprop(X, W, sparse, 0, True, 0, False, None, None) is None


def test_threads_calling_the_cpp_path_on_host_tensors_at_once():
    """The C++ path's host calls release the GIL while they run and each thread has its own
    context and workspace: four threads calling at once get the single-threaded results, and
    the refused call of each raises in its own thread."""
    cpp_operators_only()
    from epigemm import _ops

    torch.manual_seed(13)
    X, W, dY = torch.randn(64, 32), torch.randn(48, 32), torch.randn(64, 48)
    want_y, want_dx = epigemm.linear_fprop(X, W), epigemm.linear_dgrad(dY, W)
    results, errors = [], []

    def work():
        for _ in range(20):
            results.append((epigemm.linear_fprop(X, W), epigemm.linear_dgrad(dY, W), _ops._STATE.last))
        try:
            epigemm.linear_fprop(X, W[:, :5])
        except epigemm.InvalidValueError as e:
            errors.append(str(e))

    assert failures_in_threads(work, 4) == []
    fast = _ops.adapter(X).fast
    assert len(results) == 80
    assert all(torch.equal(y, want_y) and torch.equal(dx, want_dx) and last is fast for y, dx, last in results)
    assert errors == ["W has 5 columns; fprop needs in_features = 32 (the columns of X)"] * 4


# ---- what the modules do at the edges: no tokens, second derivatives, the modules an MLP holds ---

def layer_paths(device):
    """The three ways a layer's call can run: the module (eager: the C++ operators where built,
    else the Python Functions), the Python Functions called directly, and the custom operators
    (what torch.compile sees)."""
    def module_linear(x, w, b):
        layer = et.Linear(w.shape[1], w.shape[0], device=device)
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        return layer(x), [layer.weight, layer.bias]

    def function_linear(x, w, b):
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        return et._LinearFunction.apply(x, w, b), [w, b]

    def operator_linear(x, w, b):
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        return torch.ops.epigemm.linear(x, w, b), [w, b]

    return {"module": module_linear, "function": function_linear, "operator": operator_linear}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["module", "function", "operator"])
def test_a_layer_over_zero_tokens_has_a_backward(device, path):
    """A batch without tokens: y is [0, out], and the backward (whose upstream gradient autograd
    gives as a [0, out] tensor with zero strides) gives an empty dx and zero parameter gradients.
    The C++ operators refused that gradient's strides before."""
    w, b = torch.randn(8, 16, device=device), torch.randn(8, device=device)
    x = torch.randn(0, 16, device=device, requires_grad=True)
    y, params = layer_paths(device)[path](x, w, b)
    assert y.shape == (0, 8)
    y.sum().backward()
    assert x.grad.shape == (0, 16)
    for p in params:
        assert torch.equal(p.grad, torch.zeros_like(p))
    mlp = et.MLP(16, 32, 8, device=device)
    x = torch.randn(2, 0, 16, device=device, requires_grad=True)
    mlp(x).sum().backward()
    assert x.grad.shape == (2, 0, 16)
    for p in mlp.parameters():
        assert torch.equal(p.grad, torch.zeros_like(p))


@pytest.mark.parametrize("device", DEVICES)
def test_a_second_derivative_is_refused_not_wrong(device):
    """create_graph=True asks for gradients that can be differentiated again (a gradient penalty);
    the backward formulas are library calls that autograd does not record, so they would lack the
    layer's part: the backward refuses instead, on the C++ and the Python paths alike."""
    torch.manual_seed(10)
    message = "backward ran with create_graph=True; expected create_graph=False"

    def penalty(model, x):
        x = x.clone().requires_grad_()
        gx, = torch.autograd.grad(model(x).sum(), x, create_graph=True)
        gx.square().sum().backward()

    x = torch.randn(5, 8, device=device)
    head = et.Linear(16, 1, device=device)
    models = [torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), head).to(device),  # silently wrong before
              torch.nn.Sequential(et.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device),
              torch.nn.Sequential(et.MLP(8, 16), torch.nn.Linear(8, 1)).to(device)]
    for model in models:
        with pytest.raises(Exception, match=message):
            penalty(model, x)
    linear = et.Linear(8, 3, device=device)
    for function, args in ((et._LinearFunction.apply, (linear.weight, linear.bias)),
                           (et._MLPFunction.apply, (linear.weight, linear.bias,
                                                    torch.randn(2, 3, device=device), None, "relu"))):
        xi = x.clone().requires_grad_()
        y = function(xi, *args)
        y = y[0] if isinstance(y, tuple) else y
        with pytest.raises(epigemm.InvalidValueError, match=message):
            torch.autograd.grad(y.sum(), xi, create_graph=True)
    # Where the gradient asked for depends on nothing that requires a gradient (dx = dy weight with
    # a frozen weight), create_graph=True is harmless and runs.
    linear.requires_grad_(False)
    xi = x.clone().requires_grad_()
    gx, = torch.autograd.grad(linear(xi).sum(), xi, create_graph=True)
    torch.testing.assert_close(gx, linear.weight.sum(0).expand(5, 8))


def mlp_calls(activation):
    """An MLP call on given tensors through the functional form (the C++ operators where built)
    and through the Python Function."""
    act = "identity" if activation is None else activation
    return [lambda x, w1, b1, w2, b2: et.mlp(x, w1, b1, w2, b2, activation),
            lambda x, w1, b1, w2, b2: et._MLPFunction.apply(x, w1, b1, w2, b2, act)[0]]


@pytest.mark.parametrize("device", DEVICES)
def test_second_derivatives_follow_what_each_gradient_depends_on(device):
    """Each gradient's dependences decide: dW2 = dy^T act(x W1^T + b1) depends on x, W1 and b1;
    dx, dW1 and db1 on W2 and, through a curved activation's derivative, on x, W1 and b1. A pass
    whose gradients depend on a tensor that requires a gradient is refused (a bias alone, a
    transposed input, a weight left out of torch.autograd.grad's inputs); one whose gradients are
    constants runs and agrees with torch.nn."""
    torch.manual_seed(14)
    message = "backward ran with create_graph=True"
    x = torch.randn(6, 5, device=device)
    w1, b1 = torch.randn(7, 5, device=device), torch.randn(7, device=device)
    w2, b2 = torch.randn(3, 7, device=device), torch.randn(3, device=device)

    def nn_mlp(x, w1, b1, w2, b2, activation):
        act = {"gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
               "relu": torch.relu, None: lambda t: t}[activation]
        return torch.nn.functional.linear(act(torch.nn.functional.linear(x, w1, b1)), w2, b2)

    for call in mlp_calls("gelu_tanh"):
        # fc1's bias alone trainable: dpre = (dy W2) gelu'(pre) depends on b1 through pre.
        with pytest.raises(Exception, match=message):
            torch.autograd.functional.hessian(lambda b: call(x, w1, b, w2, b2).sum(), b1)
        # A transposed input (the C++ path copies it to contiguous rows inside its forward).
        xt = x.t().contiguous().t().clone().requires_grad_()
        with pytest.raises(Exception, match=message):
            torch.autograd.grad(call(xt, w1, b1, w2, b2).sum(), xt, create_graph=True)
        # W2 requires a gradient but only dx is asked for: dx = dpre W1 depends on W2 all the same.
        w2v = w2.clone().requires_grad_()
        xi = x.clone().requires_grad_()
        with pytest.raises(Exception, match=message):
            torch.autograd.grad(call(xi, w1, b1, w2v, b2).sum(), xi, create_graph=True)
    for activation in ("relu", None):
        for call in mlp_calls(activation):
            # Through relu and the identity, fc1's bias alone: the gradients are constants in b1.
            b1v = b1.clone().requires_grad_()
            g, = torch.autograd.grad(call(x, w1, b1v, w2, b2).sum(), b1v, create_graph=True)
            want, = torch.autograd.grad(nn_mlp(x, w1, b1v, w2, b2, activation).sum(), b1v, create_graph=True)
            torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)
    for call in mlp_calls("gelu_tanh"):
        # fc1 frozen, x constant, fc2 trainable: dW2 and db2 do not depend on W2 or b2.
        w2v, b2v = w2.clone().requires_grad_(), b2.clone().requires_grad_()
        got = torch.autograd.grad(call(x, w1, b1, w2v, b2v).sum(), (w2v, b2v), create_graph=True)
        want = torch.autograd.grad(nn_mlp(x, w1, b1, w2v, b2v, "gelu_tanh").sum(), (w2v, b2v), create_graph=True)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # Linear on a transposed input: dW = dy^T x depends on x.
    w = torch.randn(4, 5, device=device, requires_grad=True)
    base = torch.randn(5, 6, device=device, requires_grad=True)
    for run in (lambda xs: et.linear(xs, w), lambda xs: et._LinearFunction.apply(xs.contiguous(), w, None)):
        with pytest.raises(Exception, match=message):
            torch.autograd.grad(run(base.t()).sum(), w, create_graph=True)


def test_mlp_computes_the_modules_it_holds():
    """The forward reads the modules at each call: a replaced activation is the one applied, a
    module it does not fuse (or a hook) makes the modules run one after another, as nn.Sequential."""
    torch.manual_seed(11)
    x = torch.randn(6, 8)
    m = et.MLP(8, 16, 4)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(approximate="tanh"),
                                    torch.nn.Linear(16, 4))
    reference.load_state_dict(m.state_dict())
    for module, name in ((torch.nn.ReLU(), "relu"), (torch.nn.SiLU(), "silu"), (torch.nn.GELU(), "gelu_erf"),
                         (torch.nn.Identity(), None), (torch.nn.Tanh(), None)):
        m[1] = module
        reference[1] = module
        assert m.activation == (name if not isinstance(module, torch.nn.Tanh) else module)
        torch.testing.assert_close(m(x), reference(x), rtol=1e-5, atol=1e-6)
    assert "not fused" in repr(m)
    m[1] = torch.nn.ReLU()
    assert "activation='relu'" in repr(m)
    seen = []
    handle = m[0].register_forward_hook(lambda module, args, out: seen.append(out.shape))
    reference[1] = torch.nn.ReLU()
    torch.testing.assert_close(m(x), reference(x), rtol=1e-5, atol=1e-6)
    assert seen == [(6, 16)]
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, out: seen.append(type(module)))
    try:
        m(x)
    finally:
        handle.remove()
    assert et.Linear in seen and torch.nn.ReLU in seen  # a hook for every module sees the modules run
    m[2] = torch.nn.Linear(16, 4)  # a torch.nn layer is still fused: its weight and bias are read
    m[2].load_state_dict(reference[2].state_dict())
    torch.testing.assert_close(m(x), reference(x), rtol=1e-5, atol=1e-6)
    assert m.activation == "relu"


def test_weights_of_other_shapes_are_refused_with_their_shapes():
    x = torch.randn(5, 16)
    with pytest.raises(epigemm.InvalidValueError, match=r"weight has shape \(16,\); expected \[out_features, in_features\]"):
        et.linear(x, torch.randn(16))
    with pytest.raises(epigemm.InvalidValueError, match=r"weight has shape \(2, 8, 16\)"):
        et.linear(x, torch.randn(2, 8, 16))
    with pytest.raises(epigemm.InvalidValueError, match=r"w2 has shape \(4, 9\); expected \[out_features, 8\]"):
        et.mlp(x, torch.randn(8, 16), None, torch.randn(4, 9), None)
    with pytest.raises(epigemm.InvalidValueError, match=r"w1 has shape \(16,\)"):
        et.mlp(x, torch.randn(16), None, torch.randn(4, 8), None)


def test_identity_names_the_mlp_without_activation():
    torch.manual_seed(12)
    m = et.MLP(4, 8, activation="identity")
    assert isinstance(m[1], torch.nn.Identity) and m.activation is None
    x = torch.randn(3, 4)
    torch.testing.assert_close(et.mlp(x, m.fc1.weight, m.fc1.bias, m.fc2.weight, m.fc2.bias, "identity"),
                               et.mlp(x, m.fc1.weight, m.fc1.bias, m.fc2.weight, m.fc2.bias, None))


@pytest.mark.parametrize("device", DEVICES)
def test_a_float32_bias_beside_16_bit_weights(device):
    """The library takes a bias in D's dtype or float32: a bf16 layer with a float32 bias adds it
    unrounded, and autograd converts its gradient (the sum of dy, rounded to bf16) to float32."""
    torch.manual_seed(13)
    for module in (et.Linear(16, 8, device=device), et.MLP(16, 24, 8, activation="relu", device=device)):
        module.to(torch.bfloat16)
        for layer in ([module] if isinstance(module, et.Linear) else [module.fc1, module.fc2]):
            layer.bias = torch.nn.Parameter(layer.bias.detach().float() + 0.001)
        exact = copy.deepcopy(module).double()
        x = torch.randn(5, 16, device=device)
        xb = x.to(torch.bfloat16).requires_grad_()
        y = module(xb)
        assert y.dtype == torch.bfloat16
        y.float().sum().backward()
        xd = xb.detach().double().requires_grad_()
        with torch.no_grad():  # the float64 twin computed by torch.nn's formulas
            if isinstance(module, et.Linear):
                want = torch.nn.functional.linear(xd, exact.weight, exact.bias)
            else:
                h = torch.relu(torch.nn.functional.linear(xd, exact.fc1.weight, exact.fc1.bias))
                want = torch.nn.functional.linear(h, exact.fc2.weight, exact.fc2.bias)
        torch.testing.assert_close(y.double(), want, rtol=2 ** -7, atol=2 ** -7 * want.abs().max().item())
        for p in module.parameters():
            assert p.grad is not None and p.grad.dtype == p.dtype
        last_bias = module.bias if isinstance(module, et.Linear) else module.fc2.bias
        assert torch.equal(last_bias.grad, torch.full_like(last_bias, 5.0))


# The dtypes torch.autocast takes per device type (float16 on the CPU needs a newer torch).
AUTOCAST_DTYPES = {"cpu": [torch.bfloat16], "cuda": [torch.bfloat16, torch.float16]}


def autocast_forward_backward(model, x, grad, device, dtype, enabled=True):
    x = x.detach().clone().requires_grad_()
    with torch.autocast(device, dtype=dtype, enabled=enabled):
        y = model(x)
    y.backward(grad.to(y.dtype))
    return [y.detach(), x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("input_dtype", [torch.float32, torch.bfloat16])
def test_autocast_converts_like_nn_linear(device, input_dtype):
    """Under torch.autocast, a float32 model of epigemm modules computes in the autocast dtype as
    torch.nn's does: the input, weights and biases converted first (an input already in another
    16-bit dtype too), the output in the autocast dtype, each gradient in its tensor's dtype. Not
    converting gave float32 results, and a bf16 input (another layer's output under autocast)
    beside float32 weights was refused."""
    for dtype in AUTOCAST_DTYPES[device]:
        torch.manual_seed(14)
        ours = torch.nn.Sequential(et.Linear(24, 40), et.MLP(40, 72, 24)).to(device)
        theirs = torch.nn.Sequential(torch.nn.Linear(24, 40), reference_mlp(40, 72, 24, True, torch.float32, "cpu"))
        theirs.load_state_dict(ours.state_dict())
        theirs.to(device)
        exact = copy.deepcopy(theirs).double().cpu()
        x = (2 * torch.randn(3, 5, 24, device=device)).to(input_dtype)
        grad = torch.randn(3, 5, 24, device=device)
        got = autocast_forward_backward(ours, x, grad, device, dtype)
        nn_got = autocast_forward_backward(theirs, x, grad, device, dtype)
        assert [t.dtype for t in got] == [t.dtype for t in nn_got] == (
            [dtype, input_dtype] + [torch.float32] * 6)
        # The truth: float64 on the values autocast gives both (x and the parameters rounded).
        exact.load_state_dict({k: v.to(dtype).double().cpu() for k, v in theirs.state_dict().items()})
        want = forward_backward(exact, x.to(dtype).double().cpu(), grad.to(dtype).double().cpu())
        names = ["y", "dx"] + [f"d{name}" for name, _ in ours.named_parameters()]
        assert_no_worse(names, got, nn_got, want, dtype)
        # autocast(enabled=False) inside leaves float32 as it is.
        assert autocast_forward_backward(ours, x.float(), grad, device, dtype, enabled=False)[0].dtype == torch.float32


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_under_torch_compile_has_no_graph_break(device):
    torch.manual_seed(15)
    model = et.MLP(32, 64).to(device)
    x = torch.randn(4, 9, 32, device=device)

    def loss_of(x):
        with torch.autocast(device, dtype=torch.bfloat16):
            y = model(x)
        assert y.dtype == torch.bfloat16
        return y.float().square().mean()

    explanation = torch._dynamo.explain(loss_of)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(loss_of, backend=compile_backend())
    torch.testing.assert_close(compiled(x), loss_of(x), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_saved_tensors_come_back_in_any_layout(device):
    """A saved_tensors_hooks pair may hand a saved tensor back with the same values in another
    layout (here a transposed copy): the backward reads them as they come. The C++ operators'
    backward refused such a weight before, and named an MLP's saved hidden activation x."""
    torch.manual_seed(16)

    def pack(t):
        return t.t().contiguous() if t.dim() == 2 else t

    def unpack(t):
        return t.t() if t.dim() == 2 else t

    for model in (et.Linear(16, 8, device=device), et.MLP(16, 32, 8, device=device)):
        x = torch.randn(5, 16, device=device)
        grad = torch.randn(5, 8, device=device)
        want = forward_backward(model, x, grad)
        model.zero_grad()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            x1 = x.clone().requires_grad_()
            y = model(x1)
        y.backward(grad)
        got = [y.detach(), x1.grad] + [p.grad for p in model.parameters()]
        for g, w in zip(got, want):
            assert torch.equal(g, w)


def test_a_slice_of_an_mlp_is_a_sequential_of_its_modules():
    model = et.MLP(8, 16, 4, activation="relu")
    head = model[:2]
    assert type(head) is torch.nn.Sequential and len(head) == 2
    assert head[0] is model.fc1 and isinstance(head[1], torch.nn.ReLU)
    x = torch.randn(3, 8)
    torch.testing.assert_close(head(x), torch.relu(model.fc1(x)))
    assert [m for m in model[::2]] == [model.fc1, model.fc2]
    assert model[0] is model.fc1 and model[-1] is model.fc2


def test_meta_tensors_give_the_output_shape():
    x = torch.empty(2, 3, 16, device="meta")
    for model in (et.Linear(16, 8, device="meta"), et.MLP(16, 32, 8, device="meta")):
        y = model(x)
        assert y.device.type == "meta" and y.shape == (2, 3, 8) and y.dtype == torch.float32
