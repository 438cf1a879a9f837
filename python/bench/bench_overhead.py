"""The Python overhead of one small epigemm call over the C call it wraps.

For a small forward (Y = X W^T + b), per call, host time (the GPU's work is enqueued, not waited
for; the GPU queue is drained between rounds):
  C call             epigemm_linear_fprop called directly from C++ (the extension's timing helper)
  extension call     the extension's method alone: operands read in C++, then the C call
  ops, out=          epigemm.linear_fprop(X, W, b, out=Y)
  ops, allocating    epigemm.linear_fprop(X, W, b)
                     (plain torch tensors: both read in C++, and allocated there, where the
                     package has its PyTorch operators)
  torch.ops op       torch.ops.epigemm.linear(X, W, b) (the custom operator of epigemm.torch)
  epigemm.torch      epigemm.torch.linear with X requiring grad (custom operator + autograd)
  autograd.Function  the operation inside a plain torch.autograd.Function, for comparison
  F.linear           torch.nn.functional.linear(X, W, b), for scale
and the plain data and weight gradients of the same layer (dX = dY W, dW = dY^T X), each against
its own C call (epigemm_linear_dgrad, epigemm_linear_wgrad), with out= and allocating.
Median over rounds of `calls` calls each. Overhead = path - its C call.

    python python/bench/bench_overhead.py                 # CUDA when there is a GPU, else CPU
    python python/bench/bench_overhead.py --device cpu --library numpy
"""

import argparse
import statistics
import time

import numpy as np

import epigemm
from epigemm import _arrays, _ops


def _interleaved(paths, calls, rounds, sync, self_timed):
    """Median seconds per call of each path. Each round times every path in turn (`calls` calls
    each), so that a change of the machine's load meets all paths alike. The paths named in
    `self_timed` make their `calls` calls themselves and return their time per call."""
    per_call = {name: [] for name, _ in paths}
    for _ in range(rounds):
        for name, fn in paths:
            sync()
            if name in self_timed:
                per_call[name].append(fn())
                continue
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call[name].append((time.perf_counter() - start) / calls)
    sync()
    return {name: statistics.median(times) for name, times in per_call.items()}


def _function_linear():
    """A plain torch.autograd.Function calling the operation: what the modules' dispatch through
    custom operators costs beyond it."""
    import torch

    class FunctionLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return epigemm.linear_fprop(x, w, b)

        @staticmethod
        def backward(ctx, dy):
            return None, None, None

    return FunctionLinear


