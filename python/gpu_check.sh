#!/usr/bin/env bash
# The Python package on the GPU machine (no network): builds the wheel with the machine's
# scikit-build-core and nanobind (no build isolation, all cores), installs it into a fresh venv
# that sees the system's torch / numpy / pytest (--system-site-packages), runs the tests
# (pytest -rs: the skip reasons printed), then python/bench/bench_mlp.py (epigemm.torch.MLP
# against PyTorch eager and torch.compile, and the per-call Python overhead) and
# python/bench/profile_mlp.py (where the host time of the MLP step goes). Logs and the results
# markdown go to $OUT (default ./python-gpu-out); a short table is printed last.
#
#   bash python/gpu_check.sh                      # device tool: run it from the repository root
#   STEPS=build,test bash python/gpu_check.sh     # then STEPS=bench,profile in a second call (the
#                                                 # venv and wheel stay in build/python-gpu)
#
# Environment: STEPS (default build,test,bench,profile), BENCH_ARGS (e.g. "--rounds 7 --no-compile"),
# PYTEST_ARGS (e.g. "-k torch"), PROFILE_ARGS (e.g. "--shapes 16384,8192,28672 --steps 5"),
# WORK (default build/python-gpu: venv, wheel, build folder).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/python-gpu-out}
mkdir -p "$OUT"
WORK=${WORK:-$ROOT/build/python-gpu}
STEPS=${STEPS:-build,test,bench,profile}
mkdir -p "$WORK"
has_step() { [[ ",$STEPS," == *",$1,"* ]]; }
PYTHON=${PYTHON:-python3}
step() { echo "== $(date -u +%H:%M:%S) $*"; }

step "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -1
  "$PYTHON" -c 'import sys, torch, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__)' 2>&1
  "$PYTHON" -c 'import nanobind, scikit_build_core; print("nanobind", nanobind.__version__, "scikit-build-core", scikit_build_core.__version__)' 2>&1
  echo "CXXFLAGS='${CXXFLAGS:-}' LDFLAGS='${LDFLAGS:-}'"
} | tee "$OUT/device.txt"

if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  step "$PYTHON is a venv already: the package goes there"
  VPY=$PYTHON
else
  VPY=$WORK/venv/bin/python
  if [ ! -x "$VPY" ]; then
    step "venv (--system-site-packages) in $WORK/venv"
    # --without-pip: no ensurepip needed; the system's pip runs inside the venv.
    "$PYTHON" -m venv --system-site-packages --without-pip "$WORK/venv" || { echo "VENV FAILED"; exit 1; }
  fi
fi

if has_step build; then
  # CUTLASS's headers (the cutlass backend): the wheel's configure extracts them from the pinned
  # wheel in .deps/ (EPIGEMM_FETCH_CUTLASS, pyproject.toml), offline: carry
  # .deps/nvidia_cutlass-*.whl. The "epigemm: cutlass backend ..." line below says whether it did.
  step "build the wheel ($(nproc) cores)"
  rm -rf "$WORK/wheel"
  if ! CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VPY" -m pip wheel --no-build-isolation --no-deps -v \
         -w "$WORK/wheel" -Cbuild-dir="$WORK/build" "$ROOT" > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "BUILD FAILED (full log: $OUT/build.log)"
    exit 1
  fi
  grep -E "CUDA compiler identification|epigemm:" "$OUT/build.log" | head -8
  echo "compiler warnings: $(grep -c -E 'warning:' "$OUT/build.log")"
  "$VPY" -m pip install --no-deps --no-index --force-reinstall "$WORK"/wheel/epigemm-*.whl > "$OUT/install.log" 2>&1 || {
    cat "$OUT/install.log"; echo "INSTALL FAILED"; exit 1; }
  ls -l "$WORK"/wheel/ | tail -1
  # Which libstdc++ the module uses (a static copy shows no libstdc++.so line), and that it
  # exports nothing but its init function.
  module=$(ls "$WORK"/build/python/_epigemm*.so 2>/dev/null | head -1)
  if [ -n "$module" ]; then
    echo "module links: $(ldd "$module" | grep -oE 'lib(stdc\+\+|gomp|openblas|cublas)[^ ]*' | tr '\n' ' ')"
    echo "module exports $(nm -D --defined-only "$module" | wc -l) symbols: $(nm -D --defined-only "$module" | awk '{print $3}' | head -5 | tr '\n' ' ')"
  fi
fi
(cd "$WORK" && "$VPY" -c 'import epigemm; print("epigemm", epigemm.__version__, "with CUDA:", epigemm.with_cuda)
import epigemm.torch as et; print("C++ PyTorch operators used:", et.cpp_operators())') || {
  echo "epigemm is not installed in $VPY: run the build step"; exit 1; }

PYTEST_RC=0
BENCH_RC=0
if has_step test; then
step "pytest -rs"
# From $WORK: the installed package, not the sources, is imported.
# shellcheck disable=SC2086
(cd "$WORK" && timeout 400 "$VPY" -m pytest -rs -q -p no:cacheprovider ${PYTEST_ARGS:-} "$ROOT/python/tests") > "$OUT/pytest.log" 2>&1
PYTEST_RC=$?
tail -15 "$OUT/pytest.log"
fi

if has_step bench; then
step "benchmark: python/bench/bench_mlp.py"
# The GPU's SM clock, power and utilization every 200 ms meanwhile (the log says when each shape
# ran): a shape whose steps wait on the host leaves the GPU idle between kernels, and its clock
# may drop; both paths of a shape run in the same minutes.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv -lms 200 \
  > "$OUT/bench_mlp-clocks.csv" 2>&1 &
SAMPLER=$!
# shellcheck disable=SC2086
(cd "$WORK" && timeout 540 "$VPY" "$ROOT/python/bench/bench_mlp.py" --out "$OUT" ${BENCH_ARGS:-}) > "$OUT/bench_mlp.log" 2>&1
BENCH_RC=$?
kill "$SAMPLER" 2>/dev/null
fi

PROFILE_RC=0
if has_step profile; then
step "host time of the MLP step: python/bench/profile_mlp.py"
# shellcheck disable=SC2086
(cd "$WORK" && timeout 240 "$VPY" "$ROOT/python/bench/profile_mlp.py" ${PROFILE_ARGS:-}) > "$OUT/profile_mlp.log" 2>&1
PROFILE_RC=$?
grep -E "^## |^  (epigemm|PyTorch|Python|the six)" "$OUT/profile_mlp.log"
fi

echo
echo "results and logs in $OUT: device.txt build.log pytest.log bench_mlp.log bench_mlp-clocks.csv profile_mlp.log python-mlp-*.md"
has_step test && echo "pytest: rc $PYTEST_RC, $(tail -1 "$OUT/pytest.log")"
echo "bench:  rc $BENCH_RC"
has_step profile && echo "profile: rc $PROFILE_RC"
has_step bench && sed -n '/^One training step/,$p' "$OUT/bench_mlp.log"
[ $PYTEST_RC -eq 0 ] && [ $BENCH_RC -eq 0 ] && [ $PROFILE_RC -eq 0 ]
