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
import torch
from torch.profiler import ProfilerActivity, profile

# bench/harness/layer_shapes.hpp's public, derive and held-out sets (tokens, in, out), but for the
# three whose rows are not 16-byte multiples (3001,1022,4094 and the 50257-wide output layers).
SHAPES = [
    (8192, 4096, 16384), (8192, 16384, 4096), (4096, 1024, 4096), (16384, 8192, 28672), (2048, 768, 3072),
    (256, 768, 3072), (512, 1024, 4096), (1000, 768, 3072), (1024, 2048, 8192), (1536, 5120, 5120),
    (2048, 2560, 10240), (2048, 4096, 12288), (3000, 1536, 6144), (4096, 4096, 11008), (4096, 11008, 4096),
    (512, 8192, 8192), (6144, 3072, 12288), (8192, 5120, 13824), (8192, 13824, 5120), (12288, 2048, 8192),
    (16384, 1024, 4096), (1792, 5120, 13824), (2304, 1536, 6144), (4096, 4096, 1024), (2048, 3072, 768),
    (384, 16384, 16384), (768, 4096, 14336), (1536, 2048, 5632), (2500, 5120, 5120), (6144, 14336, 4096),
    (12288, 3072, 8192), (16384, 2048, 2048), (2304, 4096, 11008), (2176, 3072, 8192), (384, 14336, 4096),
    (6144, 2816, 1024),
]


def main():
    dtype = torch.bfloat16
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    for tokens, in_features, out_features in SHAPES:
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