def measure(library, device_name, tokens, in_features, out_features, dtype_name, calls, rounds):
    """Rows (path, microseconds per call, overhead over the C call in microseconds)."""
    if library == "torch":
        import torch

        device = torch.device(device_name)
        dtype = getattr(torch, dtype_name)
        X = torch.randn(tokens, in_features, device=device).to(dtype)
        W = torch.randn(out_features, in_features, device=device).to(dtype)
        b = torch.randn(out_features, device=device).to(dtype)
        Y = torch.empty(tokens, out_features, device=device, dtype=dtype)
        dY = torch.randn(tokens, out_features, device=device).to(dtype)
        dX = torch.empty(tokens, in_features, device=device, dtype=dtype)
        dW = torch.empty(out_features, in_features, device=device, dtype=dtype)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    else:
        if device_name != "cpu":
            raise SystemExit("numpy arrays live on the CPU: use --device cpu")
        dtype = np.dtype(dtype_name)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((tokens, in_features)).astype(dtype)
        W = rng.standard_normal((out_features, in_features)).astype(dtype)
        b = rng.standard_normal(out_features).astype(dtype)
        Y = np.empty((tokens, out_features), dtype)
        dY = rng.standard_normal((tokens, out_features)).astype(dtype)
        dX = np.empty((tokens, in_features), dtype)
        dW = np.empty((out_features, in_features), dtype)
        sync = lambda: None  # noqa: E731

    lib = _arrays.adapter(X)
    dev = lib.device_of(X)
    stream = _ops._stream_of(lib, None, dev)
    # Warm-up: the contexts and workspaces of both paths. stream= runs the generic path, which
    # grows the array library's workspace that the C calls below are given (the largest of the
    # three passes'); without it plain torch tensors take the C++ path, which has its own.
    for given_stream in (stream, None):
        epigemm.linear_fprop(X, W, b, out=Y, stream=given_stream)
        epigemm.linear_dgrad(dY, W, out=dX, stream=given_stream)
        epigemm.linear_wgrad(X, dY, out=dW, stream=given_stream)
    workspace = lib.workspace(dev, stream)
    ctx = _ops._context(dev)
    # The extension's call returns a status: a refused call (a workspace too small) would be
    # timed as if it had run.
    status = ctx.linear_fprop(X, W, b, None, Y, 0, 0, False, stream, workspace)
    if status:
        raise RuntimeError(f"the extension's linear_fprop returned status {status}: {ctx.last_error()}")

    c_name = "C call (epigemm_linear_fprop), in a C++ loop"
    in_cpp = bool(lib.fast)  # plain torch tensors: python/src/torch_ops.cpp's path
    read, allocated = (" (read in C++)", " (read and allocated in C++)") if in_cpp else ("", "")
    paths = [
        (c_name, lambda: ctx.time_c_linear_fprop(X, W, b, Y, stream, workspace, calls)),
        ("extension call (operands read in C++ + C call)",
         lambda: ctx.linear_fprop(X, W, b, None, Y, 0, 0, False, stream, workspace)),
        ("epigemm.linear_fprop(X, W, b, out=Y)" + read,
         lambda: epigemm.linear_fprop(X, W, b, out=Y)),
        ("epigemm.linear_fprop(X, W, b)" + allocated,
         lambda: epigemm.linear_fprop(X, W, b)),
    ]
    if library == "torch":
        import torch
        import torch.nn.functional as F

        from epigemm import torch as epigemm_torch  # registers torch.ops.epigemm

        function_linear = _function_linear()
        Xg = X.detach().clone().requires_grad_()
        paths += [
            ("torch.ops.epigemm.linear(X, W, b)", lambda: torch.ops.epigemm.linear(X, W, b)),
            ("torch.ops.epigemm.linear(X, W, b), X requires grad", lambda: torch.ops.epigemm.linear(Xg, W, b)),
            ("epigemm.torch.linear(X, W, b), X requires grad", lambda: epigemm_torch.linear(Xg, W, b)),
            ("autograd.Function around linear_fprop, X requires grad", lambda: function_linear.apply(Xg, W, b)),
            ("F.linear(X, W, b) (PyTorch, for scale)", lambda: F.linear(X, W, b)),
        ]
    backend = None
    rows = []
    gradient_paths = [
        ("C call (epigemm_linear_dgrad), in a C++ loop",
         lambda: ctx.time_c_linear_dgrad(dY, W, dX, stream, workspace, calls)),
        ("epigemm.linear_dgrad(dY, W, out=dX)" + read, lambda: epigemm.linear_dgrad(dY, W, out=dX)),
        ("epigemm.linear_dgrad(dY, W)" + allocated, lambda: epigemm.linear_dgrad(dY, W)),
        ("C call (epigemm_linear_wgrad), in a C++ loop",
         lambda: ctx.time_c_linear_wgrad(X, dY, dW, stream, workspace, calls)),
        ("epigemm.linear_wgrad(X, dY, out=dW)" + read, lambda: epigemm.linear_wgrad(X, dY, out=dW)),
        ("epigemm.linear_wgrad(X, dY)" + allocated, lambda: epigemm.linear_wgrad(X, dY)),
    ]
    # The forward's paths, then the gradients' (three paths per pass, its C call first).
    for group in (paths, gradient_paths[:3], gradient_paths[3:]):
        baseline = group[0][0]
        times = _interleaved(group, calls, rounds, sync, {baseline})
        backend = backend or epigemm.last_backend()[0]
        rows += [(name, times[name] * 1e6, (times[name] - times[baseline]) * 1e6) for name, _ in group]
    return rows, backend


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=("torch", "numpy"), default=None)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--dtype", default=None, help="float32 / float16 / bfloat16 (default: bfloat16 on cuda)")
    parser.add_argument("--shape", default="16,64,64", help="tokens,in,out (default 16,64,64)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    library = args.library or ("numpy" if torch is None else "torch")
    device = args.device
    if device is None:
        device = "cuda" if library == "torch" and torch.cuda.is_available() else "cpu"
    dtype = args.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    tokens, in_features, out_features = (int(v) for v in args.shape.split(","))
    rows, backend = measure(library, device, tokens, in_features, out_features, dtype, args.calls, args.rounds)
    print(f"Python overhead, {library} on {device}, {dtype}, (tokens,in,out) = ({tokens},{in_features},"
          f"{out_features}), backend {backend}, median of {args.rounds} rounds x {args.calls} calls")
    print(f"| {'path':<56} | {'us/call':>8} | {'over C':>8} |")
    print(f"|{'-' * 58}|{'-' * 10}|{'-' * 10}|")
    for name, us, over in rows:
        print(f"| {name:<56} | {us:8.2f} | {over:8.2f} |")
    return rows


if __name__ == "__main__":
    main()
