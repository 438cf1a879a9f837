"""One training step (forward + backward) of a transformer MLP, in -> hidden -> in with a tanh
GELU, in bf16 on a CUDA GPU: epigemm.torch.MLP against PyTorch eager (nn.Linear, nn.GELU(tanh),
nn.Linear) and torch.compile of the same Sequential.

For each (tokens, in, out) of the public benchmark shapes, the MLP is in -> hidden = out -> in.
The three paths run interleaved in one loop, in a shuffled order each round (PERF.md), on
rotating inputs (several x / dy pairs, together well above the L2 cache). Two times per path:
  back to back   CUDA events around --steps steps of one path enqueued one after the other, as a
                 training loop runs them (PERF.md: events around many repetitions); per step.
                 The headline figure.
  after a sync   CUDA events around one step that starts on an idle GPU with the host waiting
                 just before: the host's time to enqueue the step counts in full. Reported beside
                 it, so that the shapes where the host decides show both ways.
Each step sets the gradients to None first (zero_grad(set_to_none=True)), as a training loop does.
The median over rounds is reported, after warm-up and after a check that the paths agree, and
beside it the ratio of each round's eager time to the path's time in the same round (the two ran
seconds apart): its median and quartiles say whether a ratio near 1 is a difference or the
spread of the rounds (the GPU's clock moves with its power draw on the large shapes). Then
the Python overhead of one small call (bench_overhead.py). A results markdown (device, driver,
date) goes to --out.

    python python/bench/bench_mlp.py --out DIR [--shapes 2048,768,3072;...] [--rounds 15] [--steps 10] [--no-compile]
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


def one_step(path, x, dy):
    module_of(path).zero_grad(set_to_none=True)
    x.grad = None
    step(path, x, dy)


def paired_ratios(eager_ms, path_ms):
    """(median, lower quartile, upper quartile) of eager / path over the rounds, round by round."""
    ratios = [e / t for e, t in zip(eager_ms, path_ms)]
    if len(ratios) < 2:
        return ratios[0], ratios[0], ratios[0]
    q1, q2, q3 = statistics.quantiles(ratios, n=4)
    return q2, q1, q3


def time_shape(tokens, in_f, out_f, rounds, warmup, steps, compile_too):
    """{path: (ms per step back to back, ms of one step after a sync, agreement,
    (median, quartiles) of eager / path back to back round by round)}."""
    hidden = out_f
    paths = make_paths(in_f, hidden, compile_too)
    inputs = [(torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16).requires_grad_(),
               torch.randn(tokens, in_f, device="cuda", dtype=torch.bfloat16)) for _ in range(INPUT_SETS)]
    agreement = check(paths, *inputs[0])
    back_to_back = {name: [] for name in paths}
    after_sync = {name: [] for name in paths}
    order = list(paths)
    counter = 0
    for r in range(warmup + rounds):
        random.shuffle(order)
        for name in order:
            path = paths[name]
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                one_step(path, *inputs[counter % INPUT_SETS])
                counter += 1
            stop.record()
            stop.synchronize()
            if r >= warmup:
                back_to_back[name].append(start.elapsed_time(stop) / steps)
            # One step alone: the GPU idle and the host waiting when it starts.
            module_of(path).zero_grad(set_to_none=True)
            x, dy = inputs[counter % INPUT_SETS]
            x.grad = None
            counter += 1
            start.record()
            step(path, x, dy)
            stop.record()
            stop.synchronize()
            if r >= warmup:
                after_sync[name].append(start.elapsed_time(stop))
    eager = back_to_back["PyTorch eager"]
    results = {name: (statistics.median(back_to_back[name]), statistics.median(after_sync[name]), agreement[name],
                      paired_ratios(eager, back_to_back[name]))
               for name in paths}
    del paths, inputs
    torch._dynamo.reset()  # a fresh compile per shape, never the recompile limit's eager fallback
    torch.cuda.empty_cache()
    return results


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
    parser.add_argument("--steps", type=int, default=10, help="steps per timing, back to back (default 10)")
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
        # When each shape ran (UTC), to set beside the GPU's clocks sampled meanwhile (gpu_check.sh).
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")
        results = time_shape(tokens, in_f, out_f, args.rounds, args.warmup, args.steps, not args.no_compile)
        finished = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")
        print(f"  ({tokens},{in_f},{out_f}) timed {started}-{finished} UTC", flush=True)
        eager_ms, eager_sync_ms, _, _ = results["PyTorch eager"]
        flops = 3 * 2 * 2 * tokens * in_f * out_f  # 2 GEMMs forward, 4 backward, 2 flops per MAC
        for name, (ms, sync_ms, diff, paired) in results.items():
            row = (f"{tokens},{in_f},{out_f}", name, ms, flops / ms / 1e9, eager_ms / ms, sync_ms,
                   eager_sync_ms / sync_ms, diff, paired)
            table.append(row)
            print(f"  ({tokens},{in_f},{out_f}) {name:14s} {ms:9.3f} ms  {row[3]:6.1f} TFLOP/s  "
                  f"eager/this {row[4]:5.3f} (per round {paired[0]:5.3f}, quartiles {paired[1]:5.3f}-{paired[2]:5.3f})  "
                  f"after a sync {sync_ms:8.3f} ms, eager/this {row[6]:5.3f}  "
                  f"max rel. diff vs eager {diff:.2e}", flush=True)

    from bench_overhead import measure  # noqa: E402  (beside this file)

    overhead, backend = measure("torch", "cuda", 16, 64, 64, "bfloat16", 200, 21)

    lines = header + [
        "",
        f"One training step (forward + backward) of an MLP in -> hidden = out -> in, tanh GELU, bf16; "
        f"paths interleaved in a shuffled order, {INPUT_SETS} rotating input sets, median of {args.rounds} "
        f"rounds after {args.warmup} warm-up rounds. 'back to back': events around {args.steps} steps of "
        f"one path enqueued one after another, per step; 'after a sync': one step that starts with the "
        f"GPU idle and the host waiting. eager/this > 1 means faster than PyTorch eager; 'per round': "
        f"eager's time over this path's in the same round, median and quartiles over the rounds.",
        "",
        "| shape (tok,in,out) | path | ms back to back | TFLOP/s | eager/this | eager/this per round, "
        "median (quartiles) | ms after a sync | eager/this after a sync | max rel. diff vs eager |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {s} | {n} | {ms:.3f} | {tf:.1f} | {sp:.3f} | {pr[0]:.3f} ({pr[1]:.3f}-{pr[2]:.3f}) | {sms:.3f} | "
              f"{ssp:.3f} | {d:.1e} |"
              for s, n, ms, tf, sp, sms, ssp, d, pr in table]
    for name in dict.fromkeys(row[1] for row in table):
        if name == "PyTorch eager":
            continue
        rows = [row for row in table if row[1] == name]
        mean = statistics.geometric_mean([row[4] for row in rows])
        mean_sync = statistics.geometric_mean([row[6] for row in rows])
        slower = sum(1 for row in rows if row[4] < 1.0)
        # Slower in at least three rounds of four: the upper quartile of the per-round ratio below 1.
        mostly_slower = sum(1 for row in rows if row[8][2] < 1.0)
        lines.append(f"\n{name}: eager/this geometric mean {mean:.3f} back to back ({slower} of {len(rows)} "
                     f"shapes slower than eager; {mostly_slower} slower in at least three of four rounds), "
                     f"{mean_sync:.3f} after a sync.")
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
