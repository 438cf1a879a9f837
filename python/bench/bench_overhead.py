"""The Python overhead of one small epigemm call over the C call it wraps.

For a small forward (Y = X W^T + b), per call, host time (the GPU's work is enqueued, not waited
for; the GPU queue is drained between rounds):
  C call             epigemm_linear_fprop called directly from C++ (the extension's timing helper)
  extension call     the extension's method alone: operands read in C++, then the C call
  ops, out=          epigemm.linear_fprop(X, W, b, out=Y)
  ops, allocating    epigemm.linear_fprop(X, W, b)
  torch.ops op       torch.ops.epigemm.linear(X, W, b) (the custom operator of epigemm.torch)
  epigemm.torch      epigemm.torch.linear with X requiring grad (custom operator + autograd)
  autograd.Function  the operation inside a plain torch.autograd.Function, for comparison
  F.linear           torch.nn.functional.linear(X, W, b), for scale
Median over rounds of `calls` calls each. Overhead = path - C call.

    python python/bench/bench_overhead.py                 # CUDA when there is a GPU, else CPU
    python python/bench/bench_overhead.py --device cpu --library numpy
"""

import argparse
import statistics
import time

import numpy as np

import epigemm
from epigemm import _arrays, _ops


def _time_python(fn, calls, rounds, sync):
    per_call = []
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls)
    sync()
    return statistics.median(per_call)


def _time_c(ctx, X, W, b, Y, stream, workspace, calls, rounds, sync):
    per_call = []
    for _ in range(rounds):
        sync()
        per_call.append(ctx.time_c_linear_fprop(X, W, b, Y, stream, workspace, calls))
    sync()
    return statistics.median(per_call)


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
        sync = lambda: None  # noqa: E731

    epigemm.linear_fprop(X, W, b, out=Y)  # warm-up: context, workspace
    lib = _arrays.adapter(X)
    dev = lib.device_of(X)
    stream = _ops._stream_of(lib, None, dev)
    workspace = lib.workspace(dev, stream)
    ctx = _ops._context(dev)

    rows = []
    c_time = _time_c(ctx, X, W, b, Y, stream, workspace, calls, rounds, sync)
    rows.append(("C call (epigemm_linear_fprop), in a C++ loop", c_time))
    rows.append(("extension call (operands read in C++ + C call)",
                 _time_python(lambda: ctx.linear_fprop(X, W, b, None, Y, 0, 0, False, stream, workspace),
                              calls, rounds, sync)))
    rows.append(("epigemm.linear_fprop(X, W, b, out=Y)",
                 _time_python(lambda: epigemm.linear_fprop(X, W, b, out=Y), calls, rounds, sync)))
    rows.append(("epigemm.linear_fprop(X, W, b)",
                 _time_python(lambda: epigemm.linear_fprop(X, W, b), calls, rounds, sync)))
    if library == "torch":
        import torch
        import torch.nn.functional as F

        from epigemm import torch as epigemm_torch  # registers torch.ops.epigemm

        _FunctionLinear = _function_linear()

        rows.append(("torch.ops.epigemm.linear(X, W, b)",
                     _time_python(lambda: torch.ops.epigemm.linear(X, W, b), calls, rounds, sync)))
        Xg = X.detach().clone().requires_grad_()
        rows.append(("epigemm.torch.linear(X, W, b), X requires grad",
                     _time_python(lambda: epigemm_torch.linear(Xg, W, b), calls, rounds, sync)))
        rows.append(("autograd.Function around linear_fprop, X requires grad",
                     _time_python(lambda: _FunctionLinear.apply(Xg, W, b), calls, rounds, sync)))
        rows.append(("F.linear(X, W, b) (PyTorch, for scale)",
                     _time_python(lambda: F.linear(X, W, b), calls, rounds, sync)))
    return [(name, t * 1e6, (t - c_time) * 1e6) for name, t in rows], epigemm.last_backend()[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=("torch", "numpy"), default=None)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--dtype", default=None, help="float32 / float16 / bfloat16 (default: bfloat16 on cuda)")
    parser.add_argument("--shape", default="16,64,64", help="tokens,in,out (default 16,64,64)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    library = args.library
    if library is None:
        try:
            import torch  # noqa: F401

            library = "torch"
        except ImportError:
            library = "numpy"
    device = args.device
    if device is None:
        device = "cpu"
        if library == "torch":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
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
