"""Rounding probe: per backend and call, how many bf16 results are farther from the exact value
than one rounding (half a bf16 spacing of the exact value plus what an fp32 sum of the products can
add). One rounding gives 0; a path that rounds alpha acc to bf16 before adding the bias or beta D_old
gives many, far off where the sum cancels. Also PyTorch's F.linear and matmul, for scale.

Run on a machine with a CUDA GPU and the package built with CUDA: python dev/python/rounding_probe.py
(tests/test_backend_matrix.cpp's RoundedOnce checks the same bound on every target)."""
import numpy as np
import torch

import epigemm
torch.manual_seed(0)
dev = "cuda"

def ulp_bf16(v):
    a = np.abs(v).astype(np.float64)
    e = np.floor(np.log2(np.maximum(a, 2.0**-126)))
    return 2.0 ** (e - 7)

def report(name, got, exact, absprod, k):
    got = got.double().cpu().numpy(); exact = exact.numpy(); absprod = absprod.numpy()
    err = np.abs(got - exact)
    bound = 0.5 * ulp_bf16(exact) + 1.01 * k * 2.0**-24 * absprod + 1e-30
    bad = err > bound
    worst = (err / bound).max()
    print(f"{name:55s} {bad.sum():6d} of {bad.size:7d} farther than one rounding; worst err/bound {worst:.2f}", flush=True)

for (t, i, o) in [(48, 64, 40), (512, 1024, 768), (2048, 4096, 1024)]:
    X = torch.randn(t, i, device=dev).bfloat16(); W = torch.randn(o, i, device=dev).bfloat16()
    b = torch.randn(o, device=dev).bfloat16()
    Xd, Wd, bd = X.double().cpu(), W.double().cpu(), b.double().cpu()
    exact = Xd @ Wd.T; absprod = Xd.abs() @ Wd.abs().T
    for be in ["cuda", "cublaslt", "cutlass", "auto"]:
        if not epigemm.backend_usable(be):
            continue
        for with_bias in (False, True):
            try:
                Y = epigemm.linear_fprop(X, W, b if with_bias else None, backend=be)
                torch.cuda.synchronize()
                report(f"fprop {t},{i},{o} bias={with_bias} {be} ({epigemm.last_backend()[0]})",
                       Y, exact + (bd if with_bias else 0), absprod, i)
            except epigemm.Error as e:
                print(f"fprop {t},{i},{o} bias={with_bias} {be}: {type(e).__name__}")
    dY = torch.randn(t, o, device=dev).bfloat16(); dYd = dY.double().cpu()
    dW0 = torch.randn(o, i, device=dev).bfloat16()
    exact_w = dYd.T @ Xd + dW0.double().cpu(); absw = dYd.abs().T @ Xd.abs() + dW0.double().cpu().abs()
    for be in ["cuda", "cublaslt", "cutlass", "auto"]:
        if not epigemm.backend_usable(be):
            continue
        try:
            dW = dW0.clone()
            epigemm.linear_wgrad(X, dY, out=dW, accumulate=True, backend=be)
            torch.cuda.synchronize()
            report(f"wgrad accumulate {t},{i},{o} {be} ({epigemm.last_backend()[0]})", dW, exact_w, absw, t)
        except epigemm.Error as e:
            print(f"wgrad accumulate {t},{i},{o} {be}: {type(e).__name__}")
    Yt = torch.nn.functional.linear(X, W, b); torch.cuda.synchronize()
    report(f"torch F.linear {t},{i},{o} bias=True", Yt, exact + bd, absprod, i)
    Yt = X @ W.T; torch.cuda.synchronize()
    report(f"torch matmul {t},{i},{o}", Yt, exact, absprod, i)
