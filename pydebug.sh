#!/usr/bin/env bash
# temporary: find the segfault of the host call from Python on the GPU machine
set -u
W=/tmp/pyw; mkdir -p $W
export SKBUILD_CMAKE_DEFINE="CMAKE_CUDA_ARCHITECTURES=90a"
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip wheel --no-build-isolation --no-deps -w $W/wheel -Cbuild-dir=$W/build . > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 1; }
python3 -m pip install -q --no-deps --no-index --force-reinstall --target $W/site $W/wheel/epigemm-*.whl || exit 1
export PYTHONPATH=$W/site
grep -m1 "model name" /proc/cpuinfo; ldd $W/site/epigemm/*.so | grep -v "linux-vdso"
cat > $W/t.py <<'PY'
import sys, numpy as np
if "torch" in sys.argv: import torch
import epigemm
print("imported", flush=True)
x = np.ones((8, 16), np.float32); w = np.ones((4, 16), np.float32)
for b in sys.argv[1:]:
    if b in ("reference", "cpu", "auto"):
        print(b, epigemm.linear_fprop(x, w, backend=b)[0, :2], flush=True)
PY
cd $W
echo "== auto"; timeout 60 python3 t.py auto 2>&1 | tail -2
echo "== torch with cuda init, auto"; timeout 60 python3 -c "import torch; torch.zeros(1, device='cuda'); import sys; sys.argv=['t','auto']; exec(open('t.py').read())" 2>&1 | tail -2
echo "== cuda-gdb auto"; timeout 150 cuda-gdb -batch -ex run -ex bt -ex "info registers rip" -ex "x/6i \$pc-12" --args python3 t.py auto 2>&1 | grep -v "^\[New Thread\|^\[Thread\|^\[Detaching" | tail -45
