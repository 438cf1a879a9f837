"""The six operations of an MLP training step (fc1 -> tanh GELU -> fc2, forward and backward),
without autograd, with the two fused calls (fc1's GELU_AUX_BIAS forward and fc2's DGELU_BGRAD data
gradient) on a chosen backend, against the operations PyTorch eager runs for the same step, in
bf16 on a CUDA GPU. A development experiment: which backend the fused calls should take when the
GPU runs at its power limit, as a training step's back-to-back GEMMs of the large shapes do.

Variants, each timed as CUDA events around 10 steps enqueued back to back, interleaved in a
shuffled order per round, median over rounds after 2 warm-up rounds:
  auto              every call on auto (what epigemm.torch.MLP runs)
  fused on cuda     the two fused calls on the cuda backend (cuBLAS, then epigemm's kernels)
  fused on cutlass  the two fused calls on the cutlass backend
  eager ops         F.linear, F.gelu, F.linear; the backward's matmuls, sums and gelu_backward
Each variant's results are checked against the eager operations' first.

    python dev/python/mlp_fused_backends.py [--shapes "8192,16384,4096;..."] [--rounds 15]
(shapes as tokens,in,hidden; run from outside the source tree with the package installed)
"""
import argparse
import datetime
import random
import statistics

import torch
import torch.nn.functional as F

import epigemm


def make_variants(x, w1, b1, w2, b2, dy):
    def epigemm_step(fused_backend):
        def step():
            h, pre = epigemm.linear_fprop(x, w1, b1, activation="gelu_tanh", backend=fused_backend)
            y = epigemm.linear_fprop(h, w2, b2)
            dw2, db2 = epigemm.linear_wgrad(h, dy, bias_grad=True)
            dpre, db1 = epigemm.linear_dgrad(dy, w2, preact=pre, activation="gelu_tanh", bias_grad=True,
                                             backend=fused_backend)
            dw1 = epigemm.linear_wgrad(x, dpre)
            dx = epigemm.linear_dgrad(dpre, w1)
            return y, dx, dw1, db1, dw2, db2
        return step

    def eager_step():
        pre = F.linear(x, w1, b1)
        h = F.gelu(pre, approximate="tanh")
        y = F.linear(h, w2, b2)
        dw2 = dy.t() @ h
        db2 = dy.sum(0)
        dh = dy @ w2
        dpre = torch.ops.aten.gelu_backward(dh, pre, approximate="tanh")
        db1 = dpre.sum(0)
        dw1 = dpre.t() @ x
        dx = dpre @ w1
        return y, dx, dw1, db1, dw2, db2

    return {"auto": epigemm_step("auto"), "fused on cuda": epigemm_step("cuda"),
            "fused on cutlass": epigemm_step("cutlass"), "eager ops": eager_step}


def time_shape(tokens, in_features, hidden, rounds, steps=10, warmup=2):
    torch.manual_seed(0)

    def operand(*shape):
        return (torch.randn(*shape, device="cuda") * 0.05).to(torch.bfloat16)

    x, w1, b1 = operand(tokens, in_features), operand(hidden, in_features), operand(hidden)
    w2, b2, dy = operand(in_features, hidden), operand(in_features), operand(tokens, in_features)
    variants = make_variants(x, w1, b1, w2, b2, dy)
    reference = variants["eager ops"]()
    for name, step in variants.items():
        diff = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                   for a, b in zip(step(), reference))
        print(f"  ({tokens},{in_features},{hidden}) {name:18s} max rel. diff vs eager ops {diff:.2e}", flush=True)
    times = {name: [] for name in variants}
    order = list(variants)
    for r in range(warmup + rounds):
        random.shuffle(order)
        for name in order:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                variants[name]()
            stop.record()
            stop.synchronize()
            if r >= warmup:
                times[name].append(start.elapsed_time(stop) / steps)
    eager_ms = statistics.median(times["eager ops"])
    for name in variants:
        ms = statistics.median(times[name])
        print(f"  ({tokens},{in_features},{hidden}) {name:18s} {ms:8.3f} ms  eager/this {eager_ms / ms:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="8192,16384,4096;8192,4096,16384;16384,8192,28672")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: mlp_fused_backends.py needs a CUDA GPU")
        return
    print(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), torch.cuda.get_device_name())
    for item in args.shapes.split(";"):
        tokens, in_features, hidden = (int(v) for v in item.split(","))
        # The largest shape's steps take 70 ms: a third of the rounds.
        time_shape(tokens, in_features, hidden, args.rounds if tokens * in_features * hidden < 2**40 else max(3, args.rounds // 3))


if __name__ == "__main__":
    main()
