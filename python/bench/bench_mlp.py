"""One training step (forward + backward) of a transformer MLP, in -> hidden -> in with a tanh
GELU, in bf16 on a CUDA GPU: epigemm.torch.MLP against PyTorch eager (nn.Linear, nn.GELU(tanh),
nn.Linear) and torch.compile of the same Sequential.

For each (tokens, in, out) of the public benchmark shapes, the MLP is in -> hidden = out -> in.
The three paths run interleaved in one loop, in a shuffled order each round (PERF.md), on
rotating inputs (several x / dy pairs, together well above the L2 cache), timed with CUDA
events around forward + backward; the median over rounds is reported, after warm-up and after
a check that the paths agree. Then the Python overhead of one small call (bench_overhead.py).
A results markdown (device, driver, date) goes to --out.

    python python/bench/bench_mlp.py --out DIR [--shapes 2048,768,3072;...] [--rounds 15] [--no-compile]
"""

import argparse
import datetime
import os
import random
import statistics
import subprocess
import sys

import torch

import epigemm
import epigemm.torch as et

SHAPES = [(8192, 4096, 16384), (8192, 16384, 4096), (4096, 1024, 4096), (16384, 8192, 28672), (2048, 768, 3072)]
INPUT_SETS = 3


def parse_shapes(text):
    return [tuple(int(v) for v in item.split(",")) for item in text.split(";") if item]


def make_paths(in_f, hidden, compile_too):
    torch.manual_seed(0)
    ours = et.MLP(in_f, hidden, device="cuda", dtype=torch.bfloat16)
    eager = torch.nn.Sequential(torch.nn.Linear(in_f, hidden), torch.nn.GELU(approximate="tanh"),
                                torch.nn.Linear(hidden, in_f)).to("cuda", torch.bfloat16)
    eager.load_state_dict(ours.state_dict())
    paths = {"epigemm MLP": ours, "PyTorch eager": eager}
    if compile_too:
        compiled = torch.nn.Sequential(torch.nn.Linear(in_f, hidden), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(hidden, in_f)).to("cuda", torch.bfloat16)
        compiled.load_state_dict(ours.state_dict())
        paths["torch.compile"] = (compiled, torch.compile(compiled))
    return paths


def module_of(path):
    return path[0] if isinstance(path, tuple) else path


def callable_of(path):
    return path[1] if isinstance(path, tuple) else path


def step(path, x, dy):
    """One training step: forward, backward (gradients of x and every parameter)."""
    y = callable_of(path)(x)
    y.backward(dy)
    return y


def check(paths, x, dy):
    """The largest difference of each path's output and gradients from PyTorch eager's, relative
    to the largest value (bf16 paths agree to a few bf16 ulps)."""
    results = {}
    for name, path in paths.items():
        module = module_of(path)
        module.zero_grad(set_to_none=True)
        xg = x.detach().clone().requires_grad_()
        y = step(path, xg, dy)
        results[name] = [y.detach().float(), xg.grad.float()] + [p.grad.float() for p in module.parameters()]
    base = results["PyTorch eager"]
    return {name: max(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item() for a, b in zip(r, base))
            for name, r in results.items()}


def time_shape(tokens, in_f, out_f, rounds, warmup, compile_too):
    hidden = out_f
    paths = make_paths(in_f, hidden, compile_too)
    inputs = [(torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16).requires_grad_(),
               torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16)) for _ in range(INPUT_SETS)]
    agreement = check(paths, *inputs[0])
    times = {name: [] for name in paths}
    order = list(paths)
    counter = 0
    for r in range(warmup + rounds):
        random.shuffle(order)
        for name in order:
            path = paths[name]
            module_of(path).zero_grad(set_to_none=True)
            x, dy = inputs[counter % INPUT_SETS]
            x.grad = None
            counter += 1
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(path, x, dy)
            stop.record()
            stop.synchronize()
            if r >= warmup:
                times[name].append(start.elapsed_time(stop))
    flops = 3 * 2 * 2 * tokens * in_f * hidden  # 2 GEMMs forward, 4 backward, 2 flops per MAC
    rows = []
    for name in paths:
        ms = statistics.median(times[name])
        rows.append((name, ms, flops / ms / 1e9, agreement[name]))
    del paths, inputs
    torch._dynamo.reset()  # a fresh compile per shape, never the recompile limit's eager fallback
    torch.cuda.empty_cache()
    return rows


def device_lines():
    lines = [f"device: {torch.cuda.get_device_name()}"]
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
        lines.append(f"driver, memory, max SM clock: {smi}")
    except (OSError, subprocess.SubprocessError):
        lines.append("driver: nvidia-smi not available")
    lines.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}), epigemm {epigemm.__version__}, "
                 f"Python {sys.version.split()[0]}")
    lines.append(f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=None, help="tokens,in,out;... (default: the five public shapes)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--out", default=None, help="folder for the results markdown")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP: bench_mlp.py needs a CUDA GPU")
        return 0
    shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    header = device_lines()
    for line in header:
        print(line, flush=True)
    table = []
    for tokens, in_f, out_f in shapes:
        rows = time_shape(tokens, in_f, out_f, args.rounds, args.warmup, not args.no_compile)
        eager_ms = next(ms for name, ms, _, _ in rows if name == "PyTorch eager")
        for name, ms, tflops, diff in rows:
            table.append((f"{tokens},{in_f},{out_f}", name, ms, tflops, eager_ms / ms, diff))
            print(f"  ({tokens},{in_f},{out_f}) {name:14s} {ms:9.3f} ms  {tflops:6.1f} TFLOP/s  "
                  f"eager/this {eager_ms / ms:5.3f}  max rel. diff vs eager {diff:.2e}", flush=True)

    from bench_overhead import measure  # noqa: E402  (beside this file)

    overhead, backend = measure("torch", "cuda", 16, 64, 64, "bfloat16", 200, 21)

    lines = header + [
        "",
        f"One training step (forward + backward) of an MLP in -> hidden = out -> in, tanh GELU, bf16; "
        f"median of {args.rounds} rounds after {args.warmup} warm-up rounds, paths interleaved in a "
        f"shuffled order, {INPUT_SETS} rotating input sets; 'eager/this' > 1 means faster than PyTorch eager.",
        "",
        "| shape (tok,in,out) | path | ms | TFLOP/s | eager/this | max rel. diff vs eager |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {s} | {n} | {ms:.3f} | {tf:.1f} | {sp:.3f} | {d:.1e} |" for s, n, ms, tf, sp, d in table]
    lines += ["", f"Python overhead of a small call (16,64,64), bf16, backend {backend}, host time per call:", "",
              "| path | us/call | over the C call |", "|---|---|---|"]
    lines += [f"| {name} | {us:.2f} | {over:.2f} |" for name, us, over in overhead]
    text = "\n".join(lines) + "\n"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
        path = os.path.join(args.out, f"python-mlp-{stamp}.md")
        with open(path, "w") as f:
            f.write(text)
        print(f"\nwritten: {path}")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
