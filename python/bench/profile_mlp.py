"""Where the host time of one MLP training step goes: epigemm.torch.MLP against PyTorch eager, in
bf16 on a CUDA GPU (the step of bench_mlp.py: forward, then backward of every gradient).

Per shape (host times are medians over --steps steps, the GPU queue drained every 25 steps):
  1. forward, backward and whole step on the host, for epigemm and eager, first with PyTorch's
     defaults (the backward of CUDA tensors runs on autograd's device thread), then with
     torch.autograd.set_multithreading_enabled(False) (on the calling thread);
  2. the autograd part of the Python autograd Functions alone (the path without epigemm's C++
     operators): the same step through them, with the six operations replaced by the allocation
     of their outputs;
  3. the six operations alone, called in the step's order without autograd (through the Python
     operations, epigemm._ops);
  4. the step's GPU kernels with their times (torch.profiler), and, where the step runs the Python
     Functions, the backend that ran each operation and why (epigemm.last_backend());
  5. the host time per step by function, for epigemm and eager (torch.profiler's CPU view over
     --steps steps, backward on the calling thread): self time, total time and calls per step of
     the functions that take the most (operators, autograd nodes, CUDA runtime and driver calls).

    python python/bench/profile_mlp.py [--shapes 2048,768,3072;4096,1024,4096] [--steps 300]
"""

import argparse
import statistics
import time

import torch

import epigemm
import epigemm.torch as et
from epigemm import _ops

OPERATIONS = ("linear_fprop", "linear_dgrad", "linear_wgrad")


def step(module, x, dy):
    module.zero_grad(set_to_none=True)
    x.grad = None
    module(x).backward(dy)


def phases(module, x, dy, steps):
    """Median host microseconds of (forward, backward, step)."""
    forward, backward, whole = [], [], []
    for k in range(steps + 20):
        if k % 25 == 0:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        module.zero_grad(set_to_none=True)
        x.grad = None
        y = module(x)
        t1 = time.perf_counter()
        y.backward(dy)
        t2 = time.perf_counter()
        del y
        t3 = time.perf_counter()
        if k >= 20:
            forward.append(t1 - t0)
            backward.append(t2 - t1)
            whole.append(t3 - t0)
    torch.cuda.synchronize()
    return tuple(statistics.median(v) * 1e6 for v in (forward, backward, whole))


def phase_line(name, times):
    return f"  {name:58s} forward {times[0]:7.1f} us  backward {times[1]:7.1f} us  step {times[2]:7.1f} us"


class OutputsOnly:
    """Replaces the operations by the allocation of their outputs (the autograd part alone)."""

    @staticmethod
    def linear_fprop(X, W, bias=None, *, activation=None, **_):
        out = X.new_empty((X.shape[0], W.shape[0]))
        return (out, X.new_empty((X.shape[0], W.shape[0]))) if activation else out

    @staticmethod
    def linear_dgrad(dY, W, *, bias_grad=False, **_):
        out = dY.new_empty((dY.shape[0], W.shape[1]))
        return (out, dY.new_empty((W.shape[1],))) if bias_grad else out

    @staticmethod
    def linear_wgrad(X, dY, *, bias_grad=False, **_):
        out = X.new_empty((dY.shape[1], X.shape[1]))
        return (out, X.new_empty((dY.shape[1],))) if bias_grad else out

    def __enter__(self):
        self.real = {name: getattr(_ops, name) for name in OPERATIONS}
        for name in OPERATIONS:
            setattr(_ops, name, getattr(self, name))
        # The C++ operators call the library directly, not _ops: the step takes the Python
        # Functions while the operations are replaced.
        self.cpp_absent = et._CPP_OPERATORS_ABSENT
        et._CPP_OPERATORS_ABSENT = "replaced for the profile"

    def __exit__(self, *exc):
        for name, fn in self.real.items():
            setattr(_ops, name, fn)
        et._CPP_OPERATORS_ABSENT = self.cpp_absent


