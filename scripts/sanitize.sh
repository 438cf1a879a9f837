#!/usr/bin/env bash
# The sanitizer run: everything built with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# (-fno-sanitize-recover=all, no suppressions), CUDA off; the whole test suite; then the C API
# fuzz target (tests/fuzz/) for FUZZ_SECONDS (default 90) from its seed corpus, with one process.
# CI runs it (.ci/run); `make sanitize` too. Needs clang, libclang-rt-14-dev and libomp-dev
# (scripts/install_deps.sh --ci).
#   SANITIZE_BUILD_DIR  build directory (default build-sanitize)
#   FUZZ_SECONDS        fuzzing time; 0 skips the fuzzing
#   JOBS                parallel build and test jobs (default: the number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
fuzz_seconds=${FUZZ_SECONDS:-90}
jobs=${JOBS:-$(nproc)}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

CC=clang CXX=clang++ cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEPIGEMM_WITH_CUDA=OFF -DEPIGEMM_SANITIZE=address,undefined -DEPIGEMM_FUZZ=ON
cmake --build "$build_dir" -j "$jobs"

# Stack traces in UBSan reports; the ASan options of the test binary are compiled into it
# (tests/harness/sanitizer_defaults.cpp).
export UBSAN_OPTIONS=print_stacktrace=1
(cd "$build_dir" && ctest --output-on-failure -j "$jobs")

if [ "$fuzz_seconds" -gt 0 ]; then
  # New inputs go to a scratch directory (the first one given); the repository's corpus is only read.
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  echo "sanitize: fuzzing the C API for ${fuzz_seconds} s"
  "$build_dir"/tests/fuzz/epigemm_fuzz_c_api -max_total_time="$fuzz_seconds" -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$build_dir/fuzz-" "$scratch" tests/fuzz/corpus \
    >"$build_dir/fuzz.log" 2>&1 || { tail -n 60 "$build_dir/fuzz.log"; echo "sanitize: the fuzz target found a problem (input in $build_dir/fuzz-*)"; exit 1; }
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)" "$build_dir/fuzz.log"
fi
echo "sanitize: no finding"
