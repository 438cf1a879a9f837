"""Which cuBLAS kernel PyTorch's bf16 matmul runs for each benchmark layer shape's three passes, and
its time per call under the profiler: the tile shapes and clusters of the plain GEMMs that the
cutlass backend is measured against. A development probe; it needs PyTorch and a CUDA GPU, not
epigemm.

The passes as PyTorch writes them (X [tokens, in], W [out, in], dY [tokens, out]):
  fprop  X @ W.t()     dgrad  dY @ W     wgrad  dY.t() @ X
cuBLAS sees them column-major, so a kernel's "MxN" tile is over (gemm_m, gemm_n) = (out, tokens)
for fprop, (in, tokens) for dgrad and (in, out) for wgrad, as in epigemm's mapping
(docs/conventions.md).

    python dev/python/cublas_kernels.py > cublas_kernels.log
One line per (shape, pass): tokens,in,out, the pass, microseconds per call (mean of 10 after 3
warm-up calls), the kernel's name (nvjet_sm90_tst_<tile M>x<tile N>_<tile K>x<stages>_<cluster>...).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from merge_bench_runs import rows_are_16_byte_multiples  # noqa: E402


def benchmark_shapes():
    """The public, derive and held-out sets of bench/harness/layer_shapes.hpp, in that order, as
    (tokens, in, out), but for the shapes whose rows are not 16-byte multiples (3001,1022,4094 and
    the 50257-wide output layers), whose GEMMs the benchmark's acceptance figures leave out."""
    with open(os.path.join(ROOT, "bench", "harness", "layer_shapes.hpp")) as f:
        text = f.read()
    shapes = []
    for name in ("kPublicShapes", "kDeriveShapes", "kHeldOutShapes"):
        body = re.search(name + r"\[\] = \{(.*?)\};", text, re.S).group(1)
        shapes += [tuple(map(int, m)) for m in re.findall(r"\{(\d+),\s*(\d+),\s*(\d+)\}", body)]
    return [s for s in shapes if rows_are_16_byte_multiples(s[1], s[2])]


def main():
    import torch
    from torch.profiler import ProfilerActivity, profile

    dtype = torch.bfloat16
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    for tokens, in_features, out_features in benchmark_shapes():
        X = torch.randn(tokens, in_features, device="cuda", dtype=dtype)
        W = torch.randn(out_features, in_features, device="cuda", dtype=dtype)
        dY = torch.randn(tokens, out_features, device="cuda", dtype=dtype)
        passes = {"fprop": lambda: X @ W.t(), "dgrad": lambda: dY @ W, "wgrad": lambda: dY.t() @ X}
        for name, call in passes.items():
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    call()
                torch.cuda.synchronize()
            kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
            longest = max(kernels, key=lambda e: e.device_time_total)
            print(f"{tokens},{in_features},{out_features} {name} "
                  f"{longest.device_time_total / longest.count:9.1f} us  {longest.key}", flush=True)


if __name__ == "__main__":
    main()