def operations_alone(mlp, x, dy, steps):
    """Median host microseconds of the step's six operations called without autograd."""
    x, w1, b1 = x.detach(), mlp[0].weight.detach(), mlp[0].bias.detach()
    w2, b2 = mlp[2].weight.detach(), mlp[2].bias.detach()
    times = []
    for k in range(steps + 20):
        if k % 25 == 0:
            torch.cuda.synchronize()
        start = time.perf_counter()
        h, pre = _ops.linear_fprop(x, w1, b1, activation="gelu_tanh")
        _ops.linear_fprop(h, w2, b2)
        _ops.linear_wgrad(h, dy, bias_grad=True)
        dpre, _ = _ops.linear_dgrad(dy, w2, preact=pre, activation="gelu_tanh", bias_grad=True)
        _ops.linear_wgrad(x, dpre)
        _ops.linear_dgrad(dpre, w1)
        if k >= 20:
            times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def kernels_and_backends(module, x, dy):
    """The step's kernels (name, ms) and, for epigemm, each operation's backend and reason."""
    ran = []
    real = {name: getattr(_ops, name) for name in OPERATIONS}
    for name in OPERATIONS:
        def wrapper(*args, _fn=real[name], _name=name, **kwargs):
            result = _fn(*args, **kwargs)
            ran.append((_name,) + tuple(epigemm.last_backend()))
            return result
        setattr(_ops, name, wrapper)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step(module, x, dy)
            torch.cuda.synchronize()
    finally:
        for name, fn in real.items():
            setattr(_ops, name, fn)
    kernels = [(e.name, e.device_time_total / 1e3) for e in prof.events()
               if e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA]
    return kernels, ran


def host_functions(module, x, dy, steps, top=16):
    """Lines of (self us, total us, calls) per step for the functions with the most self time."""
    torch.autograd.set_multithreading_enabled(False)
    try:
        for _ in range(20):
            step(module, x, dy)
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for k in range(steps):
                step(module, x, dy)
                if k % 25 == 0:
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
    finally:
        torch.autograd.set_multithreading_enabled(True)
    events = sorted((e for e in prof.key_averages() if e.self_cpu_time_total > 0),
                    key=lambda e: -e.self_cpu_time_total)
    return [f"    {e.self_cpu_time_total / steps:7.1f} us self {e.cpu_time_total / steps:7.1f} us total "
            f"{e.count / steps:5.1f} calls  {e.key[:90]}" for e in events[:top]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2048,768,3072;4096,1024,4096")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP: profile_mlp.py needs a CUDA GPU")
        return 0
    for item in args.shapes.split(";"):
        tokens, in_f, hidden = (int(v) for v in item.split(","))
        torch.manual_seed(0)
        ours = et.MLP(in_f, hidden, device="cuda", dtype=torch.bfloat16)
        eager = torch.nn.Sequential(torch.nn.Linear(in_f, hidden), torch.nn.GELU(approximate="tanh"),
                                    torch.nn.Linear(hidden, in_f)).to("cuda", torch.bfloat16)
        eager.load_state_dict(ours.state_dict())
        x = torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16).requires_grad_()
        dy = torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16)
        print(f"\n## MLP step ({tokens},{in_f},{hidden}), bf16: host time")
        for threaded in (True, False):
            torch.autograd.set_multithreading_enabled(threaded)
            where = "autograd's device thread" if threaded else "the calling thread"
            for name, module in (("epigemm.torch.MLP", ours), ("PyTorch eager", eager)):
                print(phase_line(f"{name}, backward on {where}", phases(module, x, dy, args.steps)), flush=True)
        torch.autograd.set_multithreading_enabled(True)
        with OutputsOnly():
            print(phase_line("Python Functions, operations replaced by output allocations",
                             phases(ours, x, dy, args.steps)))
        print(f"  the six operations alone, no autograd: {operations_alone(ours, x, dy, args.steps):7.1f} us")
        for name, module in (("epigemm.torch.MLP", ours), ("PyTorch eager", eager)):
            kernels, ran = kernels_and_backends(module, x, dy)
            print(f"  {name}: {len(kernels)} kernels, {sum(ms for _, ms in kernels):.4f} ms of GPU time")
            for kernel, ms in kernels:
                print(f"    {ms:8.4f} ms  {kernel[:100]}")
            for op, backend, reason in ran:
                print(f"    {op:13s} {backend:9s} {reason[:100]}")
        for name, module in (("epigemm.torch.MLP", ours), ("PyTorch eager", eager)):
            print(f"  {name}: host time per step by function (torch.profiler, backward on the calling thread)")
            print("\n".join(host_functions(module, x, dy, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    main()
