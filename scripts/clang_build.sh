#!/usr/bin/env bash
# A clang build of everything (library, tests, tools, benchmarks, examples): CC=clang
# CXX=clang++, and where the CUDA toolkit is present clang++ is nvcc's host compiler too, so the
# CUDA backends are compiled as well. A warning fails it (the project builds -Wall -Wextra clean
# with GCC and clang). CI runs it (.ci/run); `make clang` too. Needs clang and libomp-dev
# (scripts/install_deps.sh --ci).
#   CLANG_BUILD_DIR  build directory (default build-clang)
#   JOBS             parallel build jobs (default: the number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CLANG_BUILD_DIR:-build-clang}
jobs=${JOBS:-$(nproc)}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# nvcc's host compiler comes from CUDAHOSTCXX (CMake reads it on the first configure only).
# The cutlass backend's kernels are left out here: with clang++ as its host compiler, nvcc 13.0's
# generated host stub for CUTLASS 4.2's templated device_kernel does not compile ("explicit
# specialization of '__wrapper__device_stub_device_kernel<...>' after instantiation", 8 errors
# in a kernel translation unit). They are built, warning-free, in the GCC build.
cuda=""
if command -v nvcc >/dev/null 2>&1; then
  cuda=" (CUDA with clang++ as nvcc's host compiler; the cutlass kernels only in the GCC build)"
fi

CC=clang CXX=clang++ CUDAHOSTCXX=clang++ cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DEPIGEMM_WITH_CUTLASS=OFF
mkdir -p "$build_dir"
cmake --build "$build_dir" -j "$jobs" 2>&1 | tee "$build_dir/build.log"
if grep -q "warning:" "$build_dir/build.log"; then
  grep "warning:" "$build_dir/build.log"
  echo "clang build: the warnings above"
  exit 1
fi
echo "clang build: everything built without warnings${cuda}"
